"""cost.md and timeline.md: the arithmetic on small known inputs, then what every stack's render says."""

from __future__ import annotations

import json
import re

import pytest

from offline.estimates import cost, first_gpu_pod, timeline
from offline.render import Resource
from offline.report import summary, write_render
from offline.stack_files import REPO_ROOT
from ops import image_sizes
from tests.helpers import STACKS, load, shape

PRICES = {
    "date": "2025-10", "currency": "USD", "source": "test table", "spot_discount": 0.8,
    "vm_regions": {"eastus": {"refreshed": None, "source": "test prices", "sizes": {
        "Standard_D4ds_v5": {"on_demand": 0.2, "spot": None},
        "Standard_NC4as_T4_v3": {"on_demand": 0.5, "spot": None},
        "Standard_NC8as_T4_v3": {"on_demand": 0.8, "spot": 0.12},
    }}},
    "fixed": {"aks_tier": {"Free": 0.0, "Standard": 0.1},
              "acr_sku": {"Basic": 0.007, "Standard": 0.03, "Premium": 0.07},
              "load_balancer": 0.025, "public_ip": 0.005, "private_endpoint": 0.01, "private_dns_zone": 0.001},
    "monitoring": {"prometheus_per_10m_samples": 1.0, "grafana_standard_instance": 0.07,
                   "grafana_active_user_month": 7.3, "log_analytics_per_gb": 2.4},
    # 100 scrapes an hour: a series costs 1e-5 $/h.
    "assumptions": {"prometheus_series_per_node": 1000, "prometheus_scrape_seconds": 36, "dcgm_series_per_gpu": 25,
                    "autoscaler_log_gb_per_day": 0.1, "grafana_active_users": 2},
}


def test_spot_node_hours_are_the_spot_price_or_else_the_assumed_discount():
    region = PRICES["vm_regions"]["eastus"]
    assert cost.node_hour(region, "Standard_NC8as_T4_v3", spot=True, discount=0.8) == cost.NodeHour(0.12)
    assumed = cost.node_hour(region, "Standard_NC4as_T4_v3", spot=True, discount=0.8)
    assert assumed.price == pytest.approx(0.1) and assumed.assumed
    assert cost.node_hour(region, "Standard_NC4as_T4_v3", spot=False, discount=0.8) == cost.NodeHour(0.5)
    assert cost.node_hour(region, "Standard_NC96ads_A100_v4", spot=False, discount=0.8) == cost.NodeHour(None)


def test_pool_cost_is_node_hour_times_min_and_max():
    pool = cost.PoolCost("t4", "Standard_NC4as_T4_v3", True, 1, 5, cost.NodeHour(0.1))
    assert (pool.idle, pool.full) == (pytest.approx(0.1), pytest.approx(0.5))
    assert cost.PoolCost("x", "Unknown", False, 1, 2, cost.NodeHour(None)).idle is None


def test_a_nap_pool_costs_nothing_idle_and_its_dearest_size_on_demand_at_full_scale():
    """NAP makes any of the pool's sizes and falls back to on-demand: the upper bound is the dearest on-demand."""
    nap = {"name": "t4", "provisioning": "nap", "vmSize": "Standard_NC4as_T4_v3",
           "alternativeVmSizes": ["Standard_NC8as_T4_v3"], "minCount": 0, "maxCount": 2}
    cfg = load({"cluster": {"systemPool": {"minCount": 2, "maxCount": 2}}, "gpuPools": [nap]})
    t4 = next(p for p in cost.pool_costs(cfg, PRICES) if p.pool == "t4")
    assert (t4.vm_size, t4.node_hour, t4.idle, t4.full) == ("Standard_NC8as_T4_v3", cost.NodeHour(0.8), 0.0, 1.6)
    assert t4.bought == "NAP: spot, else on-demand (priced at the dearest)"
    unpriced = load({"cluster": {"systemPool": {"minCount": 2, "maxCount": 2}}, "gpuPools": [
        {**nap, "alternativeVmSizes": ["Standard_NC16as_T4_v3"]}]})
    assert next(p for p in cost.pool_costs(unpriced, PRICES) if p.pool == "t4").full is None


