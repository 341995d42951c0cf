import pytest

from aksgpu.config.gpu_sizes import GPU_SIZES, RETIRED_SIZES, lookup_gpu_size, suggest_gpu_sizes


def test_k80_nc6_is_refused_with_its_retirement_and_t4_replacement():
    with pytest.raises(ValueError) as e:
        lookup_gpu_size("Standard_NC6")
    assert str(e.value) == ("Standard_NC6 is NC-series (Tesla K80), retired by Azure on 2023-09-06; "
                            "use Standard_NC4as_T4_v3")


def test_seed_003_a100_typo_suggests_the_nc_a100_v4_sizes_including_nc48ads():
    assert "Standard_NC48ads_A100_v4" in suggest_gpu_sizes("Standard_NCA100ads_A100_v4")
    with pytest.raises(ValueError, match="did you mean .*Standard_NC48ads_A100_v4"):
        lookup_gpu_size("Standard_NCA100ads_A100_v4")


def test_wrong_case_suggests_exactly_the_canonical_name():
    assert suggest_gpu_sizes("standard_nc4as_t4_v3") == ["Standard_NC4as_T4_v3"]


def test_fractional_a10_sizes_are_refused_because_no_whole_gpu_is_schedulable():
    with pytest.raises(ValueError, match="1/6 of an A10"):
        lookup_gpu_size("Standard_NV6ads_A10_v5")


def test_every_retired_size_points_at_a_size_in_the_catalogue_with_at_least_one_gpu():
    for name, retired in RETIRED_SIZES.items():
        assert retired.replacement in GPU_SIZES, name


@pytest.mark.parametrize("name, model, gpus", [
    ("Standard_NC4as_T4_v3", "T4", 1),
    ("Standard_NC64as_T4_v3", "T4", 4),
    ("Standard_NC48ads_A100_v4", "A100", 2),
    ("Standard_NC40ads_H100_v5", "H100 NVL", 1),
    ("Standard_NV36ads_A10_v5", "A10", 1),
])
def test_catalogue_records_gpu_model_and_count(name, model, gpus):
    size = lookup_gpu_size(name)
    assert (size.gpu_model, size.gpus) == (model, gpus)


def test_only_a100_and_h100_sizes_are_mig_capable_and_only_a10_needs_grid():
    assert {s.gpu_model for s in GPU_SIZES.values() if s.mig} == {"A100", "H100", "H100 NVL"}
    assert {s.gpu_model for s in GPU_SIZES.values() if s.grid} == {"A10"}
