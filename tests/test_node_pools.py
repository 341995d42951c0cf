"""GPU and CPU pools: separate AgentPools with the right priority, taints, driver owner and autoscaling."""

from aksgpu.azure.node_pools import GPU_TAINT, SPOT_TAINT, PoolNodes, pool_taints, toleration
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
    assert t4["gpuProfile"] == {"driver": "None"}
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