def test_a_region_without_prices_prices_no_pool_instead_of_borrowing_another_regions():
    assert cost.region_vm_prices(PRICES, "westeurope") is None
    assert cost.node_hour(None, "Standard_D4ds_v5", spot=False, discount=0.8) == cost.NodeHour(None)


def test_a_pool_without_a_price_makes_every_total_a_lower_bound_never_drops_out(render_shape):
    r = render_shape("function")
    westeurope = {**PRICES, "vm_regions": {"westeurope": PRICES["vm_regions"]["eastus"]}}
    t = cost.totals(r, westeurope)  # the stack is in eastus: no VM of it has a price
    assert t.unpriced == ("system", "t4") and not t.complete
    assert t.text(t.idle).startswith("at least $") and t.text(t.idle).endswith(" + unknown")
    text = cost.cost_markdown(r, westeurope)
    assert "vm_prices.yaml has no prices for `eastus`" in text and "| t4 | Standard_NC4as_T4_v3 | unknown |" in text
    assert "**Idle: at least $" in text and "the totals are lower bounds" in text


def test_function_gpu_totals_add_pools_and_fixed_parts(render_shape):
    r = render_shape("function")
    fixed = dict(cost.fixed_costs(r, PRICES))
    # Free tier, outbound LB, the function's internal LB, 1 public IP (outbound), Standard ACR.
    assert fixed == {"AKS Free tier": 0.0, "Standard load balancer (cluster outbound)": 0.025,
                     "Standard load balancer (internal Services)": 0.025,
                     "public IPs × 1": pytest.approx(0.005), "ACR Standard": 0.03}
    t = cost.totals(r, PRICES)
    # fixed parts 0.085; system D4ds_v5 on-demand 2–3, t4 spot 1–2 at 0.1; metrics: 3 nodes and a T4 idle,
    # 5 nodes and 2 T4s at full scale
    assert t.idle == pytest.approx(0.085 + 0.2 * 2 + 0.1 * 1 + 3025e-5)
    assert t.full == pytest.approx(0.085 + 0.2 * 3 + 0.1 * 2 + 5050e-5)
    assert t.idle_gpu == pytest.approx(0.1) and t.complete


def test_metrics_ingestion_grows_with_nodes_and_gpus_and_grafana_and_logs_cost_when_on():
    config = shape("training")
    cfg = load({**config, "monitoring": {**config["monitoring"], "grafana": True}})
    idle, full = cost.scales(cfg)
    # system 2–3, cpu 1–3, gpu 0–3 NC4as_T4_v3 (one T4 each)
    assert (idle, full) == (cost.Scale(nodes=3, gpus=0), cost.Scale(nodes=9, gpus=3))
    rows = dict(cost.monitoring_costs(cfg, PRICES, full))
    assert rows["managed Prometheus ingestion"] == pytest.approx((9 * 1000 + 3 * 25) * 100 / 1e7)
    assert rows["Managed Grafana Standard (+2 active users)"] == pytest.approx(0.07 + 2 * 7.3 / 730)
    assert rows["Log Analytics (cluster-autoscaler logs)"] == pytest.approx(0.1 / 24 * 2.4)


def test_a_stack_without_monitoring_pays_nothing_for_it(render_shape):
    r = render_shape("dev-minimal")
    assert not r.cfg.monitoring.enabled and cost.monitoring_costs(r.cfg, PRICES, cost.scales(r.cfg)[1]) == []
    assert "monitoring (usage" not in cost.cost_markdown(r, PRICES)


def test_private_endpoints_and_zones_are_counted(render_shape):
    fixed = dict(cost.fixed_costs(render_shape("private-two-pools"), PRICES))
    assert fixed["private endpoints × 3"] == pytest.approx(0.03)
    assert fixed["AKS Standard tier"] == 0.1 and fixed["ACR Premium"] == 0.07


def test_each_pool_row_shows_both_prices_and_uses_the_one_it_buys(render_shape):
    rows = [line for line in cost.cost_markdown(render_shape("function"), PRICES).splitlines()
            if line.startswith("| t4 ")]
    assert rows == ["| t4 | Standard_NC4as_T4_v3 | $0.500 | $0.100 *assumed* | spot | 1–2 | $0.100 | $0.200 |"]


def res(name, typ="azure-native:x:Y", deps=(), parent=None, custom=True, inputs=None, provider=None):
    return Resource(type=typ, name=name, parent=parent, depends_on=list(deps), provider=provider, custom=custom,
                    inputs=inputs or {})


