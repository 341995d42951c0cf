"""The AKS cluster component: identity, network, upgrades, autoscaler, the system pool, API server access."""

from components.vocabulary import SECURITY_EXCEPTION, SecurityException
from offline.mocks import DEPLOYER_OBJECT_ID
from tests.helpers import render_with

MC = "azure-native:containerservice:ManagedCluster"


def cluster(render):
    (c,) = render.of_type(MC)
    return c.inputs


def test_cluster_uses_entra_id_with_azure_rbac_workload_identity_and_no_local_accounts():
    c = cluster(render_with())
    assert c["enableRBAC"] is True and c["disableLocalAccounts"] is True
    assert c["aadProfile"]["managed"] is True and c["aadProfile"]["enableAzureRBAC"] is True
    assert c["identity"] == {"type": "SystemAssigned"}
    assert c["oidcIssuerProfile"] == {"enabled": True}
    assert c["securityProfile"]["workloadIdentity"] == {"enabled": True}
    assert cluster(render_with(cluster={"localAccounts": True}))["disableLocalAccounts"] is False


def test_cilium_policy_runs_on_the_cilium_dataplane_and_calico_on_azures():
    for policy, dataplane in (("cilium", "cilium"), ("calico", None)):
        net = cluster(render_with(cluster={"networkPolicy": policy}))["networkProfile"]
        assert (net["networkPlugin"], net["networkPluginMode"], net["networkPolicy"]) == ("azure", "overlay", policy)
        assert net.get("networkDataplane") == dataplane


def test_cluster_upgrades_and_autoscales_as_configured_and_daemonsets_never_keep_a_gpu_node():
    c = cluster(render_with(cluster={"upgradeChannel": "stable", "nodeOsUpgradeChannel": "SecurityPatch",
                                     "autoscaler": {"scaleDownUnneededTime": "5m", "expander": "priority",
                                                    "skipNodesWithLocalStorage": True}}))
    assert c["autoUpgradeProfile"] == {"upgradeChannel": "stable", "nodeOSUpgradeChannel": "SecurityPatch"}
    profile = c["autoScalerProfile"]
    assert (profile["scaleDownUnneededTime"], profile["expander"], profile["skipNodesWithLocalStorage"]) == \
        ("5m", "priority", "true")
    assert profile["ignoreDaemonsetsUtilization"] is True and profile["daemonsetEvictionForEmptyNodes"] is True


def test_only_the_system_pool_is_inline_regular_and_without_public_ips():
    (system,) = cluster(render_with())["agentPoolProfiles"]
    assert (system["name"], system["mode"], system["scaleSetPriority"], system["vmSize"]) == \
        ("system", "System", "Regular", "Standard_D4ds_v5")
    assert (system["minCount"], system["maxCount"], system["count"]) == (2, 3, 2)
    assert system["enableNodePublicIP"] is False


def test_an_open_api_server_is_tagged_as_a_deliberate_exception_and_a_limited_or_private_one_is_not():
    opened = cluster(render_with(cluster={"openApiServer": True}))
    assert opened["apiServerAccessProfile"] == {"enablePrivateCluster": False}
    assert opened["tags"][SECURITY_EXCEPTION] == SecurityException.OPEN_API_SERVER
    limited = cluster(render_with(cluster={"authorizedIpRanges": ["203.0.113.7/32"]}))
    assert limited["apiServerAccessProfile"]["authorizedIPRanges"] == ["203.0.113.7/32"]
    private = cluster(render_with(cluster={"private": True}, build={"mode": "local"}))
    assert private["apiServerAccessProfile"] == {"enablePrivateCluster": True}
    assert SECURITY_EXCEPTION not in limited["tags"] and SECURITY_EXCEPTION not in private["tags"]


def test_managed_blob_csi_driver_is_on_only_when_asked():
    assert cluster(render_with())["storageProfile"]["blobCSIDriver"] == {"enabled": False}
    assert cluster(render_with(cluster={"managedBlobCsiDriver": True}))["storageProfile"]["blobCSIDriver"] == \
        {"enabled": True}


def test_deployer_gets_aks_rbac_cluster_admin_on_the_cluster_unless_told_not_to():
    r = render_with("dev")
    role = r.named("aks-deployer-admin").inputs
    assert role["principalId"] == DEPLOYER_OBJECT_ID and role["principalType"] == "User"
    assert role["roleDefinitionId"].endswith("/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b")
    assert role["scope"].endswith("/managedClusters/aks-dev")
    assert not [x for x in render_with(cluster={"grantDeployerAdmin": False, "openApiServer": True}).resources
                if x.name == "aks-deployer-admin"]


def test_a_named_deployer_gets_every_deployer_grant_whoever_runs_pulumi():
    """Round-4 Azure audit #11: previews run as the preview app; with the deploy app's object id named
    (cluster.deployerObjectId, set by the workflows) they show the grants as deployed, not handed to themselves."""
    deploy_app = "11111111-2222-3333-4444-555555555555"
    r = render_with("dev", cluster={"deployerObjectId": deploy_app, "deployerPrincipalType": "ServicePrincipal"})
    assert r.named("aks-deployer-admin").inputs["principalId"] == deploy_app
    # The identity running Pulumi (the mocks' client config) is granted nothing.
    assert DEPLOYER_OBJECT_ID not in {x.inputs["principalId"]
                                      for x in r.of_type("azure-native:authorization:RoleAssignment")}


def test_node_resource_group_is_named_from_the_root():
    assert cluster(render_with("my-stack"))["nodeResourceGroup"] == "rg-my-stack-nodes"
