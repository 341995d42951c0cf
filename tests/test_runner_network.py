"""A private stack deployed from a runner's VNet (`network.runnerVnetId`): peerings and DNS links in state, so the
first `pulumi up` from there completes and a destroy removes them before their zones (round-3 audit #4, #18); a
second private stack on the same runner VNet, through existing zones (`network.privateDnsZoneIds`) and an address
space of its own (round-4 Azure audit #7)."""

from __future__ import annotations

import re

import pytest

from components.azure.cluster import api_server_zone
from offline.mocks import SUBSCRIPTION
from program.config.rules import between_stacks
from tests.helpers import load, render_with, shape

RUNNER_VNET = ("/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg-runners/providers/"
               "Microsoft.Network/virtualNetworks/vnet-runners")
PEERING = "azure-native:network:VirtualNetworkPeering"
LINK = "azure-native:privatedns:VirtualNetworkLink"
PROVIDER = "pulumi:providers:azure-native"
HUB = "/subscriptions/99999999-8888-7777-6666-555555555555/resourceGroups/rg-hub-dns/providers/Microsoft.Network/"
HUB_ZONES = {"registry": HUB + "privateDnsZones/privatelink.azurecr.io",
             "blob": HUB + "privateDnsZones/privatelink.blob.core.windows.net"}
"""A hub's central privatelink zones, in a connectivity subscription of their own (Cloud Adoption Framework,
"Private Link and DNS integration at scale": zones "hosted centrally in the same Azure subscription where the hub VNet
is deployed")."""


@pytest.fixture(scope="module")
def r():
    config = shape("private-two-pools")
    return render_with("av-resim", **{**config, "network": {**config.get("network", {}),
                                                            "runnerVnetId": RUNNER_VNET}})


def test_the_runner_vnet_is_peered_both_ways(r):
    peerings = {p.name: p.inputs for p in r.of_type(PEERING)}
    ours, theirs = peerings["net-to-runner"], peerings["net-from-runner"]
    assert ours["remoteVirtualNetwork"]["id"] == RUNNER_VNET and ours["virtualNetworkName"] == r.cfg.naming.vnet()
    assert (theirs["resourceGroupName"], theirs["virtualNetworkName"]) == ("rg-runners", "vnet-runners")
    assert theirs["remoteVirtualNetwork"]["id"].endswith(f"/virtualNetworks/{r.cfg.naming.vnet()}")
    # One runner VNet may serve several stacks: its side is named after the stack's VNet.
    assert theirs["virtualNetworkPeeringName"] == f"to-{r.cfg.naming.vnet()}"
    for p in (ours, theirs):
        assert p["allowVirtualNetworkAccess"] is True and p["allowForwardedTraffic"] is False
        assert p["useRemoteGateways"] is False


def test_every_private_zone_is_linked_to_the_runner_in_state(r):
    """docs: the private DNS zones are linked only to the cluster's VNet (aks private-clusters); links made by hand
    outside state make destroy fail on the zones ("Cannot delete resource while nested resources exist")."""
    runner_links = {link.name: link for link in r.of_type(LINK) if link.inputs["virtualNetwork"]["id"] == RUNNER_VNET}
    assert set(runner_links) == {"net-registry-zone-runner-link", "net-blob-zone-runner-link",
                                 "aks-api-zone-runner-link"}
    for name in ("registry", "blob"):
        assert f"net-{name}-zone" in runner_links[f"net-{name}-zone-runner-link"].depends_on  # deleted before its zone
    api = runner_links["aks-api-zone-runner-link"].inputs
    assert api["resourceGroupName"] == r.cfg.naming.node_resource_group()
    assert api["privateZoneName"].endswith(".privatelink.eastus.azmk8s.io")


def test_kubernetes_calls_and_image_pushes_wait_for_the_runners_network(r):
    links = {x.name for x in (*r.of_type(PEERING), *r.of_type(LINK)) if "runner" in x.name}
    assert links <= r.upstream("k8s-provider")
    assert links - {"aks-api-zone-runner-link"} <= r.upstream("image-jobs-image")
    # Peerings write to the VNet too: AKS takes it over after them.
    assert {"net-to-runner", "net-from-runner"} <= r.upstream("aks-aks")


