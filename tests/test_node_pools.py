"""GPU and CPU pools: separate AgentPools with the right priority, taints, driver mode and autoscaling."""

import pytest

from components.azure.node_pools import GPU_TAINT, SPOT_TAINT, pool_taints, toleration
from stackconfig.schema import PoolConfig, Priority
from tests.conftest import STACKS
from tests.helpers import render_with

POOL = "azure-native:containerservice:AgentPool"


def gpu_pools(render):
    return [p for p in render.of_type(POOL) if p.parent.startswith("gpu-")]


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_pool_is_its_own_user_agent_pool_on_the_cluster(render_of, stack):
    r = render_of(stack)
    pools = gpu_pools(r)
    assert {p.inputs["agentPoolName"] for p in pools} == {g.pool.name for g in r.cfg.gpu_pools}
    for p in pools:
        assert p.inputs["mode"] == "User"
        assert "aks-aks" in p.depends_on, "the pool must be created after the cluster"
        assert r.named(p.parent).type == "aksgpu:aks:GpuNodePool"


@pytest.mark.parametrize("stack", STACKS)
def test_each_gpu_pool_leaves_the_driver_to_whoever_its_config_names(render_of, stack):
    r = render_of(stack)
    for p in gpu_pools(r):
        driver = r.cfg.gpu_pool(p.inputs["agentPoolName"]).driver
        assert p.inputs["gpuProfile"] == {"driver": {"none": "None", "install": "Install"}[driver]}


@pytest.mark.parametrize("stack", STACKS)
def test_spot_gpu_pools_evict_by_delete_with_their_price_cap_and_regular_ones_are_regular(render_of, stack):
    r = render_of(stack)
    for p in gpu_pools(r):
        pool, i = r.cfg.gpu_pool(p.inputs["agentPoolName"]).pool, p.inputs
        if pool.spot:
            assert (i["scaleSetPriority"], i["scaleSetEvictionPolicy"], i["spotMaxPrice"]) == \
                ("Spot", "Delete", pool.spot_max_price)
        else:
            assert i["scaleSetPriority"] == "Regular" and "spotMaxPrice" not in i


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pools_carry_the_gpu_taint_and_spot_ones_the_taint_aks_adds(render_of, stack):
    r = render_of(stack)
    for p in gpu_pools(r):
        spot = r.cfg.gpu_pool(p.inputs["agentPoolName"]).pool.spot
        assert p.inputs["nodeTaints"] == ["sku=gpu:NoSchedule"] + \
            (["kubernetes.azure.com/scalesetpriority=spot:NoSchedule"] if spot else [])


def test_an_on_demand_a10_pool_is_regular_with_the_aks_driver():
    r = render_with(gpuPools=[{"name": "a10", "vmSize": "Standard_NV36ads_A10_v5", "priority": "regular",
                               "driver": "install"}])
    (p,) = gpu_pools(r)
    assert p.inputs["scaleSetPriority"] == "Regular" and p.inputs["nodeTaints"] == ["sku=gpu:NoSchedule"]
    assert p.inputs["gpuProfile"] == {"driver": "Install"}


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pool_autoscales_between_configured_bounds_without_public_ips(render_of, stack):
    r = render_of(stack)
    for p in gpu_pools(r):
        cfg = r.cfg.gpu_pool(p.inputs["agentPoolName"]).pool
        assert p.inputs["enableAutoScaling"] is True
        assert (p.inputs["minCount"], p.inputs["maxCount"]) == (cfg.min_count, cfg.max_count)
        assert p.inputs["enableNodePublicIP"] is False


def test_training_gpu_pool_scales_from_zero(render_of):
    (p,) = gpu_pools(render_of("training-autoscale"))
    assert p.inputs["minCount"] == 0 and p.inputs["count"] == 0


def test_av_resim_has_t4_pool_1_to_5_and_an_a100_pool(render_of):
    pools = {p.inputs["agentPoolName"]: p.inputs for p in gpu_pools(render_of("av-resim"))}
    assert (pools["nc4ast4"]["vmSize"], pools["nc4ast4"]["minCount"], pools["nc4ast4"]["maxCount"]) == \
        ("Standard_NC4as_T4_v3", 1, 5)
    assert pools["nc48a100"]["vmSize"] == "Standard_NC48ads_A100_v4"


def test_training_cpu_pool_is_regular_untainted_user_pool(render_of):
    r = render_of("training-autoscale")
    (cpu,) = [p for p in r.of_type(POOL) if p.parent == "cpu-cpu"]
    assert cpu.inputs["mode"] == "User" and cpu.inputs["scaleSetPriority"] == "Regular"
    assert "nodeTaints" not in cpu.inputs and "gpuProfile" not in cpu.inputs


def test_spot_taint_toleration_matches_what_aks_puts_on_spot_nodes():
    assert toleration(SPOT_TAINT) == {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal",
                                      "value": "spot", "effect": "NoSchedule"}
    assert toleration(GPU_TAINT) == {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def test_on_demand_gpu_pool_has_only_the_gpu_taint():
    pool = PoolConfig("gpu", "Standard_NC4as_T4_v3", 0, 1, 0, priority=Priority.REGULAR)
    assert pool_taints(pool, gpu=True) == (GPU_TAINT,)
    assert pool_taints(pool, gpu=False) == ()