TABLE = {"types": {"t:slow": {"seconds": 100, "source": "slow"}, "t:fast": {"seconds": 10, "source": "fast"},
                   "t:pool": {"seconds": 300, "source": "pool", "empty_pool_seconds": 90},
                   "t:deploy": {"seconds": 600, "source": "deploy", "skip_await_seconds": 5},
                   "t:svc": {"seconds": 5, "source": "svc", "loadbalancer_seconds": 60}},
         "charts": {"special-chart": {"seconds": 42, "source": "by chart"}},
         "default": {"seconds": 1, "source": "default"}}


def test_parallel_branches_take_the_longest_branch_not_the_sum():
    resources = [res("a", "t:fast"), res("b", "t:slow", ["a"]), res("c", "t:fast", ["a"]),
                 res("d", "t:fast", ["b", "c"])]
    steps = timeline.schedule(resources, TABLE)
    assert steps["d"].start == 110 and steps["d"].finish == 120
    assert [s.name for s in timeline.critical_path(steps, resources)] == ["a", "b", "d"]


def test_depending_on_a_component_waits_for_all_its_children():
    resources = [res("comp", "aksgpu:x:Comp", custom=False), res("kid1", "t:slow", parent="comp"),
                 res("kid2", "t:fast", parent="comp"), res("after", "t:fast", ["comp"])]
    steps = timeline.schedule(resources, TABLE)
    assert steps["comp"].finish == 100 and steps["after"].start == 100


def test_a_resource_waits_for_its_provider():
    resources = [res("cluster", "t:slow"), res("provider", "pulumi:providers:kubernetes", ["cluster"]),
                 res("ns", "t:fast", provider="provider")]
    assert timeline.schedule(resources, TABLE)["ns"].start == 101


@pytest.mark.parametrize("resource, seconds", [
    (res("p", "t:pool", inputs={"count": 0}), 90),
    (res("p", "t:pool", inputs={"count": 1}), 300),
    (res("d", "t:deploy", inputs={"metadata": {"annotations": {"pulumi.com/skipAwait": "true"}}}), 5),
    (res("d", "t:deploy", inputs={"metadata": {}}), 600),
    (res("s", "t:svc", inputs={"spec": {"type": "LoadBalancer"}}), 60),
    (res("r", "kubernetes:helm.sh/v3:Release", inputs={"chart": "special-chart"}), 42),
    (res("special-release", "t:slow"), 100),
    (res("other", "t:unknown"), 1),
    (res("c", "aksgpu:x:Comp", custom=False), 0),
])
def test_durations_follow_the_table_and_its_special_cases(resource, seconds):
    assert timeline.duration(resource, TABLE)[0] == seconds


def test_a_cycle_is_reported():
    with pytest.raises(ValueError, match="dependency cycle"):
        timeline.schedule([res("a", deps=["b"]), res("b", deps=["a"])], TABLE)


@pytest.mark.parametrize("stack", STACKS)
def test_every_render_writes_cost_and_timeline(stack, render_of, tmp_path):
    target = write_render(render_of(stack), tmp_path)
    cost_md, timeline_md = (target / "cost.md").read_text(), (target / "timeline.md").read_text()
    assert "**Estimate, not a quote.**" in cost_md and "2025-10" in cost_md and "Idle:" in cost_md
    assert "## Critical path" in timeline_md and "One step after another" in timeline_md
    summary = (target / "summary.md").read_text()
    assert "Estimated cost (cost.md)" in summary


def test_the_image_build_runs_beside_the_cluster_not_after_it(render_shape):
    r = render_shape("function")
    steps = timeline.schedule(r.resources, timeline.load_durations())
    build, cluster = steps["image-function-build"], steps["aks-aks"]
    assert build.start < cluster.finish
    total = max(s.finish for s in steps.values())
    assert total < sum(s.seconds for s in steps.values()) / 1.5


