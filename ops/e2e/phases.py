"""How long each phase of a run took, from the timestamps Kubernetes keeps on its own objects, set beside the render's
estimate for the same phase (offline/estimates: first_gpu_pod.py, timeline.py).

The run reads the cluster with one ``kubectl get nodes,pods --all-namespaces -o json`` (a ``List`` of both kinds)
every poll while the stack is up, and keeps, per node and per pod, the first time each thing was true:

- a node's pool from the label AKS puts on every node of an agent pool (``kubernetes.azure.com/agentpool``) or
  Karpenter on every node of a NodePool (``karpenter.sh/nodepool``); its VM size from the well-known
  ``node.kubernetes.io/instance-type``; spot from ``kubernetes.azure.com/scalesetpriority: spot`` (AKS,
  learn.microsoft.com/azure/aks/spot-node-pool) or ``karpenter.sh/capacity-type: spot`` (Karpenter);
- Ready: the ``lastTransitionTime`` of a node's or pod's ``Ready`` condition with status True (NodeCondition,
  PodCondition in kubernetes/api core/v1/types.go); a Job's pod that finished before a poll saw it Ready counts from
  its container's ``state.terminated.startedAt``;
- GPU allocatable: ``status.allocatable["nvidia.com/gpu"]`` above zero. Kubernetes keeps no time for it, so it is the
  first poll that saw it (a bound: at most one poll interval late).

The GPU operator's pods on a node: the driver's carry ``app.kubernetes.io/component: nvidia-driver`` (NVIDIA/
gpu-operator manifests/state-driver/0500_daemonset.yaml, the NVIDIADriver path the stacks use) and the device
plugin's ``app: nvidia-device-plugin-daemonset`` (assets/state-device-plugin/0500_daemonset.yaml), both in the
operator's namespace. A pool whose driver AKS installs (``gpuDriver: install``) has no driver pod: its driver is
loaded when the node turns Ready.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from components.vocabulary import GpuDriver
from offline.estimates.first_gpu_pod import POOL_SELECTORS, gpu_pod_template
from offline.runs import Clock, Phase, PhaseName

if TYPE_CHECKING:
    from offline.render import Render
    from program.config.schema import StackConfig

GPU = "nvidia.com/gpu"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
SPOT_LABELS = {"kubernetes.azure.com/scalesetpriority": "spot", "karpenter.sh/capacity-type": "spot"}
DRIVER_POD = ("app.kubernetes.io/component", "nvidia-driver")
DEVICE_PLUGIN_POD = ("app", "nvidia-device-plugin-daemonset")
OPERATOR_CHART = "gpu-operator"
OPERATOR_NAMESPACE = "gpu-operator"
"""The GPU operator's namespace where the render names none (components/gpu/operator.py's default)."""
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
LISTING = ("get", "nodes,pods", "--all-namespaces", "--output", "json")
"""The one kubectl call a poll makes: with two kinds, kubectl prints one v1 ``List`` whose items keep their ``kind``
(kubernetes/kubectl pkg/cmd/get/get.go, ``printGeneric``)."""


def timestamp(value: str | None) -> dt.datetime | None:
    """A Kubernetes time (RFC 3339, ``2026-01-02T03:04:05Z``) as an aware datetime."""
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _ready(obj: Mapping[str, Any]) -> dt.datetime | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((timestamp(c.get("lastTransitionTime")) for c in conditions
                 if c.get("type") == "Ready" and c.get("status") == "True"), None)


def _started(pod: Mapping[str, Any]) -> dt.datetime | None:
    """When a finished pod's first container started (it may never have been seen Ready)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Succeeded":
        return None
    times = [timestamp(((s.get("state") or {}).get("terminated") or {}).get("startedAt"))
             for s in status.get("containerStatuses") or []]
    return min((t for t in times if t), default=None)


