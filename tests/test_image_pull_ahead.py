"""Images pulled ahead on GPU pools: the DaemonSets as rendered, and what they save in the first-GPU-pod estimate."""

from __future__ import annotations

import pytest

from components.images.pull_ahead import COMPONENT
from offline.estimates import first_gpu_pod, timeline
from offline.estimates.first_gpu_pod import Phase
from tests.helpers import STACKS, load, pod_spec, render_with, shape

DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
PLATFORM_CHECKS = "gpu-smoke-test"
"""The platform's own GPU checks run once at deploy, most of them a 0.1 GB CUDA image: nothing pulls them ahead."""


def pull_aheads(render):
    return [r for r in render.of_type(DAEMON_SET)
            if r.revealed["metadata"]["labels"].get("app.kubernetes.io/component") == COMPONENT]

GATE = {"key": "startup-taint.cluster-autoscaler.kubernetes.io/gpu-check", "operator": "Exists", "effect": "NoSchedule"}


def test_a_pull_ahead_pod_lands_on_its_gpu_pool_as_the_node_joins_and_asks_for_no_gpu(render_shape):
    r = render_shape("llm")
    server = pod_spec(r.named("llm-deployment").revealed)
    ahead = {d.revealed["metadata"]["name"]: d.revealed for d in pull_aheads(r)}
    # The jobs image too: the GPU node gate's check runs from it on every new node.
    assert set(ahead) == {"pull-vllm", "pull-weights", "pull-jobs"}
    for daemon_set in ahead.values():
        pod = pod_spec(daemon_set)
        # The server's tolerations and the GPU node gate's: images pull while the gate holds a new node.
        assert (pod["nodeSelector"], pod["tolerations"]) == (server["nodeSelector"], [*server["tolerations"], GATE])
        assert not any("nvidia.com/gpu" in c["resources"]["limits"] for c in pod["containers"] + pod["initContainers"])
        (pull,) = pod["initContainers"]
        assert pull["command"] == ["true"]
        # `pulumi up` does not wait for pulls, and a new digest starts every node's pull at once.
        assert daemon_set["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        assert daemon_set["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "100%"
        assert daemon_set["metadata"]["namespace"] == "pull-ahead-llm"
    pulled = {pod_spec(d)["initContainers"][0]["image"] for d in ahead.values()}
    assert pulled == {server["containers"][0]["image"], server["initContainers"][0]["image"], r.outputs["jobsImage"]}
    namespace = r.named("pull-ahead-llm-ns").revealed["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_workload_image_is_pulled_ahead_on_its_agent_pool(stack, render_of):
    r = render_of(stack)
    nap = {p.name for p in r.cfg.gpu_pools if p.nap}
    ahead: dict[str, set[str]] = {}
    for d in pull_aheads(r):
        pod = pod_spec(d.revealed)
        ahead.setdefault(first_gpu_pod._pool_of(pod), set()).add(pod["initContainers"][0]["image"])
    # NAP nodes pull one image at a time (karpenter-provider-azure#1260): a big pull would hold up the GPU's.
    assert not ahead.keys() & nap, stack
    for w in r.resources:
        pod = first_gpu_pod.gpu_pod_template(w.revealed) if w.custom and w.type.startswith("kubernetes:") else None
        if pod is None or w.revealed["metadata"].get("namespace") == PLATFORM_CHECKS:
            continue
        pool = first_gpu_pod._pool_of(pod)
        if pool in nap:
            continue
        images = {c["image"] for c in pod.get("initContainers", []) + pod["containers"]}
        assert images <= ahead.get(pool, set()), (stack, w.name, images - ahead.get(pool, set()))


def test_a_stack_can_turn_pulling_ahead_off():
    assert pull_aheads(render_with())
    off = render_with(addons={"imagePullAhead": False})
    assert not pull_aheads(off)
    assert not [r for r in off.resources if r.name.startswith("pull-ahead")]


def test_an_aks_driver_node_takes_pods_after_the_driver_an_operator_driver_node_once_booted():
    table = timeline.load_durations()
    boot, driver = table["gpu_node"]["vm_boot"]["seconds"], table["gpu_node"]["aks_driver"]["seconds"]
    for setting, joins in (("install", boot + driver), ("precompiled", boot)):
        pool = load({"gpuPools": [{"driver": setting}]}).gpu_pools[0]
        assert first_gpu_pod.joined(pool, first_gpu_pod.gpu_ready(pool, 0, first_gpu_pod.Node(0), table, [])) == joins


def test_images_pulled_ahead_start_together_once_the_node_and_their_daemon_set_exist():
    table = timeline.load_durations()
    per_gb = table["image_pull"]["seconds_per_gigabyte"]
    gigabytes = {name: table["pod_images"][name]["gigabytes"] for name in ("jobs", "vllm/vllm-openai")}
    done = first_gpu_pod.pulled_ahead([("cr.io/jobs@sha256:a", 0.0), ("cr.io/vllm/vllm-openai@sha256:b", 500.0)],
                                      100.0, table)
    assert done == {"cr.io/jobs@sha256:a": pytest.approx(100 + gigabytes["jobs"] * per_gb),
                    "cr.io/vllm/vllm-openai@sha256:b": pytest.approx(500 + gigabytes["vllm/vllm-openai"] * per_gb)}


def test_a_workload_waits_only_for_what_is_left_of_a_pull_ahead():
    table = timeline.load_durations()
    gpu = [Phase("GPU ready", 0.0, 400.0, "test")]
    image = "cr.io/jobs@sha256:a"
    full, _ = first_gpu_pod.workload_phases([image], gpu, 0.0, table)[1:]
    done_early, _ = first_gpu_pod.workload_phases([image], gpu, 0.0, table, {image: 300.0})[1:]
    half_done, _ = first_gpu_pod.workload_phases([image], gpu, 0.0, table, {image: 450.0})[1:]
    assert full.seconds == table["pod_images"]["jobs"]["gigabytes"] * table["image_pull"]["seconds_per_gigabyte"]
    assert (done_early.seconds, half_done.seconds) == (0.0, 50.0)
    # A pull ahead that started late (its DaemonSet waited for the image's build) ends no later than the pod's own.
    late, _ = first_gpu_pod.workload_phases([image], gpu, 0.0, table, {image: 400 + full.seconds + 60})[1:]
    assert late.seconds == full.seconds


def test_a_new_node_s_first_workload_gains_the_time_between_its_node_joining_and_its_gpu(render_shape):
    with_pulls = timeline.plan(render_shape("function"))[1].new_node_workload
    config = shape("function")
    config["addons"] = {**config.get("addons", {}), "imagePullAhead": False}
    without = timeline.plan(render_with(**config))[1]
    table = timeline.load_durations()
    # An operator-driver pool: the node takes pods once booted, so the pull runs while the driver installs, the
    # device plugin starts and the gate checks the GPUs; it is done before them, so none of it is left to wait for.
    node = table["gpu_node"]
    overlap = sum(node[row]["seconds"] for row in ("driver_precompiled", "device_plugin", "gate_check"))
    pull = table["pod_images"]["function"]["gigabytes"] * table["image_pull"]["seconds_per_gigabyte"]
    assert without.new_node_workload.ready - with_pulls.ready == pytest.approx(min(pull, overlap)) == pull

