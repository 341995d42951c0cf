"""A private stack deployed from a runner's VNet (`network.runnerVnetId`): peerings and DNS links in state, so the
first `pulumi up` from there completes and a destroy removes them before their zones (round-3 audit #4, #18)."""

from __future__ import annotations

import pytest

from components.azure.cluster import api_server_zone
from tests.helpers import load, render_with, shape

RUNNER_VNET = ("/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg-runners/providers/"
               "Microsoft.Network/virtualNetworks/vnet-runners")
PEERING = "azure-native:network:VirtualNetworkPeering"
LINK = "azure-native:privatedns:VirtualNetworkLink"


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
