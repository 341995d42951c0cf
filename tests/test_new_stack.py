"""A new environment is one command (Why #6, newcomer #12): a stack file for an existing scenario, checked, with
the generated docs brought up to date."""

from __future__ import annotations

import shutil

import pytest

from offline.docs import write_docs
from offline.new_stack import new_stack_file
from offline.render import render_stack
from offline.stack_files import REPO_ROOT, read_yaml, stack_config, stack_files
from program.config.errors import ConfigError


@pytest.fixture
def project(tmp_path):
    for name in ("README.md", "Pulumi.yaml", *(p.name for p in stack_files().values())):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    return tmp_path


def test_a_new_environment_copies_a_stack_of_its_scenario_with_what_it_changes(project):
    path = new_stack_file("ta-staging", "training-autoscale", {"owner": "ml-platform", "lifetime": "long-lived"},
                          root=project)
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=./docs/stack-file.schema.json\n# ta-staging: an "
                           "environment of scenario training-autoscale, from Pulumi.training-autoscale.yaml")
    config = read_yaml(path)["config"]
    assert config["aksgpu:owner"] == "ml-platform" and config["aksgpu:lifetime"] == "long-lived"
    assert text.count("aksgpu:owner:") == 1  # replaced, not added twice
    assert stack_config("ta-staging", path).scenario == "training-autoscale"


def test_its_docs_are_regenerated_so_the_tests_pass_at_once(project, renders):
    path = new_stack_file("gb-eu", "gpu-basics", {}, root=project)
    with_it = {**renders, "gb-eu": render_stack("gb-eu", path)}
    stale = write_docs(check=True, root=project, renders=with_it)
    assert stale and all(p.name in ("README.md", "estimates.md", "scoreboard.md") for p in stale)
    write_docs(root=project, renders=with_it)
    assert "| `Pulumi.gb-eu.yaml` |" in (project / "README.md").read_text()
    assert write_docs(check=True, root=project, renders=with_it) == []


def test_a_stack_name_too_long_for_names_is_refused_with_a_shorter_root_and_leaves_no_file(project):
    with pytest.raises(ConfigError, match=r"set nameRoot, e\.g\. 'ta-staging'"):
        new_stack_file("training-autoscale-staging", "training-autoscale", {}, root=project)
    assert not (project / "Pulumi.training-autoscale-staging.yaml").exists()
    path = new_stack_file("training-autoscale-staging", "training-autoscale", {"nameRoot": "ta-staging"},
                          root=project)
    assert stack_config("training-autoscale-staging", path).naming.resource_group() == "rg-ta-staging"


@pytest.mark.parametrize("name", ["_scratch", ".scratch", "-scratch"])
def test_a_stack_name_pulumi_takes_is_a_new_environment_whatever_its_first_character(project, name):
    path = new_stack_file(name, "dev", {}, root=project)
    assert path.name == f"Pulumi.{name}.yaml" and stack_files(project)[name] == path
    assert stack_config(name, path).naming.resource_group() == "rg-scratch"  # the root drops what Azure refuses


def test_an_existing_stack_or_an_unknown_model_is_refused(project):
    with pytest.raises(ValueError, match="Pulumi.dev.yaml already exists"):
        new_stack_file("dev", "gpu-basics", {}, root=project)
    with pytest.raises(ValueError, match="no stack 'nope' to start from"):
        new_stack_file("x1", "nope", {}, root=project)


def test_a_mistyped_model_stack_gets_a_did_you_mean(project):
    with pytest.raises(ValueError, match=r"no stack 'gpu-shareing' to start from; did you mean gpu-sharing\?"):
        new_stack_file("gs-eu", "gpu-shareing", {}, root=project)


def _args(**given):
    import argparse
    return argparse.Namespace(**{"like": "dev", "owner": None, "lifetime": None, **given})


def test_owner_and_lifetime_are_asked_in_a_terminal_with_the_copied_values_as_defaults():
    """Newcomer #12: `--like dev` silently copied `lifetime: long-lived` and dev's owner."""
    from offline.new_stack import asked_settings
    dev = stack_config("dev")
    questions = []
    answers = iter(["ml-team", ""])
    settings = asked_settings(_args(), dev, lambda q: questions.append(q) or next(answers))
    assert settings == {"owner": "ml-team", "lifetime": dev.lifetime.value}
    assert questions[0].startswith("owner (") and questions[0].endswith(f"[{dev.owner}]: ")
    assert questions[1].startswith("lifetime (demo") and questions[1].endswith(f"[{dev.lifetime.value}]: ")


