"""GPU and CPU pools: separate AgentPools with the right priority, taints, driver owner and autoscaling."""

from components.azure.node_pools import GPU_TAINT, SPOT_TAINT, PoolNodes, pool_taints
from components.kubernetes.scheduling import toleration
from tests.helpers import render_with

POOL = "azure-native:containerservice:AgentPool"
T4 = {"name": "t4", "vmSize": "Standard_NC4as_T4_v3", "minCount": 0, "maxCount": 3, "spotMaxPrice": 0.2}
A10 = {"name": "a10", "vmSize": "Standard_NV36ads_A10_v5", "priority": "regular", "driver": "install", "minCount": 1,
       "maxCount": 2, "zones": ["1", "2"], "labels": {"team": "ml"}}


def pools(render):
    return {p.inputs["agentPoolName"]: p for p in render.of_type(POOL)}


def test_each_pool_is_its_own_user_agent_pool_created_after_the_cluster():
    r = render_with(gpuPools=[T4, A10], cpuPools=[{"name": "cpu"}])
    found = pools(r)
    assert set(found) == {"t4", "a10", "cpu"}
    for p in found.values():
        assert p.inputs["mode"] == "User" and "aks-aks" in p.depends_on
        assert p.inputs["enableAutoScaling"] is True and p.inputs["enableNodePublicIP"] is False
    assert [r.named(found[n].parent).type for n in ("t4", "a10", "cpu")] == \
        ["aksgpu:aks:GpuNodePool", "aksgpu:aks:GpuNodePool", "aksgpu:aks:CpuNodePool"]


def test_a_spot_gpu_pool_evicts_by_delete_under_its_price_cap_with_both_taints_and_the_operators_driver():
    t4 = pools(render_with(gpuPools=[T4]))["t4"].inputs
    assert (t4["scaleSetPriority"], t4["scaleSetEvictionPolicy"], t4["spotMaxPrice"]) == ("Spot", "Delete", 0.2)
    assert t4["nodeTaints"] == [GPU_TAINT, SPOT_TAINT]
    assert t4["gpuProfile"] == {"driver": "None"} and t4["osSKU"] == "Ubuntu"
    assert (t4["minCount"], t4["maxCount"], t4["count"]) == (0, 3, 0)


def test_a_regular_gpu_pool_has_only_the_gpu_taint_aks_driver_zones_and_labels():
    a10 = pools(render_with(gpuPools=[A10]))["a10"].inputs
    assert a10["scaleSetPriority"] == "Regular" and "spotMaxPrice" not in a10
    assert a10["nodeTaints"] == [GPU_TAINT] and a10["gpuProfile"] == {"driver": "Install"}
    assert a10["availabilityZones"] == ["1", "2"] and a10["count"] == 1
    assert a10["nodeLabels"]["team"] == "ml" and a10["nodeLabels"]["accelerator"] == "nvidia"


def test_a_cpu_pool_is_regular_untainted_and_has_no_gpu_profile():
    cpu = pools(render_with(cpuPools=[{"name": "cpu", "minCount": 1}]))["cpu"].inputs
    assert cpu["scaleSetPriority"] == "Regular"
    assert "nodeTaints" not in cpu and "gpuProfile" not in cpu and "nodeLabels" not in cpu


def test_spot_and_gpu_taints_are_tolerated_exactly_as_aks_writes_them():
    assert toleration(SPOT_TAINT) == {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal",
                                      "value": "spot", "effect": "NoSchedule"}
    assert toleration(GPU_TAINT) == {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    regular = PoolNodes("gpu", "Standard_NC4as_T4_v3", 0, 1, 0)
    assert pool_taints(regular, gpu=True) == (GPU_TAINT,) and pool_taints(regular, gpu=False) == ()


CRG = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-reserved/providers/Microsoft.Compute/"
       "capacityReservationGroups/crg-gpu")


def test_a_pool_on_reserved_capacity_names_its_group_and_the_cluster_gets_the_identity_aks_needs_for_it():
    """use-capacity-reservation-groups: a user-assigned control-plane identity with Contributor on the resource group
    of the reservation group (system-assigned ones do not work), granted before a pool joins the group."""
    r = render_with(gpuPools=[{**A10, "capacityReservationGroup": CRG}, T4])
    found = pools(r)
    assert found["a10"].inputs["capacityReservationGroupID"] == CRG
    assert "capacityReservationGroupID" not in found["t4"].inputs
    cluster = r.named("aks-aks")
    identity = r.named("aks-identity", "azure-native:managedidentity:UserAssignedIdentity")
    assert cluster.inputs["identity"]["type"] == "UserAssigned"
    assert cluster.inputs["identity"]["userAssignedIdentities"][0].endswith(
        f"/userAssignedIdentities/{identity.inputs['resourceName']}")
    grant, network = r.named("aks-reservations-0"), r.named("aks-network-contributor")
    assert grant.inputs["scope"] == CRG.split("/providers/")[0]
    assert grant.inputs["roleDefinitionId"].endswith("/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c")
    # The identity's principal holds both grants (the subnet's role too), and the cluster waits for the grant.
    assert grant.inputs["principalId"] == network.inputs["principalId"]
    assert {"aks-identity", "aks-reservations-0"} <= set(cluster.depends_on)


def test_a_spot_pool_cannot_take_reserved_capacity():
    import pytest

    from program.config.errors import ConfigError
    with pytest.raises(ConfigError, match="gpuPools\\[0\\].capacityReservationGroup.*a spot pool cannot take it"):
        render_with(gpuPools=[{**T4, "capacityReservationGroup": CRG}])


def test_without_reserved_capacity_the_cluster_identity_stays_system_assigned():
    r = render_with(gpuPools=[T4])
    assert r.named("aks-aks").inputs["identity"] == {"type": "SystemAssigned"}
    assert all(i.name != "aks-identity" for i in r.of_type("azure-native:managedidentity:UserAssignedIdentity"))
