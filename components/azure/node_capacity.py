"""What a node of a pool offers the workloads' pods: its VM size, less what AKS reserves for the kubelet and the
OS, less the requests of the DaemonSets that run on every node. Kueue's quotas count this, and a test holds every
pod of every stack to it.

AKS reservations (learn.microsoft.com/azure/aks/node-resource-reservations, AKS 1.29 and later): CPU by the
host's cores (the table below); memory ``min(20 MB × maxPods + 50 MB, 25 % of the VM's)`` plus the kubelet's
100 Mi eviction threshold (MB counted as MiB here, which reserves a little more).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.azure.node_pools import MAX_PODS

KUBE_RESERVED_CPU_M = {1: 60, 2: 100, 4: 140, 8: 180, 16: 260, 32: 420, 64: 740}
"""Cores on the host → millicores AKS reserves. Between rows the larger row counts; past 64 cores, 10 m per core
more (the 32 → 64 step), as the table stops there."""
EVICTION_MI = 100


@dataclass(frozen=True)
class Resources:
    cpu_m: int
    """Millicores."""
    memory_mi: int
    """Mebibytes."""

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu_m - other.cpu_m, self.memory_mi - other.memory_mi)


@dataclass(frozen=True)
class NodeDaemonSet:
    name: str
    requests: Resources
    """Summed over its containers (an init container counts when it asks for more)."""
    source: str


NODE_DAEMONSETS: tuple[NodeDaemonSet, ...] = (
    NodeDaemonSet("cilium", Resources(0, 100),
                  "Azure/AKS#5244: the agent pod requests 100Mi through its init container, no CPU"),
    NodeDaemonSet("cloud-node-manager", Resources(50, 50), "Azure/AKS#5251: kubectl describe node, 50m and 50Mi"),
    NodeDaemonSet("csi-azuredisk-node", Resources(30, 60),
                  "Azure/AKS#5251: 10m and 20Mi per container, three containers (driver, registrar, probe)"),
    NodeDaemonSet("csi-azurefile-node", Resources(30, 60), "the same three containers as csi-azuredisk-node"),
    NodeDaemonSet("aks-other-agents", Resources(300, 500),
                  "an allowance, not a measurement: azure-cns, azure-ip-masq-agent and ama-metrics-node publish no "
                  "requests (Azure/azure-container-networking cns/azure-cns.yaml sets none); check with "
                  "`kubectl describe node` on a real node"),
    NodeDaemonSet("nfd-worker", Resources(5, 64), "node-feature-discovery 0.19.0 values.yaml worker.resources"),
    NodeDaemonSet("csi-blob-node", Resources(40, 80),
                  "blob-csi-driver 1.27.9 values.yaml node.resources: four containers of 10m and 20Mi"),
    NodeDaemonSet("gpu-operator-operands", Resources(0, 0),
                  "gpu-operator v26.7.0 values.yaml: driver, toolkit, device plugin, DCGM exporter, GFD, validator "
                  "have resources: {}"),
)
"""Every DaemonSet that may run on a user node, whatever the stack enables (a few tens of millicores more than a
stack without NFD or the Blob CSI driver needs)."""


def kube_reserved_cpu_m(cores: int) -> int:
    if cores > 64:
        return KUBE_RESERVED_CPU_M[64] + 10 * (cores - 64)
    return KUBE_RESERVED_CPU_M[min(c for c in KUBE_RESERVED_CPU_M if c >= cores)]


def allocatable(vcpus: int, memory_gib: int, max_pods: int = MAX_PODS) -> Resources:
    """The node's allocatable CPU and memory."""
    memory_mi = memory_gib * 1024
    reserved_mi = min(20 * max_pods + 50, memory_mi // 4) + EVICTION_MI
    return Resources(vcpus * 1000 - kube_reserved_cpu_m(vcpus), memory_mi - reserved_mi)


def daemonset_requests() -> Resources:
    return Resources(sum(d.requests.cpu_m for d in NODE_DAEMONSETS),
                     sum(d.requests.memory_mi for d in NODE_DAEMONSETS))


def workload_capacity(vcpus: int, memory_gib: int, max_pods: int = MAX_PODS) -> Resources:
    """What one node leaves the workloads' pods."""
    return allocatable(vcpus, memory_gib, max_pods) - daemonset_requests()