def test_the_api_server_zone_is_its_private_fqdn_without_the_host():
    assert api_server_zone("aks-x-1a2b.0d9c.privatelink.eastus.azmk8s.io") == "0d9c.privatelink.eastus.azmk8s.io"
    with pytest.raises(ValueError, match="not a private API server FQDN"):
        api_server_zone("aks-x-1a2b.hcp.eastus.azmk8s.io")


def test_a_runner_vnet_is_refused_where_nothing_is_private_or_the_id_is_not_a_vnets():
    from program.config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"aksgpu:network\.runnerVnetId.*this stack has none"):
        load({"scenario": "gpu-basics", "network": {"runnerVnetId": RUNNER_VNET}})
    with pytest.raises(ConfigError, match=r"aksgpu:network\.runnerVnetId.*virtual network's resource id"):
        load({"scenario": "gpu-basics", "cluster": {"private": True},
              "network": {"runnerVnetId": "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Network/vnet"}})


def test_the_docs_say_how_to_reach_kept_private_data_after_a_destroy():
    """Round-3 audit #17: the kept output account has no public access and its endpoint is gone."""
    from offline.stack_files import REPO_ROOT
    text = (REPO_ROOT / "docs" / "deploying.md").read_text().split("**Kept data after a destroy.**", 1)[1]
    assert "pulumi up" in text
    assert "--public-network-access Enabled" in text and "--public-network-access Disabled" in text


def _private(runner: str = RUNNER_VNET, **network):
    config = shape("private-two-pools")
    return {**config, "network": {**config.get("network", {}), "runnerVnetId": runner, **network}}


@pytest.fixture(scope="module")
def hub():
    return render_with("av-resim", **_private(privateDnsZoneIds=HUB_ZONES))


def test_a_runner_vnet_in_another_subscription_is_peered_through_a_provider_for_it(r):
    """Round-4 Azure audit #7: the runner's side was written with its resource group name only, so into the
    deployment's subscription (ResourceNotFound for a runner elsewhere). A runner in the deployment's subscription
    takes the default provider, as before."""
    providers = {p.name: p for p in r.of_type(PROVIDER)}
    theirs = r.named("net-from-runner")
    assert theirs.provider is not None and theirs.provider.split("::")[-1].startswith("net-provider-11111111")
    assert [p.inputs["subscriptionId"] for p in providers.values()] == ["11111111-2222-3333-4444-555555555555"]
    assert r.named("net-to-runner").provider is None
    same = RUNNER_VNET.replace("11111111-2222-3333-4444-555555555555", SUBSCRIPTION)
    local = render_with("av-resim", **_private(same))
    assert not local.of_type(PROVIDER) and local.named("net-from-runner").provider is None


def test_existing_zones_replace_the_stacks_own_and_none_is_linked_to_the_runner_again(hub):
    """Microsoft (private-endpoint-dns-integration): "A single private DNS zone is required ... link the same private
    DNS zones to all spokes and hub virtual networks that contain clients that need DNS resolution from the zones";
    a VNet takes one zone of a name (CreateOrUpdateVirtualNetworkLinkFailed), so the runner, already resolving
    through the hub's zones, gets no link from this stack."""
    assert not hub.of_type("azure-native:privatedns:PrivateZone")
    links = {link.name: link for link in hub.of_type(LINK)}
    assert set(links) == {"net-registry-zone-link", "net-blob-zone-link", "aks-api-zone-runner-link"}
    for service, zone_id in HUB_ZONES.items():
        link = links[f"net-{service}-zone-link"]
        assert (link.inputs["resourceGroupName"], link.inputs["privateZoneName"]) == ("rg-hub-dns",
                                                                                      zone_id.rsplit("/", 1)[1])
        assert link.inputs["virtualNetwork"]["id"].endswith(f"/virtualNetworks/{hub.cfg.naming.vnet()}")
        # Unique among the zone's links from every stack and clone: the VNet's name and the deployment's subscription.
        assert link.inputs["virtualNetworkLinkName"] == f"{hub.cfg.naming.vnet()}-{SUBSCRIPTION[:8]}"
        assert link.provider is not None and "net-provider-99999999" in link.provider  # the hub's subscription
    groups = {g.name: g.inputs for g in hub.of_type("azure-native:network:PrivateDnsZoneGroup")}
    assert groups and {c["privateDnsZoneId"] for g in groups.values() for c in g["privateDnsZoneConfigs"]} <= \
        set(HUB_ZONES.values())
    # The links still write to the VNet before AKS takes it over.
    assert {"net-registry-zone-link", "net-blob-zone-link"} <= hub.upstream("aks-aks")


