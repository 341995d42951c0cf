"""The AKS cluster as declared in every stack."""

import pytest

from offline.mocks import DEPLOYER_OBJECT_ID
from stackconfig.schema import SECURITY_EXCEPTION, SecurityException
from tests.conftest import STACKS
from tests.helpers import render_with

MC = "azure-native:containerservice:ManagedCluster"


def cluster(render):
    (c,) = render.of_type(MC)
    return c.inputs


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_uses_entra_id_with_azure_rbac_and_no_local_accounts(render_of, stack):
    c = cluster(render_of(stack))
    assert c["enableRBAC"] is True
    assert c["aadProfile"]["managed"] is True and c["aadProfile"]["enableAzureRBAC"] is True
    assert c["disableLocalAccounts"] is True
    assert c["identity"] == {"type": "SystemAssigned"}


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_has_oidc_issuer_and_workload_identity(render_of, stack):
    c = cluster(render_of(stack))
    assert c["oidcIssuerProfile"] == {"enabled": True}
    assert c["securityProfile"]["workloadIdentity"] == {"enabled": True}


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_uses_azure_cni_overlay_with_its_configured_network_policy_on_the_matching_dataplane(render_of,
                                                                                                    stack):
    r = render_of(stack)
    net = cluster(r)["networkProfile"]
    assert (net["networkPlugin"], net["networkPluginMode"]) == ("azure", "overlay")
    assert net["networkPolicy"] == r.cfg.cluster.network_policy
    assert net.get("networkDataplane") == ("cilium" if r.cfg.cluster.network_policy == "cilium" else None)


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_upgrades_and_autoscales_as_configured_and_daemonsets_never_keep_a_gpu_node(render_of, stack):
    r = render_of(stack)
    c, s = cluster(r), r.cfg.cluster
    assert (c["autoUpgradeProfile"]["upgradeChannel"], c["autoUpgradeProfile"]["nodeOSUpgradeChannel"]) == \
        (s.upgrade_channel, s.node_os_upgrade_channel)
    assert c["autoScalerProfile"]["scaleDownUnneededTime"] == s.autoscaler.scale_down_unneeded_time
    assert c["autoScalerProfile"]["ignoreDaemonsetsUtilization"] is True


@pytest.mark.parametrize("stack", STACKS)
def test_system_pool_is_inline_regular_and_gpu_pools_are_not(render_of, stack):
    pools = cluster(render_of(stack))["agentPoolProfiles"]
    assert len(pools) == 1
    (system,) = pools
    assert system["mode"] == "System" and system["scaleSetPriority"] == "Regular"
    assert system["enableNodePublicIP"] is False
    assert not system["vmSize"].startswith(("Standard_NC", "Standard_ND", "Standard_NV"))


@pytest.mark.parametrize("stack", STACKS)
def test_api_server_is_private_limited_or_tagged_as_a_deliberate_exception(render_of, stack):
    c = cluster(render_of(stack))
    access = c["apiServerAccessProfile"]
    assert "0.0.0.0/0" not in access.get("authorizedIPRanges", [])
    if access["enablePrivateCluster"]:
        assert not access.get("authorizedIPRanges")
    open_to_all = not access["enablePrivateCluster"] and not access.get("authorizedIPRanges")
    assert open_to_all == (c["tags"].get(SECURITY_EXCEPTION) == SecurityException.OPEN_API_SERVER)


def test_authorized_ranges_limit_the_api_server_without_an_exception_tag():
    c = cluster(render_with(cluster={"authorizedIpRanges": ["203.0.113.7/32"]}))
    assert c["apiServerAccessProfile"]["authorizedIPRanges"] == ["203.0.113.7/32"]
    assert SECURITY_EXCEPTION not in c["tags"]


def test_av_resim_cluster_is_private(render_of):
    assert cluster(render_of("av-resim"))["apiServerAccessProfile"]["enablePrivateCluster"] is True


def test_managed_blob_csi_driver_stays_off_because_helm_installs_the_oss_one(render_of):
    assert cluster(render_of("av-resim"))["storageProfile"]["blobCSIDriver"] == {"enabled": False}


def test_deployer_gets_aks_rbac_cluster_admin_on_the_cluster(render_of):
    r = render_of("dev")
    role = r.named("aks-deployer-admin").inputs
    assert role["principalId"] == DEPLOYER_OBJECT_ID
    assert role["roleDefinitionId"].endswith("/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b")
    assert role["scope"].endswith("/managedClusters/aks-dev")
    assert role["principalType"] == "User"


def test_node_resource_group_is_named_from_the_root(render_of):
    assert cluster(render_of("av-resim"))["nodeResourceGroup"] == "rg-av-resim-nodes"