def asks_for_gpu(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return any(GPU in ((c.get("resources") or {}).get(kind) or {})
               for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
               for kind in ("limits", "requests"))


@dataclass
class NodeSeen:
    name: str
    pool: str | None
    vm_size: str | None
    spot: bool
    created: dt.datetime
    first_seen: dt.datetime
    last_seen: dt.datetime
    ready: dt.datetime | None = None
    allocatable: dt.datetime | None = None
    """The first poll that saw ``nvidia.com/gpu`` allocatable."""
    allocatable_first_poll: bool = False
    """It was already allocatable the first time a poll saw the node: the time is a bound, not the moment."""


@dataclass
class PodSeen:
    namespace: str
    name: str
    labels: Mapping[str, str]
    node: str | None
    gpu: bool
    created: dt.datetime
    ready: dt.datetime | None = None
    finished: bool = False
    """It counts from its container's start: the poll saw it finished, never Ready."""


@dataclass
class Observations:
    """What the polls saw, each thing at the first time it was true."""

    nodes: dict[str, NodeSeen] = field(default_factory=dict)
    pods: dict[str, PodSeen] = field(default_factory=dict)
    polls: list[dt.datetime] = field(default_factory=list)

    def add(self, listing: Mapping[str, Any], at: dt.datetime) -> None:
        """One poll's ``List`` of nodes and pods, read at ``at``."""
        self.polls.append(at)
        for item in listing.get("items") or []:
            meta = item.get("metadata") or {}
            created = timestamp(meta.get("creationTimestamp")) or at
            if item.get("kind") == "Node":
                self._node(item, meta, created, at)
            elif item.get("kind") == "Pod":
                self._pod(item, meta, created)

    def _node(self, node: Mapping[str, Any], meta: Mapping[str, Any], created: dt.datetime, at: dt.datetime) -> None:
        labels = meta.get("labels") or {}
        seen = self.nodes.get(meta["name"])
        if seen is None:
            seen = self.nodes[meta["name"]] = NodeSeen(
                meta["name"], next((labels[k] for k in POOL_SELECTORS if k in labels), None),
                labels.get(INSTANCE_TYPE), any(labels.get(k) == v for k, v in SPOT_LABELS.items()), created, at, at)
        seen.last_seen = at
        seen.ready = seen.ready or _ready(node)
        gpus = str(((node.get("status") or {}).get("allocatable") or {}).get(GPU, "0"))
        if seen.allocatable is None and gpus.isdigit() and int(gpus) > 0:
            seen.allocatable = at
            seen.allocatable_first_poll = seen.first_seen == at

    def _pod(self, pod: Mapping[str, Any], meta: Mapping[str, Any], created: dt.datetime) -> None:
        key = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        seen = self.pods.get(key)
        if seen is None:
            seen = self.pods[key] = PodSeen(meta.get("namespace", ""), meta.get("name", ""), meta.get("labels") or {},
                                            None, asks_for_gpu(pod), created)
        seen.node = seen.node or (pod.get("spec") or {}).get("nodeName")
        if seen.ready is None:
            if (ready := _ready(pod)) is not None:
                seen.ready = ready
            elif (started := _started(pod)) is not None:
                seen.ready, seen.finished = started, True

    def gone(self, node: NodeSeen) -> bool:
        """The node was missing from the latest poll (scaled down, evicted)."""
        return bool(self.polls) and node.last_seen < self.polls[-1]


@dataclass(frozen=True)
class Context:
    """What the phases are counted from and against."""

    cfg: StackConfig
    up_started: dt.datetime
    up_finished: dt.datetime | None
    """None: `pulumi up` did not finish (failed, timed out or interrupted)."""
    cluster_ready: dt.datetime | None
    """The managed cluster's ResOutputsEvent."""
    operator_namespace: str = OPERATOR_NAMESPACE
    workload_namespaces: frozenset[str] = frozenset()
    """Where the render's GPU workloads run: their first pod is the scenario's first GPU pod."""
    scale_up_before: dt.datetime | None = None
    """A node that joined after `pulumi up` and before this (the spot drill's start) was a scale-up."""


@dataclass(frozen=True)
class Measured:
    seconds: float | None
    source: str


def _since(zero: dt.datetime, at: dt.datetime | None) -> float | None:
    return None if at is None else max(0.0, (at - zero).total_seconds())


def _operator_pod(obs: Observations, ctx: Context, node: str, selector: tuple[str, str]) -> PodSeen | None:
    key, value = selector
    pods = [p for p in obs.pods.values() if p.node == node and p.namespace == ctx.operator_namespace
            and p.labels.get(key) == value and p.ready is not None]
    return min(pods, key=lambda p: p.ready or dt.datetime.max.replace(tzinfo=dt.UTC), default=None)


def _node_chain(obs: Observations, ctx: Context, node: NodeSeen, zero: dt.datetime,
                node_phase: PhaseName) -> dict[PhaseName, Measured]:
    """A GPU node's phases from ``zero``: Ready, its driver, its device plugin, its GPUs allocatable."""
    found = {node_phase: Measured(_since(zero, node.ready), f"Node/{node.name} Ready (pool {node.pool})")}
    pool = next((p for p in ctx.cfg.gpu_pools if p.name == node.pool), None)
    if pool is not None and pool.gpu_driver == GpuDriver.INSTALL:
        found[PhaseName.DRIVER_READY] = Measured(found[node_phase].seconds,
                                                 f"Node/{node.name} Ready (AKS installs the driver while it joins)")
    else:
        driver = _operator_pod(obs, ctx, node.name, DRIVER_POD)
        found[PhaseName.DRIVER_READY] = Measured(
            _since(zero, driver.ready) if driver else None,
            f"Pod/{driver.namespace}/{driver.name} Ready" if driver else f"no driver pod seen Ready on {node.name}")
    plugin = _operator_pod(obs, ctx, node.name, DEVICE_PLUGIN_POD)
    found[PhaseName.DEVICE_PLUGIN_READY] = Measured(
        _since(zero, plugin.ready) if plugin else None,
        f"Pod/{plugin.namespace}/{plugin.name} Ready" if plugin else f"no device plugin pod seen Ready on {node.name}")
    bound = " (already so at the first poll that saw the node: an upper bound)" if node.allocatable_first_poll else ""
    found[PhaseName.GPU_ALLOCATABLE] = Measured(_since(zero, node.allocatable),
                                                f"poll: Node/{node.name} allocatable {GPU}{bound}")
    return found


def _pod_ready(pod: PodSeen | None, zero: dt.datetime, none: str) -> Measured:
    if pod is None:
        return Measured(None, none)
    how = "started (its Job's pod, finished before a poll saw it Ready)" if pod.finished else "Ready"
    return Measured(_since(zero, pod.ready), f"Pod/{pod.namespace}/{pod.name} {how}")


def _gpu_nodes(obs: Observations, ctx: Context) -> list[NodeSeen]:
    pools = {p.name for p in ctx.cfg.gpu_pools}
    return sorted((n for n in obs.nodes.values() if n.pool in pools and n.ready is not None),
                  key=lambda n: (n.ready or n.created, n.name))


def measured_up(obs: Observations, ctx: Context) -> dict[PhaseName, Measured]:
    """The phases of `pulumi up` (Clock.UP) from its start, as far as the run got."""
    zero = ctx.up_started
    found = {
        PhaseName.UP: Measured(_since(zero, ctx.up_finished), "pulumi engine event (SummaryEvent of `pulumi up`)"),
        PhaseName.CLUSTER_READY: Measured(_since(zero, ctx.cluster_ready),
                                          "pulumi engine event (ResOutputsEvent of the ManagedCluster)"),
    }
    end = ctx.up_finished or dt.datetime.max.replace(tzinfo=dt.UTC)
    # A node made after `pulumi up` ended (a probe's scale-up) is no phase of `pulumi up`: it is the scale-up's.
    first = next((n for n in _gpu_nodes(obs, ctx) if n.created <= end), None)
    if first is None:
        none = "no GPU node that `pulumi up` made was seen Ready"
        found |= {p: Measured(None, none) for p in (PhaseName.GPU_NODE_READY, PhaseName.DRIVER_READY,
                                                   PhaseName.DEVICE_PLUGIN_READY, PhaseName.GPU_ALLOCATABLE)}
    else:
        found |= _node_chain(obs, ctx, first, zero, PhaseName.GPU_NODE_READY)
    pods = [p for p in obs.pods.values() if p.gpu and p.namespace in ctx.workload_namespaces and p.ready
            and p.created <= end]
    found[PhaseName.GPU_POD_READY] = _pod_ready(min(pods, key=lambda p: p.ready or end, default=None), zero,
                                                "no GPU pod of the scenario's that `pulumi up` started was seen Ready")
    return found


def measured_scale_up(obs: Observations, ctx: Context) -> tuple[dict[PhaseName, Measured], str] | None:
    """The first GPU node that joined after `pulumi up` for a pod that waited for it (scale from zero or up), its
    phases from the moment that pod was created (Clock.SCALE_UP); None when no node joined so."""
    if ctx.up_finished is None:
        return None
    cutoff = ctx.scale_up_before or dt.datetime.max.replace(tzinfo=dt.UTC)
    for node in _gpu_nodes(obs, ctx):
        if not ctx.up_finished < node.created < cutoff:
            continue
        waited = [p for p in obs.pods.values() if p.gpu and p.node == node.name and p.created < node.created
                  and p.namespace != ctx.operator_namespace]
        pod = min(waited, key=lambda p: p.created, default=None)
        if pod is None:
            continue
        found = _node_chain(obs, ctx, node, pod.created, PhaseName.NODE_REPLACED)
        found[PhaseName.GPU_POD_READY] = _pod_ready(pod, pod.created, "")
        return found, f"Pod/{pod.namespace}/{pod.name} created"
    return None


def workload_namespaces(render: Render) -> frozenset[str]:
    """The namespaces of the render's GPU workloads (what `pulumi up` starts that asks for a GPU)."""
    found = set()
    for r in render.resources:
        if r.custom and r.type.startswith("kubernetes:") and gpu_pod_template(r.inputs) is not None:
            namespace = (r.inputs.get("metadata") or {}).get("namespace")
            if isinstance(namespace, str):
                found.add(namespace)
    return frozenset(found)


def operator_namespace(render: Render) -> str:
    release = next((r for r in render.resources if r.custom and r.inputs.get("chart") == OPERATOR_CHART), None)
    namespace = release.inputs.get("namespace") if release is not None else None
    return namespace if isinstance(namespace, str) else OPERATOR_NAMESPACE


UP_PHASES = (PhaseName.UP, PhaseName.CLUSTER_READY, PhaseName.GPU_NODE_READY, PhaseName.DRIVER_READY,
             PhaseName.DEVICE_PLUGIN_READY, PhaseName.GPU_ALLOCATABLE, PhaseName.GPU_POD_READY)
SCALE_UP_PHASES = (PhaseName.NODE_REPLACED, PhaseName.DRIVER_READY, PhaseName.DEVICE_PLUGIN_READY,
                   PhaseName.GPU_ALLOCATABLE, PhaseName.GPU_POD_READY)


def phases(obs: Observations, ctx: Context, estimated: Mapping[tuple[PhaseName, Clock], float]) -> list[Phase]:
    """Every phase of `pulumi up` (None where the run did not get there), and a scale-up's where one happened."""
    def phase(name: PhaseName, clock: Clock, m: Measured) -> Phase:
        return Phase(name=name, clock=clock, measured_seconds=m.seconds, estimated_seconds=estimated.get((name, clock)),
                     source=m.source)

    up = measured_up(obs, ctx)
    result = [phase(name, Clock.UP, up[name]) for name in UP_PHASES]
    if (scale := measured_scale_up(obs, ctx)) is not None:
        found, zero = scale
        result += [phase(name, Clock.SCALE_UP, Measured(found[name].seconds, f"{found[name].source}, from {zero}"))
                   for name in SCALE_UP_PHASES]
    return result