@pytest.mark.parametrize("zones, says", [
    ({"blob": HUB_ZONES["registry"]}, r"privateDnsZoneIds\.blob.*names zone privatelink\.azurecr\.io; a private blob "
                                      r"endpoint resolves through privatelink\.blob\.core\.windows\.net"),
    ({"registry": HUB + "virtualNetworks/vnet-hub"}, r"privateDnsZoneIds\.registry.*private DNS zone's resource id"),
])
def test_a_zone_that_cannot_resolve_its_service_is_refused_in_one_line(zones, says):
    from program.config.errors import ConfigError
    with pytest.raises(ConfigError, match=says):
        load(_private(privateDnsZoneIds=zones))


def test_a_zone_for_a_service_the_stack_keeps_public_is_refused_not_ignored():
    from program.config.errors import ConfigError
    config = _private(privateDnsZoneIds={"registry": HUB_ZONES["registry"]})
    config["registry"] = {**config.get("registry", {}), "private": False}
    config["build"] = {"mode": "acr"}
    with pytest.raises(ConfigError, match=r"privateDnsZoneIds\.registry.*registry\.private is false"):
        load(config)


def test_two_stack_files_on_one_runner_vnet_must_not_overlap_nor_both_link_their_own_zones():
    """Round-4 Azure audit #7: a second private stack on the runner's VNet failed twice in Azure: its peering (the
    same address space) and its zone links. Config says so first, on the new stack, naming the other."""
    first = load(_private(), stack="av-resim")
    copy = load(_private(), stack="av-resim-staging")
    both = {"av-resim": first, "av-resim-staging": copy}
    found = {(c.stacks, c.error.key) for c in between_stacks(both, new={"av-resim-staging"})}
    assert found == {(("av-resim-staging",), "aksgpu:network.addressSpace"),
                     (("av-resim-staging",), "aksgpu:network.privateDnsZoneIds.registry"),
                     (("av-resim-staging",), "aksgpu:network.privateDnsZoneIds.blob")}
    message = str(next(c.error for c in between_stacks(both, new={"av-resim-staging"})))
    assert "stack av-resim," in message and "\n" not in message
    apart = load(_private(addressSpace="10.41.0.0/16", nodeSubnet="10.41.0.0/20", endpointSubnet="10.41.16.0/24",
                          privateDnsZoneIds=HUB_ZONES), stack="av-resim-staging")
    assert between_stacks({"av-resim": first, "av-resim-staging": apart}) == []
    elsewhere = load(_private(RUNNER_VNET.replace("vnet-runners", "vnet-other")), stack="av-resim-staging")
    assert between_stacks({"av-resim": first, "av-resim-staging": elsewhere}) == []


@pytest.mark.parametrize("new", [{"aa-new"}, set()])
def test_a_clash_is_put_on_the_new_stack_and_never_tells_a_deployed_one_to_change(new):
    """Issue 33c audit #8: `offline render` put the clash on the later stack in name order, so a new `aa-new` beside
    the deployed `av-resim` made it tell av-resim to take another address space (replacing its VNet and cluster)
    and to name aa-new's zones. The new stack's config (new-stack's file, render --config) takes the clash; between
    two others, neither is told to change what may be deployed, and both are named."""
    deployed, added = load(_private(), stack="av-resim"), load(_private(), stack="aa-new")
    clashes = between_stacks(dict(sorted({"av-resim": deployed, "aa-new": added}.items())), new=new)
    assert clashes and all(c.stacks == (("aa-new",) if new else ("aa-new", "av-resim")) for c in clashes)
    for c in clashes:
        text = str(c.error)
        if new:
            assert "rg-aa-new" not in text  # av-resim is never told to name the new stack's zones
        else:
            assert re.search(r"stacks aa-new .*and av-resim ", text), text
        assert "give this stack" not in text
    space = next(str(c.error) for c in clashes if c.error.key.endswith("addressSpace"))
    assert space.endswith("a deployed stack keeps its own: changing it replaces its VNet, and its cluster with it")


