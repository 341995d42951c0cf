import pytest

from program.config import naming


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


@pytest.mark.parametrize("name, ok", [
    ("dev", True), ("_scratch", True), (".scratch", True), ("-scratch", True), ("a.b_c-1", True), ("a" * 100, True),
    ("...", True), ("", False), ("a" * 101, False), ("x/y", False), ("my stack", False), ("x!", False),
    ("ünï", False), (".", False), ("..", False)])
def test_stack_names_follow_pulumis_rule_less_the_two_dot_segments(name, ok):
    """pulumi/pulumi sdk/go/common/tokens/stack_name.go ParseStackName (v3.259.0): 1-100 of [A-Za-z0-9_.-], any of
    them first (issue 35 audit NIT: '_', '.' and '-' first were refused). '.' and '..' would put a stack's render
    folder on its output folder or the folder above it, which a render replaces."""
    assert (naming.stack_name_error(name) is None) == ok


def test_root_from_stack_is_a_valid_root_or_too_long_never_cut():
    for stack in ["dev", "x", "", "av-resim", "Training_Autoscale", "123", "x--y", "a" * 18 + "-b", "-x", "_x",
                  ".x", "..."]:
        root = naming.root_from_stack(stack)
        assert naming.name_root_error(root) is None, (stack, root)
    assert naming.root_from_stack("training-autoscale-staging") == "training-autoscale-staging"
    assert naming.shorter_root("training-autoscale-staging") == "ta-staging"


def test_a_stack_name_too_long_for_a_root_is_refused_naming_a_shorter_one():
    """Cut to 20 characters, training-autoscale-staging and -sandbox would share rg-, aks- and vnet- names."""
    from program.config.errors import ConfigError
    from tests.helpers import load
    for stack, suggestion in (("training-autoscale-staging", "ta-staging"),
                              ("training-autoscale-sandbox", "ta-sandbox")):
        with pytest.raises(ConfigError, match=f"set nameRoot, e.g. '{suggestion}'"):
            load({}, stack)
    assert load({"nameRoot": "ta-staging"}, "training-autoscale-staging").naming.resource_group() == "rg-ta-staging"


def test_two_deployments_of_one_stack_share_no_globally_unique_name():
    """Every clone deploys into its own subscription: its registry, storage accounts and Grafana (DNS names
    across all of Azure) must not collide with another team's, nor with this repository's CI."""
    from tests.helpers import render_with
    config = {"storage": {"accounts": [{"role": "data"}]}, "monitoring": {"grafana": True}}
    globals_ = {"azure-native:containerregistry:Registry": "registryName",
                "azure-native:storage:StorageAccount": "accountName", "azure-native:dashboard:Grafana": "workspaceName"}

    def names(subscription: str) -> set[str]:
        r = render_with("gpu-basics", subscription=subscription, **config)
        found = {x.inputs[key] for typ, key in globals_.items() for x in r.of_type(typ)}
        assert len(found) >= 3
        return found

    ours, theirs = names("aaaaaaaa-0000-0000-0000-000000000001"), names("bbbbbbbb-0000-0000-0000-000000000002")
    assert not ours & theirs
    assert ours == names("aaaaaaaa-0000-0000-0000-000000000001")  # stable for the deployment's life


def test_derived_global_names_are_valid_stable_and_distinct_per_subscription_project_stack():
    a = naming.Naming("training-autoscale", "sub-1/aksgpu/training-autoscale")
    b = naming.Naming("training-autoscale", "sub-2/aksgpu/training-autoscale")
    for n in (a, b):
        assert naming.acr_name_error(n.registry()) is None
        assert naming.storage_account_name_error(n.storage_account("checkpoints")) is None
    assert a.registry() == naming.Naming("training-autoscale", "sub-1/aksgpu/training-autoscale").registry()
    assert a.registry() != b.registry()
    assert a.storage_account("input") != a.storage_account("output")
