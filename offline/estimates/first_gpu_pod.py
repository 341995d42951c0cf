"""How soon a GPU pod runs: after `pulumi up` starts, when the autoscaler adds a node, when spot takes one away.

A GPU pod waits, in order, for: a node of its pool (the pool's first node while the pool is created, or one the
autoscaler or NAP adds for the pending pod), the driver (AKS's while the node boots, or the GPU operator's:
NVIDIA's precompiled image, or a compile), the device plugin advertising ``nvidia.com/gpu`` (the operator's plugin
validator then runs its CUDA pod through it on every new node: the first GPU pod), and then, for a workload, its
image on the node and its own start. Where the pool pulls its workloads' images ahead (image-pull-ahead
DaemonSets), those pulls begin together when the node joins, and a workload waits only for what is left of one.
Each phase's length is a row of durations.yaml with its source; when each phase may begin comes from the
`pulumi up` schedule (timeline.py): when the pool, the operator and the workload exist.

"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from components.images.pull_ahead import COMPONENT as PULL_AHEAD
from components.vocabulary import GpuDriver
from offline.estimates import Step, minutes
from program.markdown import table

if TYPE_CHECKING:
    from offline.render import Render, Resource
    from program.config.schema import GpuPool

TARGET_MINUTES = 16.5
"""Every stack's first GPU pod is Ready within this many minutes of `pulumi up`, and so is a new GPU node: 15, as
first set, plus what two choices cost on every new GPU node: the GPU node gate's check (1 min) and the GPU
operator's precompiled driver over AKS's (0.5 min)."""
STACK_TARGETS = {"gpu-basics": 12.0}
"""Stacks asked for less than ``TARGET_MINUTES``."""
ABOVE_TARGET = {
    "gpu-basics": (16.1, "its GPU pool is an AgentPool of its own, which AKS creates only once the cluster exists "
                         "(7.6 min), and its VM boots for 5 min: 12.6 min before the driver, the device plugin and "
                         "the GPU node gate's check"),
    "av-resim": (17.3, "its private cluster waits for the private endpoints (1.2 min; one VNet write at a time, "
                       "Azure/AKS#4522), and the GPU operator loads its precompiled driver (1.5 min)"),
    "gpu-nap": (16.7, "NAP makes no node before a GPU pod asks for one, and the NodePool it asks through is written "
                      "to the cluster's API after the cluster"),
}
"""Stacks whose first GPU pod is estimated above their target: the ceiling their figure must not pass, and why.
The one lever left, declaring the GPU pool in the cluster's own agentPoolProfiles so it boots with the cluster,
makes adding, renaming or resizing a pool fail on a deployed stack ("Adding agent pools to an existing cluster is
not allowed through managed cluster operations", pulumi/pulumi-azure-native#579; PropertyChangeNotAllowed on
vmSize; every pool Scaling on an edit, pulumi/pulumi-azure-native#4264): not worth 2-4 minutes once per stack."""

AGENT_POOL = "azure-native:containerservice:AgentPool"
NAP_POOL = "kubernetes:karpenter.sh/v1:NodePool"
SERVICE = "kubernetes:core/v1:Service"
NIC_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
GATE_CONTROLLER = "gpu-node-gate-controller"
"""The GPU node gate's Deployment: where it exists, a new node's GPUs are checked before GPU pods land."""
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
BOOT = "VM boots and joins the cluster"
DEVICE_PLUGIN = "device plugin advertises nvidia.com/gpu"
POOL_SELECTORS = ("kubernetes.azure.com/agentpool", "karpenter.sh/nodepool")
DRIVER_ROW = {GpuDriver.INSTALL: "aks_driver", GpuDriver.PRECOMPILED: "driver_precompiled",
              GpuDriver.NONE: "driver_compile"}


@dataclass(frozen=True)
class Phase:
    what: str
    start: float
    seconds: float
    source: str

    @property
    def finish(self) -> float:
        return self.start + self.seconds


@dataclass(frozen=True)
class Estimate:
    """One chain of phases, from its clock's zero (`pulumi up`'s start, or the moment a new node is asked for)."""

    pod: str
    """What runs at the end: a workload's resource name, or the GPU check every new node runs."""
    pool: str
    phases: tuple[Phase, ...]

    @property
    def ready(self) -> float:
        return self.phases[-1].finish if self.phases else 0.0


@dataclass(frozen=True)
class FirstGpuPod:
    deploy: Estimate | None
    """The first GPU pod `pulumi up` starts; None where every GPU pod waits for a run, a schedule or a request."""
    deploy_workload: Estimate | None
    """The scenario's first GPU workload pod started by `pulumi up`, with its image and start."""
    endpoint: float | None
    """Seconds from `pulumi up` until the scenario's LoadBalancer answers, where it has one and a pod behind it."""
    new_node: Estimate
    """A pod that asks for a node of the stack's first GPU pool once the cluster runs (scale from zero)."""
    new_node_workload: Estimate | None
    """The same for the pool's first workload: its image and start after the node's GPU is ready."""
    workloads: tuple[Estimate, ...] = ()
    """Every GPU workload `pulumi up` starts, each Ready when its estimate ends (`pulumi up` awaits some)."""


def gpu_pod_template(inputs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A workload's pod spec if any of its containers asks for a GPU (CronJobs' through their job template)."""
    spec = inputs.get("spec") or {}
    template = spec.get("template") or ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    pod = template.get("spec") or {}
    limits = [(c.get("resources") or {}).get("limits") or {} for c in pod.get("containers") or []]
    return pod if any("nvidia.com/gpu" in x for x in limits) else None


def repository(image: str) -> str:
    """``vllm/vllm-openai`` of ``cr.azurecr.io/vllm/vllm-openai@sha256:...``: the registry host and tag dropped."""
    name = re.split(r"@|:(?=[^/]*$)", image)[0]
    host, _, path = name.partition("/")
    return path if ("." in host or ":" in host) and path else name


def _pool_of(pod: Mapping[str, Any]) -> str | None:
    selector = pod.get("nodeSelector") or {}
    return next((selector[k] for k in POOL_SELECTORS if k in selector), None)


def _row(table: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return table["gpu_node"][key]


def _image_row(table: Mapping[str, Any], image: str) -> Mapping[str, Any]:
    return (table.get("pod_images") or {}).get(repository(image)) or table["pod_images"]["default"]


def _pull_seconds(table: Mapping[str, Any], image: str) -> tuple[float, str]:
    row, pull = _image_row(table, image), table["image_pull"]
    return row["gigabytes"] * pull["seconds_per_gigabyte"], f"{row['gigabytes']} GB ({row['source']}); {pull['source']}"


def scale_up(asked: float, table: Mapping[str, Any], nap: bool) -> Phase:
    """The autoscaler, or NAP for a NAP pool, adding a node for a GPU pod pending since ``asked``."""
    row = _row(table, "nap_scale_up" if nap else "scale_up")
    return Phase(f"a pending GPU pod makes {'NAP' if nap else 'the autoscaler'} add a node", asked, row["seconds"],
                 row["source"])


@dataclass(frozen=True)
class Node:
    """What a GPU node of the stack goes through before it takes a GPU pod, besides its pool's driver."""

    operator_ready: float
    """When the GPU operator's release is ready (its DaemonSets then start on a node as it joins)."""
    infiniband: bool = False
    """The Network Operator builds the InfiniBand (DOCA) driver on the node, beside the GPU driver; the node's GPU
    work (and the gate's check of its ports) waits for both."""
    gate: bool = False
    """The GPU node gate checks the node's GPUs before it admits GPU pods."""


def gpu_ready(pool: GpuPool, node_start: float, node: Node, table: Mapping[str, Any],
              node_phases: Sequence[Phase]) -> list[Phase]:
    """From a node starting to boot at ``node_start`` to its GPUs advertised and, with the gate, checked."""
    boot = _row(table, "vm_boot")
    phases = [*node_phases, Phase(BOOT, node_start, boot["seconds"], boot["source"])]
    driver = _row(table, DRIVER_ROW[pool.gpu_driver])
    if pool.gpu_driver == GpuDriver.INSTALL:
        phases.append(Phase("AKS installs its driver during the node's bootstrap", phases[-1].finish,
                            driver["seconds"], driver["source"]))
    else:
        phases.append(Phase(f"GPU operator installs the driver ({pool.gpu_driver})",
                            max(phases[-1].finish, node.operator_ready), driver["seconds"], driver["source"]))
    plugin = _row(table, "device_plugin")
    phases.append(Phase(DEVICE_PLUGIN, max(phases[-1].finish, node.operator_ready),
                        plugin["seconds"], plugin["source"]))
    if node.infiniband:
        # Built beside the GPU driver from the node's join; the rest of it is on the critical path.
        doca = _row(table, "doca_driver")
        booted = phases[len(node_phases)].finish
        built = max(booted, node.operator_ready) + doca["seconds"]
        if built > phases[-1].finish:
            phases.append(Phase("the Network Operator's InfiniBand (DOCA) driver, built since the node joined, is "
                                "ready: its ports up for the check and for NCCL", phases[-1].finish,
                                built - phases[-1].finish, doca["source"]))
    if node.gate:
        check = _row(table, "gate_check")
        phases.append(Phase("the GPU node gate's check passes (its image pulled ahead since the node joined)",
                            phases[-1].finish, check["seconds"], check["source"]))
    return phases


def joined(pool: GpuPool, gpu: Sequence[Phase]) -> float:
    """When a node of ``pool`` takes pods that ask for no GPU: once booted, or, where AKS installs the driver, once
    that part of its bootstrap is done too."""
    boot = next(i for i, p in enumerate(gpu) if p.what == BOOT)
    return gpu[boot + 1].finish if pool.gpu_driver == GpuDriver.INSTALL else gpu[boot].finish


def pulled_ahead(pulls: Sequence[tuple[str, float]], joined_at: float, table: Mapping[str, Any]
                 ) -> dict[str, float]:
    """When each image pulled ahead is on a node that joined at ``joined_at``: (image, when its DaemonSet exists)
    pairs, each pull starting when both have happened, all at once (AKS nodes pull in parallel, Azure/AKS#4499)."""
    return {image: max(joined_at, created) + _pull_seconds(table, image)[0] for image, created in pulls}


def workload_phases(images: Sequence[str], gpu: Sequence[Phase], created: float, table: Mapping[str, Any],
                    ahead: Mapping[str, float] | None = None) -> list[Phase]:
    """A workload pod after its node's GPU is ready: each init container's image and run, in order, then the
    main container's image and start (the kubelet starts them one after another). ``ahead``: when images pulled
    ahead are on the node; the pod waits for the rest of such a pull, or for its own if that would end sooner (the
    node fetches an image once, for whichever pull asked first)."""
    phases = [*gpu]
    clock = max(gpu[-1].finish, created)
    *init, main = images
    for image in images:
        pull, source = _pull_seconds(table, image)
        what = f"image {repository(image)} on the node"
        if ahead and image in ahead and ahead[image] - clock < pull:
            pull = max(0.0, ahead[image] - clock)
            what += " (pulled ahead since the node joined)"
            source = f"the pool's image-pull-ahead pod has it at {minutes(ahead[image])}; {source}"
        start = _image_row(table, image)
        ran = f"init container ({repository(image)}) runs" if image in init else "the pod starts and turns Ready"
        phases += [Phase(what, clock, pull, source), Phase(ran, clock + pull, start["start_seconds"], start["source"])]
        clock = phases[-1].finish
    return phases


def pod_images(pod: Mapping[str, Any]) -> list[str]:
    """The images a pod starts, in the kubelet's order: init containers', then the first container's."""
    return [*(c["image"] for c in pod.get("initContainers") or []), pod["containers"][0]["image"]]


def _first(estimates: Sequence[Estimate]) -> Estimate | None:
    return min(estimates, key=lambda e: (e.ready, e.pod), default=None)


def first_gpu_pod(render: Render, steps: Mapping[str, Step], table: Mapping[str, Any]) -> FirstGpuPod:
    """The estimates for ``render`` given its `pulumi up` schedule ``steps`` and the durations ``table``."""
    cfg = render.cfg
    pools = {p.name: p for p in cfg.gpu_pools}
    operator = [r for r in render.resources if r.custom and r.inputs.get("chart") == "gpu-operator"]
    gate = any(r.name == GATE_CONTROLLER for r in render.resources)
    ib = any(r.type == NIC_POLICY for r in render.resources)
    deployed = Node(steps[operator[0].name].finish if operator else 0.0, gate=gate)
    pool_resources = {_pool_resource_name(r): r for r in render.resources if r.type in (AGENT_POOL, NAP_POOL)}
    pull_ahead = _pull_ahead(render)

    workloads: dict[str, list[tuple[Resource, list[str]]]] = {}
    scheduled: dict[str, list[list[str]]] = {}
    for r in render.resources:
        pod = gpu_pod_template(r.inputs) if r.custom and r.type.startswith("kubernetes:") else None
        if pod is None or (name := _pool_of(pod)) not in pools:
            continue
        images = pod_images(pod)
        # A CronJob's pods wait for its schedule or a run: not part of `pulumi up`.
        if r.inputs.get("kind") == "CronJob":
            scheduled.setdefault(name, []).append(images)
        else:
            workloads.setdefault(name, []).append((r, images))

    deploy, deploy_workloads = [], []
    for name, pool in pools.items():
        resource = pool_resources.get(name)
        created = steps[resource.name] if resource is not None else None
        pods = workloads.get(name, [])
        if created is not None and not pool.nap and pool.initial_count > 0:
            node_start, before = created.start, []
        elif pods and created is not None:
            before = [scale_up(max(min(steps[r.name].start for r, _ in pods), created.finish), table, pool.nap)]
            node_start = before[-1].finish
        else:
            continue
        gpu = gpu_ready(pool, node_start, replace(deployed, infiniband=ib and pool.size.infiniband), table, before)
        deploy.append(Estimate("the GPU check on the pool's first node", name, tuple(gpu)))
        ahead = pulled_ahead([(image, steps[r.name].finish) for r, image in pull_ahead.get(name, [])],
                             joined(pool, gpu), table)
        for r, images in pods:
            deploy_workloads.append(Estimate(r.name, name, tuple(workload_phases(images, gpu, steps[r.name].start,
                                                                                 table, ahead))))

    first_pool = cfg.gpu_pools[0]
    asked = scale_up(0.0, table, first_pool.nap)
    new_gpu = gpu_ready(first_pool, asked.finish, Node(0.0, ib and first_pool.size.infiniband, gate), table,
                        [asked])
    first_images: list[str] | None = next(
        iter([i for _, i in workloads.get(first_pool.name, [])] + scheduled.get(first_pool.name, [])), None)
    new_workload = None
    if first_images is not None:
        ahead = pulled_ahead([(image, 0.0) for _, image in pull_ahead.get(first_pool.name, [])],
                             joined(first_pool, new_gpu), table)
        new_workload = Estimate("its first workload", first_pool.name,
                                tuple(workload_phases(first_images, new_gpu, 0.0, table, ahead)))
    first_workload = _first(deploy_workloads)
    return FirstGpuPod(
        deploy=_first(deploy), deploy_workload=first_workload,
        endpoint=_endpoint(render, steps, first_workload),
        new_node=Estimate("the GPU check on a new node", first_pool.name, tuple(new_gpu)),
        new_node_workload=new_workload, workloads=tuple(deploy_workloads))


def _pull_ahead(render: Render) -> dict[str | None, list[tuple[Resource, str]]]:
    """Pool → its image-pull-ahead DaemonSets, each with the image it pulls."""
    found: dict[str | None, list[tuple[Resource, str]]] = {}
    for r in render.resources:
        labels = (r.inputs.get("metadata") or {}).get("labels") or {}
        if r.custom and r.type == DAEMON_SET and labels.get("app.kubernetes.io/component") == PULL_AHEAD:
            pod = r.inputs["spec"]["template"]["spec"]
            found.setdefault(_pool_of(pod), []).append((r, pod["initContainers"][0]["image"]))
    return found


def _pool_resource_name(r: Resource) -> str:
    return r.inputs.get("agentPoolName") or (r.inputs.get("metadata") or {}).get("name", r.name)


def _endpoint(render: Render, steps: Mapping[str, Step], workload: Estimate | None) -> float | None:
    """When the first LoadBalancer in front of a GPU workload has its address and a Ready pod behind it."""
    if workload is None:
        return None
    balancers = [r for r in render.resources if r.type == SERVICE and (r.inputs.get("spec") or {}).get("type")
                 == "LoadBalancer"]
    return max(workload.ready, min(steps[b.name].finish for b in balancers)) if balancers else None


def _table(found: FirstGpuPod) -> list[str]:
    """Every phase once: when it starts and how long it takes from `pulumi up` and on a new node, side by side (the
    first workload's chain holds its node's, so each clock's longest chain is the column)."""
    columns = [(title, e) for title, e in (("from `pulumi up`", found.deploy_workload or found.deploy),
                                           ("on a new node", found.new_node_workload or found.new_node)) if e]
    phases: dict[str, dict[str, Phase]] = {}
    order: list[str] = []
    for title, estimate in reversed(columns):  # a new node's chain starts earliest (the autoscaler asks)
        before = -1
        for phase in estimate.phases:
            if phase.what not in order:
                order.insert(before + 1, phase.what)
            before = order.index(phase.what)
            phases.setdefault(phase.what, {})[title] = phase
    rows = []
    for what in order:
        by = phases[what]
        cells = [f"{minutes(by[t].start)} + {minutes(by[t].seconds)}" if t in by else "-" for t, _ in columns]
        sources = list(dict.fromkeys(p.source for p in by.values()))
        why = sources[0] if len(sources) == 1 else "; ".join(f"{t}: {p.source}" for t, p in by.items())
        rows.append((what, *cells, why))
    return table(["phase", *(f"{t}: starts + takes" for t, _ in columns), "why that long"], rows)


def target_minutes(stack: str) -> float:
    """Minutes from `pulumi up` within which ``stack``'s first GPU pod should be Ready."""
    return STACK_TARGETS.get(stack, TARGET_MINUTES)


def target_line(stack: str, ready: float) -> str:
    """What the stack's first GPU pod (Ready ``ready`` seconds in) is held to, and why where it is above that."""
    target = target_minutes(stack)
    met = ready <= target * 60 + 1e-9
    if met or stack not in ABOVE_TARGET:
        return f"- Target: {target:g} min from `pulumi up`; {'met' if met else 'missed'}."
    ceiling, why = ABOVE_TARGET[stack]
    return (f"- Target: {target:g} min from `pulumi up`; above it ({minutes(ready)}, ceiling {ceiling:g} min) "
            f"because {why}.")


def markdown(found: FirstGpuPod, stack: str) -> list[str]:
    """The "First GPU pod" section of ``stack``'s timeline.md."""
    lines = ["## First GPU pod", ""]
    if found.deploy is not None:
        lines.append(f"- **First GPU pod Ready: {minutes(found.deploy.ready)}** after `pulumi up` starts "
                     f"({found.deploy.pod}, pool `{found.deploy.pool}`).")
        lines.append(target_line(stack, found.deploy.ready))
    else:
        lines.append("- **First GPU pod:** `pulumi up` starts none (GPU pods wait for a run, a schedule or a "
                     "request); a run's first pod is Ready the time of a new node below after it starts.")
    if found.deploy_workload is not None:
        lines.append(f"- The scenario's first GPU workload (`{found.deploy_workload.pod}`) Ready: "
                     f"{minutes(found.deploy_workload.ready)}.")
    if found.endpoint is not None:
        lines.append(f"- Its endpoint answering (LoadBalancer address and a Ready pod): {minutes(found.endpoint)}.")
    lines.append(f"- **A new GPU node** (scale from zero, or a spot replacement after an eviction: the same chain, "
                 f"counted from the pending pod): GPU ready in **{minutes(found.new_node.ready)}**"
                 + (f", its first workload Ready in {minutes(found.new_node_workload.ready)}."
                    if found.new_node_workload else "."))
    lines += ["", *_table(found), ""]
    return lines