def test_every_type_in_every_stack_has_a_duration_row(renders):
    table = timeline.load_durations()
    # Custom resources (kubernetes:<group with a dot>/...) are API writes like ConfigMaps: the default row.
    default_ok = ("kubernetes:core/", "kubernetes:batch/v1:CronJob", "kubernetes:nfd", "kubernetes:keda.sh",
                  "kubernetes:azmonitoring.coreos.com", "kubernetes:kueue.x-k8s.io", "kubernetes:kaito.sh",
                  "kubernetes:networking.k8s.io/v1:NetworkPolicy", "kubernetes:rbac.authorization.k8s.io/",
                  "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                  "pulumi:providers:",
                  "random:", "aksgpu:")
    for stack, render in renders.items():
        for r in render.resources:
            assert r.type in table["types"] or r.type.startswith(default_ok), (stack, r.type)


def test_each_stack_is_priced_in_its_own_region_and_says_which_pools_have_no_price(renders):
    prices = cost.load_prices()
    for stack, r in renders.items():
        table = (cost.region_vm_prices(prices, r.cfg.location) or {}).get("sizes", {})
        pools = [r.cfg.cluster.system_pool, *r.cfg.gpu_pools, *r.cfg.cpu_pools]
        total = cost.totals(r, prices)
        assert total.unpriced == tuple(p.name for p in pools if p.vm_size not in table), stack
        summary_says = "no price for pool" in summary(r, total, 0)
        assert summary_says == bool(total.unpriced), stack




# The first GPU pod (issue 23): minutes from `pulumi up` until a pod holds a GPU. The target is 15 (12 for
# gpu-basics); the stacks not there yet keep today's figure as their ceiling, so none gets slower unnoticed.
@pytest.mark.parametrize("stack", STACKS)
def test_the_first_gpu_pod_and_a_new_gpu_node_stay_within_their_targets(stack, render_of):
    render = render_of(stack)
    _, found = timeline.plan(render)
    target = first_gpu_pod.target_minutes(stack)
    if found.deploy is not None:
        ceiling, _ = first_gpu_pod.ABOVE_TARGET.get(stack, (target, ""))
        assert found.deploy.ready / 60 <= ceiling + 1e-9, (stack, found.deploy.ready / 60)
        # A stack listed above its target leaves the list once it meets the target.
        assert (stack in first_gpu_pod.ABOVE_TARGET) == (found.deploy.ready / 60 > target + 1e-9), stack
    assert found.new_node.ready / 60 <= first_gpu_pod.TARGET_MINUTES, (stack, found.new_node.ready / 60)
    # Every phase says where its number comes from.
    for estimate in (found.deploy, found.deploy_workload, found.new_node, found.new_node_workload):
        assert estimate is None or all(p.source for p in estimate.phases)


def test_a_compiled_driver_costs_its_compile_and_waits_for_the_operator_the_aks_driver_does_not():
    table = timeline.load_durations()
    boot = table["gpu_node"]["vm_boot"]["seconds"]
    node = first_gpu_pod.Node(operator_ready=900)
    aks = first_gpu_pod.gpu_ready(load({"gpuPools": [{"driver": "install"}]}).gpu_pools[0], 0, node, table, [])
    compiled = first_gpu_pod.gpu_ready(load({"gpuPools": [{"driver": "none"}]}).gpu_pools[0], 0, node, table, [])
    # AKS's driver comes with the boot; the operator's waits for its release (900 s here), then compiles.
    assert aks[1].start == boot and compiled[1].start == 900
    assert compiled[1].seconds - aks[1].seconds == table["gpu_node"]["driver_compile"]["seconds"] - \
        table["gpu_node"]["aks_driver"]["seconds"]


def test_an_awaited_gpu_workload_takes_as_long_in_pulumi_up_as_its_pod_needs(render_shape):
    steps, found = timeline.plan(render_shape("function"))
    (function,) = [e for e in found.workloads if e.pod == "function-deployment"]
    assert steps["function-deployment"].finish == pytest.approx(function.ready)
    image, start = function.phases[-2:]
    assert image.what.startswith("image function on the node") and start.what == "the pod starts and turns Ready"
    assert found.endpoint == pytest.approx(function.ready)