def test_without_a_terminal_owner_and_lifetime_are_flags_or_an_error_naming_them():
    from offline.new_stack import asked_settings
    dev = stack_config("dev")
    with pytest.raises(ValueError, match=r"--owner and --lifetime needed \(not asked: no terminal\); dev has owner "):
        asked_settings(_args(), dev, None)
    assert asked_settings(_args(owner="ci", lifetime="demo"), dev, None) == {"owner": "ci", "lifetime": "demo"}


def test_the_command_says_what_it_copied_and_what_was_set(project):
    from offline.new_stack import copied
    path = new_stack_file("gb-eu", "gpu-basics", {"owner": "ml-team", "lifetime": "demo"}, root=project)
    line = copied(stack_config("gb-eu", path), "gpu-basics")
    assert line.startswith("copied from Pulumi.gpu-basics.yaml: scenario gpu-basics, region eastus, GPU pools t4 "
                           "Standard_NC4as_T4_v3 spot 0–2; set: owner ml-team, lifetime demo")


def test_a_value_given_on_the_command_line_is_written_as_given(project):
    """Unquoted, `team # ml` would be read back as `team` (YAML starts a comment at ` #`)."""
    path = new_stack_file("gb-two", "gpu-basics", {"owner": "team # ml", "nameRoot": "gb-two"}, root=project)
    assert stack_config("gb-two", path).owner == "team # ml"


def test_a_private_stack_gets_an_address_space_no_stack_file_uses_with_its_subnets_moved(project):
    """Round-4 Azure audit #7: `--like av-resim` copied 10.40.0.0/16, which the runner VNet already peered with
    av-resim cannot take again (Azure peers a VNet only with spaces that do not overlap)."""
    from offline.new_stack import private_network
    files = stack_files(project)
    taken = {s: stack_config(s, p).network.address_space for s, p in files.items()}
    network = private_network(stack_config("av-resim", files["av-resim"]), taken, None)
    assert network is not None
    path = new_stack_file("av-resim-two", "av-resim", {"nameRoot": "avr-two"}, root=project, network=network)
    cfg = stack_config("av-resim-two", path)
    import ipaddress
    space = ipaddress.IPv4Network(cfg.network.address_space)
    assert space.prefixlen == 16 and not any(space.overlaps(ipaddress.IPv4Network(t)) for t in taken.values())
    assert (cfg.network.node_subnet, cfg.network.endpoint_subnet) == (
        str(next(space.subnets(new_prefix=20))), str(ipaddress.IPv4Network((int(space.network_address) + 16 * 256,
                                                                            24))))
    text = path.read_text()
    assert "10.40." not in text  # the comments that named the copied space name the new one
    assert text.count("addressSpace:") == 1


def test_an_address_space_another_stack_file_uses_is_refused_naming_it_and_a_free_one():
    from offline.new_stack import private_network
    like = stack_config("av-resim")
    taken = {s: stack_config(s).network.address_space for s in stack_files()}
    with pytest.raises(ValueError, match=r"--address-space 10\.40\.128\.0/17 overlaps 10\.40\.0\.0/16 of stack "
                                         r"av-resim: .* free: 10\.\d+\.0\.0/16$"):
        private_network(like, taken, "10.40.128.0/17")
    with pytest.raises(ValueError, match=r"address space 10\.77\.0\.0/24 is too small for the copied subnet "):
        private_network(like, taken, "10.77.0.0/24")
    assert private_network(stack_config("gpu-basics"), taken, None) is None  # peered with nothing: copied as is


def test_the_address_space_is_asked_in_a_terminal_with_a_free_one_as_the_default():
    from offline.new_stack import asked_network
    like = stack_config("av-resim")
    taken = {s: stack_config(s).network.address_space for s in stack_files()}
    questions = []
    picked = asked_network(_args(like="av-resim", address_space=None), like, taken,
                           lambda q: questions.append(q) or "")
    assert picked is not None and questions and questions[0].endswith(f"[{picked['addressSpace']}]: ")
    assert "av-resim has 10.40.0.0/16" in questions[0]
    given = asked_network(_args(like="av-resim", address_space=None), like, taken, lambda q: "10.99.0.0/16")
    assert given is not None and given["nodeSubnet"] == "10.99.0.0/20"


