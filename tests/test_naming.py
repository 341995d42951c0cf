import pytest

from aksgpu.config import naming


@pytest.mark.parametrize("name, ok", [
    ("gpu", True), ("nc4ast4", True), ("a", True), ("abcdefghijkl", True),
    ("abcdefghijklm", False), ("4gpu", False), ("gpu-pool", False), ("GPU", False), ("", False),
])
def test_agent_pool_names_follow_aks_linux_rule(name, ok):
    assert (naming.agent_pool_name_error(name) is None) == ok


@pytest.mark.parametrize("name, ok", [("ab", False), ("abc", True), ("a" * 24, True), ("a" * 25, False),
                                      ("Upper123", False), ("with-dash", False)])
def test_storage_account_names_are_3_to_24_lowercase_alphanumerics(name, ok):
    assert (naming.storage_account_name_error(name) is None) == ok


@pytest.mark.parametrize("name, ok", [("abcd", False), ("abcde", True), ("a" * 50, True), ("a" * 51, False),
                                      ("MyRegistry1", True), ("my-registry", False)])
def test_registry_names_are_5_to_50_alphanumerics(name, ok):
    assert (naming.acr_name_error(name) is None) == ok


@pytest.mark.parametrize("name, ok", [("input", True), ("ab", False), ("a-b-c", True), ("a--b", False),
                                      ("-ab", False), ("ab-", False), ("Input", False), ("a" * 63, True),
                                      ("a" * 64, False)])
def test_blob_container_names_follow_azure_rules(name, ok):
    assert (naming.blob_container_name_error(name) is None) == ok


def test_root_from_stack_is_always_a_valid_root():
    for stack in ["dev", "x", "", "av-resim", "Training_Autoscale", "123", "a" * 40, "x--y", "a" * 19 + "-b"]:
        root = naming.root_from_stack(stack)
        assert naming.name_root_error(root) is None, (stack, root)


def test_derived_global_names_are_valid_stable_and_distinct_per_project_stack():
    a = naming.Naming("training-autoscale", "aksgpu/training-autoscale")
    b = naming.Naming("training-autoscale", "other/training-autoscale")
    for n in (a, b):
        assert naming.acr_name_error(n.registry()) is None
        assert naming.storage_account_name_error(n.storage_account("checkpoints")) is None
    assert a.registry() == naming.Naming("training-autoscale", "aksgpu/training-autoscale").registry()
    assert a.registry() != b.registry()
    assert a.storage_account("input") != a.storage_account("output")