def test_an_infiniband_node_builds_its_doca_driver_beside_the_gpu_driver_and_the_gate_checks_last():
    """With GPUDirect RDMA through DMA-BUF the GPU driver waits for no OFED build: the DOCA driver is built from the
    node's join, and only what it takes beyond the GPU driver and device plugin is on the critical path."""
    table = timeline.load_durations()
    pool = load({"gpuPools": [{"name": "h100", "vmSize": "Standard_ND96isr_H100_v5"}]}).gpu_pools[0]
    plain = first_gpu_pod.gpu_ready(pool, 0, first_gpu_pod.Node(0), table, [])
    full = first_gpu_pod.gpu_ready(pool, 0, first_gpu_pod.Node(0, infiniband=True, gate=True), table, [])
    assert [p.what.split(" ")[0] for p in full[1:]] == ["GPU", "device", "the", "the"]
    booted, gpu_node = full[0].finish, table["gpu_node"]
    assert full[-1].finish == booted + gpu_node["doca_driver"]["seconds"] + gpu_node["gate_check"]["seconds"]
    assert full[-1].finish - plain[-1].finish < gpu_node["doca_driver"]["seconds"]


def test_a_stack_whose_gpu_pods_wait_for_a_run_starts_none_at_deploy(render_shape):
    _, found = timeline.plan(render_shape("infiniband"))
    assert found.deploy is None and found.new_node.ready > 0
    assert "starts none" in "\n".join(first_gpu_pod.markdown(found, "distributed-training"))


def test_image_sizes_sum_the_locked_wheels_that_linux_amd64_python_312_installs():
    lock = ("torch==2.10.0 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:" + "b" * 64 + "\n"
            "six==1.17.0 \\\n    --hash=sha256:" + "c" * 64 + "\n")
    index = {"torch": {"files": [
        {"filename": "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl", "hashes": {"sha256": "a" * 64}, "size": 900},
        {"filename": "torch-2.10.0-cp312-cp312-win_amd64.whl", "hashes": {"sha256": "b" * 64}, "size": 200},
        {"filename": "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl", "hashes": {"sha256": "d" * 64},
         "size": 999}]},
        "six": {"files": [{"filename": "six-1.17.0-py2.py3-none-any.whl", "hashes": {"sha256": "c" * 64}, "size": 11}]}}
    assert image_sizes.wheel_bytes(lock, index.__getitem__) == {"torch==2.10.0": 900, "six==1.17.0": 11}
    with pytest.raises(ValueError, match="six==1.17.0: no linux/amd64"):
        image_sizes.wheel_bytes(lock.replace("c" * 64, "e" * 64), index.__getitem__)


def test_of_several_compatible_wheels_the_one_pip_prefers_is_counted():
    """pip takes the most specific tag the platform accepts (packaging.tags order), not the largest file: a wheel
    for a newer glibc than the locks' manylinux_2_28, or for musl, is not installable at all."""
    wheels = {"cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64": 5, "cp312-cp312-manylinux_2_28_x86_64": 7,
              "cp312-abi3-manylinux_2_28_x86_64": 9, "py3-none-any": 10, "cp312-cp312-musllinux_1_2_x86_64": 99,
              "cp312-cp312-manylinux_2_34_x86_64": 100}
    files = [{"filename": f"numpy-2.3.0-{tags}.whl", "hashes": {"sha256": f"{i:064x}"}, "size": size}
             for i, (tags, size) in enumerate(wheels.items())] + [
        {"filename": "numpy-2.3.0.tar.gz", "hashes": {"sha256": "f" * 64}, "size": 1000}]
    lock = "numpy==2.3.0" + "".join(f" \\\n    --hash=sha256:{f['hashes']['sha256']}" for f in files) + "\n"
    assert image_sizes.wheel_bytes(lock, {"numpy": {"files": files}}.__getitem__) == {"numpy==2.3.0": 7}
    without_28 = [f for f in files if f["size"] != 7]
    assert image_sizes.wheel_bytes(lock, {"numpy": {"files": without_28}}.__getitem__) == {"numpy==2.3.0": 5}


def test_the_committed_image_sizes_are_the_locks_of_today():
    """estimates/image_sizes.json is regenerated with `python -m ops image-sizes` when a lock changes."""
    sizes = json.loads(image_sizes.SIZES.read_text())
    for repository, lock in image_sizes.LOCKS.items():
        pins = set(re.findall(r"^([A-Za-z0-9_.\-]+==\S+)", (REPO_ROOT / lock).read_text(), re.M))
        assert sizes[repository]["lock"] == lock and sizes[repository]["wheels"] == len(pins)
        assert set(sizes[repository]["largest"]) <= pins
