"""Every pod fits its node after AKS's reservations and the DaemonSets (round-3 k8s item 8: on a 4-vCPU T4 node the
vLLM pod left 0.86 CPU of allocatable for every DaemonSet, and Kueue's quota counted the VM size).
components/azure/node_capacity.py holds the reservations and DaemonSet requests with their sources; this test holds
those to the charts' own values and every pod of every stack to them."""

from __future__ import annotations

import re

import pytest

from components.azure.node_capacity import NODE_DAEMONSETS, Resources, allocatable, workload_capacity
from components.gpu.sizes import GPU_SIZES
from tests import upstream
from tests.helpers import STACKS, pod_spec

WORKLOADS = ("kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob")
CPU_SIZES = {"Standard_D2ds_v5": (2, 8), "Standard_D4ds_v5": (4, 16), "Standard_D8ds_v5": (8, 32)}
"""vCPUs and GiB of the CPU sizes the stacks use (learn.microsoft.com/azure/virtual-machines/sizes/general-purpose/
ddsv5-series: 4 GiB per vCPU)."""


def quantity(value: str, unit: str) -> int:
    """A Kubernetes quantity in millicores (``unit="m"``) or MiB (``unit="Mi"``)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Mi|Gi|Ki)?", str(value))
    assert match, value
    number, suffix = float(match[1]), match[2]
    if unit == "m":
        return round(number if suffix == "m" else number * 1000)
    return round(number * {"Gi": 1024, "Mi": 1, "Ki": 1 / 1024, None: 1 / 2**20}[suffix])


def requests(pod: dict) -> tuple[Resources, int]:
    """(CPU and memory, GPUs) a pod asks for: its containers' sum, or an init container's if larger."""
    def total(containers):
        cpu = sum(quantity(c["resources"].get("requests", {}).get("cpu", "0"), "m") for c in containers)
        memory = sum(quantity(c["resources"].get("requests", {}).get("memory", "0"), "Mi") for c in containers)
        return cpu, memory
    cpu, memory = total(pod["containers"])
    for init in pod.get("initContainers", []):
        cpu, memory = max(cpu, total([init])[0]), max(memory, total([init])[1])
    gpus = sum(int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0)) for c in pod["containers"])
    return Resources(cpu, memory), gpus


def pool_pods(r):
    """(workload, pool name, its pod's requests, GPUs) for every workload pinned to a user pool."""
    found = []
    for w in (w for t in WORKLOADS for w in r.of_type(t)):
        pod = pod_spec(w.revealed)
        pool = pod.get("nodeSelector", {}).get("kubernetes.azure.com/agentpool")
        if pool is not None:
            found.append((w, pool, *requests(pod)))
    return found


def node_capacity(r, pool_name: str) -> Resources:
    size = next(p.vm_size for p in (*r.cfg.gpu_pools, *r.cfg.cpu_pools) if p.name == pool_name)
    vcpus, memory = (GPU_SIZES[size].vcpus, GPU_SIZES[size].memory_gib) if size in GPU_SIZES else CPU_SIZES[size]
    return workload_capacity(vcpus, memory)


def test_every_pod_fits_an_empty_node_of_its_pool(renders):
    """A pod that does not fit what a node leaves pods stays Pending for ever, on any number of nodes."""
    checked = 0
    for r in renders.values():
        for w, pool, need, _ in pool_pods(r):
            room = node_capacity(r, pool)
            assert need.cpu_m <= room.cpu_m and need.memory_mi <= room.memory_mi, (r.stack, w.name, need, room)
            checked += 1
    assert checked >= 25


@pytest.mark.parametrize("stack", STACKS)
def test_what_a_pool_runs_at_rest_fits_its_nodes_at_rest(stack, render_of):
    """Replica counts assume a node's GPU shares hold their pods (gpu-sharing: three services and the notebook on
    one T4 at rest); their CPU and memory must fit beside each other too, or one stays Pending and costs a node."""
    r = render_of(stack)
    scaled_min = {o.inputs["spec"]["scaleTargetRef"]["name"]: o.inputs["spec"]["minReplicaCount"]
                  for o in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")}
    by_pool: dict[str, Resources] = {}
    for w, pool, need, gpus in pool_pods(r):
        if w.type != "kubernetes:apps/v1:Deployment" or not gpus:
            continue
        count = scaled_min.get(w.inputs["metadata"]["name"], w.inputs["spec"].get("replicas", 1))
        before = by_pool.get(pool, Resources(0, 0))
        by_pool[pool] = Resources(before.cpu_m + count * need.cpu_m, before.memory_mi + count * need.memory_mi)
    for pool, need in by_pool.items():
        nodes = r.cfg.gpu_pool(pool).min_count
        room = node_capacity(r, pool)
        assert need.cpu_m <= nodes * room.cpu_m and need.memory_mi <= nodes * room.memory_mi, (r.stack, pool)


def test_the_node_reservations_are_akss():
    """learn.microsoft.com/azure/aks/node-resource-reservations: CPU 140 m on 4 cores; memory min(20 MB x maxPods
    + 50 MB, 25 %) plus the 100 Mi eviction threshold (the doc's own example: 8 GB, 30 pods -> 650 MB + 100)."""
    assert allocatable(4, 28, max_pods=110) == Resources(3860, 28 * 1024 - 2250 - 100)
    assert allocatable(2, 8, max_pods=30) == Resources(1900, 8 * 1024 - 650 - 100)
    assert allocatable(1, 4, max_pods=70) == Resources(940, 4096 - 1024 - 100)  # 25 % is the smaller


@pytest.mark.parametrize("chart, name, path", [
    ("node-feature-discovery", "nfd-worker", ("worker",)),
    ("blob-csi-driver", "csi-blob-node", ("node",)),
])
def test_our_daemonsets_requests_are_their_charts(chart, name, path):
    values = upstream.chart_values(chart)
    for key in path:
        values = values[key]
    resources = values["resources"]
    containers = resources.values() if "requests" not in resources else [resources]
    need = Resources(sum(quantity(c["requests"]["cpu"], "m") for c in containers),
                     sum(quantity(c["requests"]["memory"], "Mi") for c in containers))
    assert next(d.requests for d in NODE_DAEMONSETS if d.name == name) == need


def test_the_gpu_operators_operands_request_nothing():
    values = upstream.chart_values("gpu-operator")
    for operand in ("driver", "toolkit", "devicePlugin", "dcgmExporter", "gfd", "validator"):
        assert values[operand].get("resources") in ({}, None), operand