def test_render_puts_a_clash_on_the_stack_it_was_given_a_new_config_for(tmp_path, monkeypatch, capsys):
    """Issue 33c audit #8, through `offline render`: the new file given with --config is the one refused."""
    import yaml

    from offline import render_cli
    from offline.stack_files import stack_files
    files = {**stack_files()}
    for stack in ("av-resim", "aa-new"):
        config = {f"aksgpu:{k}": v for k, v in _private().items()}
        (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
    files["av-resim"] = tmp_path / "Pulumi.av-resim.yaml"
    monkeypatch.setattr(render_cli, "stack_files", lambda: files)
    assert render_cli.render("aa-new", tmp_path / "Pulumi.aa-new.yaml", tmp_path / "out") == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors and all(line.startswith("error: stack aa-new: ") for line in errors), errors


def test_a_zone_of_a_demo_stack_is_refused_to_another_stack():
    """Issue 33c audit #10: a stack that names another stack's zone (network.privateDnsZoneIds) keeps a link in it,
    and Azure refuses to delete a zone with links (Azure/deployment-stacks#227, Azure/azure-cli#15010): the hourly
    expiry's destroy of a demo whose zone another stack links would fail every hour. Refused in config unless the
    zone's stack is long-lived."""
    demo = load(_private(), stack="av-resim")
    zones = {s: f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-av-resim/providers/Microsoft.Network/"
                f"privateDnsZones/{z}" for s, z in (("registry", "privatelink.azurecr.io"),
                                                   ("blob", "privatelink.blob.core.windows.net"))}
    later = load(_private(addressSpace="10.41.0.0/16", nodeSubnet="10.41.0.0/20", endpointSubnet="10.41.16.0/24",
                          privateDnsZoneIds=zones), stack="avr-two")
    clashes = between_stacks({"av-resim": demo, "avr-two": later})
    assert {(c.stacks, c.error.key) for c in clashes} == {
        (("avr-two",), "aksgpu:network.privateDnsZoneIds.blob"),
        (("avr-two",), "aksgpu:network.privateDnsZoneIds.registry")}
    assert "av-resim is a demo: the expiry destroys it after its ttlHours" in str(clashes[0].error)
    kept = load({**_private(), "lifetime": "long-lived"}, stack="av-resim")
    assert between_stacks({"av-resim": kept, "avr-two": later}) == []


def test_an_address_space_over_the_runner_vnets_own_is_refused():
    """Issue 33c audit #9: peered VNets "must have nonoverlapping IP address spaces" (virtual-network-manage-peering);
    network.runnerAddressSpaces gives the runner's, and config checks the stack's against it."""
    from program.config.errors import ConfigError
    with pytest.raises(ConfigError, match=r"aksgpu:network\.addressSpace=\"10\.40\.0\.0/16\": overlaps 10\.0\.0\.0/8 "
                                          r"of the runner VNet"):
        load(_private(runnerAddressSpaces=["10.0.0.0/8"]))
    with pytest.raises(ConfigError, match=r"runnerAddressSpaces.*does not name"):
        load({**shape("private-two-pools"), "network": {"runnerAddressSpaces": ["10.0.0.0/16"]}})
    assert load(_private(runnerAddressSpaces=["10.0.0.0/16"])).network.runner_address_spaces == ("10.0.0.0/16",)


def test_the_committed_stack_files_share_no_runner_vnet_nor_zone_in_a_way_azure_refuses():
    from offline.stack_files import stack_config, stack_files
    assert between_stacks({s: stack_config(s) for s in sorted(stack_files())}) == []
