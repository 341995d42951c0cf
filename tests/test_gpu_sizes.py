import pytest

from components.gpu.sizes import GPU_SIZES, RETIRED_SIZES, lookup_gpu_size, suggest_gpu_sizes


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


def test_only_a100_h100_and_h200_sizes_are_mig_capable_and_only_a10_needs_grid():
    assert {s.gpu_model for s in GPU_SIZES.values() if s.mig} == {"A100", "H100", "H100 NVL", "H200"}
    assert {s.gpu_model for s in GPU_SIZES.values() if s.grid} == {"A10"}


def test_current_sizes_are_in_the_catalogue_with_their_gpu_and_quota_family():
    h200 = lookup_gpu_size("Standard_ND96isr_H200_v5")
    assert (h200.gpu_model, h200.gpus, h200.gpu_memory_gib, h200.vcpus) == ("H200", 8, 141, 96)
    assert h200.family == "standardNDISRH200V5Family" and h200.infiniband and h200.mig
    a100 = lookup_gpu_size("Standard_ND96amsr_A100_v4")
    assert (a100.gpu_model, a100.gpu_memory_gib, a100.infiniband) == ("A100", 80, True)
    assert not lookup_gpu_size("Standard_NC4as_T4_v3").infiniband


def test_a_size_the_catalogue_does_not_know_says_how_to_refresh_or_add_it():
    with pytest.raises(ValueError) as e:
        lookup_gpu_size("Standard_ND128isr_NDR_GB200_v6")
    assert "refresh it with `python -m ops catalogue`" in str(e.value)
    assert "`source: manual` row" in str(e.value)


def test_a_catalogue_row_of_an_unknown_gpu_family_is_refused_when_loaded(tmp_path):
    from components.gpu.sizes import load_catalogue
    path = tmp_path / "catalogue.yaml"
    path.write_text("refreshed: null\nsizes:\n  Standard_NC8ads_X9_v9: {family: StandardNCX9Family, vcpus: 8, "
                    "memory_gib: 64, gpus: 1, source: manual}\n")
    with pytest.raises(ValueError, match="StandardNCX9Family.*add the family's GPU there"):
        load_catalogue(path)


def _refreshed(monkeypatch, name, **fields):
    """As if a refresh had recorded ``fields`` (regions, spot) for ``name``."""
    import dataclasses
    monkeypatch.setitem(GPU_SIZES, name, dataclasses.replace(GPU_SIZES[name], **fields))


def test_a_refreshed_catalogue_refuses_a_size_its_region_does_not_offer(monkeypatch):
    from program.config.errors import ConfigError
    from tests.helpers import load
    _refreshed(monkeypatch, "Standard_ND96isr_H200_v5", regions={"eastus2": ("1", "3"), "swedencentral": ()})
    pool = {"name": "h200", "vmSize": "Standard_ND96isr_H200_v5", "priority": "regular"}
    with pytest.raises(ConfigError, match="pool 'h200': not offered in location eastus .*regions that offer it: "
                                          "eastus2, swedencentral"):
        load({"gpuPools": [pool]})
    with pytest.raises(ConfigError, match=r"not offered in zone\(s\) 2 of eastus2; it is in zones: 1, 3"):
        load({"location": "eastus2", "gpuPools": [{**pool, "zones": ["1", "2"]}]})
    assert load({"location": "eastus2", "gpuPools": [{**pool, "zones": ["1", "3"]}]})


def test_a_refreshed_catalogue_refuses_spot_on_a_size_that_cannot_run_as_spot(monkeypatch):
    from program.config.errors import ConfigError
    from tests.helpers import load
    _refreshed(monkeypatch, "Standard_ND96isr_H100_v5", spot=False)
    with pytest.raises(ConfigError, match="cannot run as spot .* use priority regular"):
        load({"gpuPools": [{"name": "h100", "vmSize": "Standard_ND96isr_H100_v5"}]})