def test_a_copy_beside_its_model_on_one_runner_is_refused_and_leaves_no_file(project):
    """The same address space (or both stacks' own zones) on one runner VNet: refused in config, before Azure."""
    runner = ("/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg-runners/providers/"
              "Microsoft.Network/virtualNetworks/vnet-runners")
    model = project / "Pulumi.av-resim.yaml"
    model.write_text(model.read_text().replace("    # runnerVnetId: /subscriptions/<id>/resourceGroups/<group>/"
                                               "providers/Microsoft.Network/virtualNetworks/<name>",
                                               f"    runnerVnetId: {runner}"))
    assert stack_config("av-resim", model).network.runner_vnet_id == runner
    with pytest.raises(ConfigError, match=r"aksgpu:network\.addressSpace.*overlaps 10\.40\.0\.0/16 of stack "
                                          r"av-resim, which peers the same runner VNet"):
        new_stack_file("avr-b", "av-resim", {}, root=project)
    assert not (project / "Pulumi.avr-b.yaml").exists()


def test_a_copy_never_takes_azures_default_vnet_space_nor_the_runners_own():
    """Issue 33c audit #9: the first free /16 of 10.0.0.0/8 was 10.0.0.0/16, the address space `az network vnet
    create` gives a VNet by default (Azure/azure-cli network/aaz/latest/network/vnet/_create.py: "Default:
    10.0.0.0/16"), so a runner VNet made with defaults, and its peering then refused (peered VNets "must have
    nonoverlapping IP address spaces", virtual-network-manage-peering). The copied stack's
    network.runnerAddressSpaces are avoided too, and a space given over them is refused naming them."""
    import ipaddress

    from offline.new_stack import AZURE_DEFAULT_SPACE, private_network
    like = stack_config("av-resim")
    taken = {s: stack_config(s).network.address_space for s in stack_files()}
    picked = ipaddress.IPv4Network(private_network(like, taken, None)["addressSpace"])
    assert not picked.overlaps(AZURE_DEFAULT_SPACE)
    runner = like.model_copy(update={"network": like.network.model_copy(update={
        "runner_vnet_id": "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/runners",
        "runner_address_spaces": (str(picked), "10.2.0.0/15")})})
    avoided = ipaddress.IPv4Network(private_network(runner, taken, None)["addressSpace"])
    assert not any(avoided.overlaps(ipaddress.IPv4Network(s)) for s in (*runner.network.runner_address_spaces,
                                                                          *taken.values(), str(AZURE_DEFAULT_SPACE)))
    with pytest.raises(ValueError, match=rf"--address-space 10\.3\.0\.0/16 overlaps 10\.2\.0\.0/15 of the runner VNet "
                                         rf"\(network\.runnerAddressSpaces\).* free: {avoided}$"):
        private_network(runner, taken, "10.3.0.0/16")


def test_without_the_runners_space_the_command_says_what_to_check(project, monkeypatch, capsys):
    """Issue 33c audit #9: where the copied file does not give the runner's address space, the space picked is
    checked against the stack files and Azure's default only: the command says so, and how to look it up."""
    from offline import new_stack
    monkeypatch.setattr(new_stack, "stack_files", lambda root=None: stack_files(project))
    monkeypatch.setattr(new_stack, "new_stack_file", lambda name, like, settings, network=None:
                        new_stack_file(name, like, settings, root=project, network=network))
    monkeypatch.setattr("offline.docs.write_docs", lambda *a, **k: [])
    args = _args(like="av-resim", name="avr-copy", name_root=None, owner="ml", lifetime="demo", address_space=None)
    assert new_stack.new_stack_command(args) == 0
    err = capsys.readouterr().err
    assert ("warning: the runner VNet's address space is not in the copied file (network.runnerAddressSpaces): check "
            "the picked one against az network vnet show --ids <runner VNet id> --query addressSpace.addressPrefixes"
            in err)
