"""AKS user node pools, each its own ``AgentPool`` resource: GPU pools (spot by default) and CPU pools.

A GPU pool's ``driver`` says who installs its GPU driver: AKS (``install``, the node image's driver) or the NVIDIA
GPU operator (``precompiled`` or ``none``: ``gpuProfile.driver = None``, the supported successor of the retired
``SkipGPUDriverInstall`` tag); the operator never installs one where AKS did. Workloads take their tolerations and
node selector from the pool, never spelt out again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_azure_native import containerservice as cs

from components.kubernetes.scheduling import toleration
from components.vocabulary import GPU_NODE_OS, GpuNodes, driver_label

MAX_PODS = 110
"""Pods per node: Kubernetes' tested per-node limit (AKS's CNI overlay default is 250). GPU nodes run a few
large pods beside the operator's DaemonSets; checkov CKV_AZURE_168 asks for at least 50."""
GPU_TAINT = "sku=gpu:NoSchedule"
"""Keeps non-GPU pods off GPU nodes (AKS GPU docs)."""
SPOT_TAINT = "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"
"""AKS adds this to every spot node; declaring it keeps Pulumi's diff empty (pulumi-azure-native#959)."""
POOL_LABEL = "kubernetes.azure.com/agentpool"
"""Label AKS sets on every node with its pool name."""
FIXED_AT_CREATION = ("vmSize", "gpuProfile", "scaleSetPriority", "spotMaxPrice", "gpuInstanceProfile")
"""Pool inputs a change to which replaces the pool rather than updating it. AKS refuses to change the others on an
existing pool (spot-node-pool: priority and max price; use-nvidia-gpu: VM size; gpu-multi-instance: the MIG
profile). The driver it would change in place, but only for nodes made afterwards (nvidia-gpu-operator: "This
setting doesn't change any existing nodes. You can scale the node pool to zero and then back up"): a pool with
nodes on both drivers would run the GPU operator's driver beside AKS's, so a replacement makes the change whole."""


UPGRADE_SURGE = "1"
"""Extra nodes an upgrade creates before draining (aks upgrade-aks-node-pools: maxSurge); for these small pools the
default 10 % also rounds to one node, stated here so a reader need not know it."""
DRAIN_TIMEOUT_MINUTES = 30
"""How long AKS waits for a node's pods to leave before it fails the upgrade (its default)."""
SPOT_UPGRADE = ("an upgrade of a spot pool cordons each node and sends its pods an eviction notice, with no drain "
                "and no surge node (learn.microsoft.com/azure/aks/spot-node-pool: Upgrade a Spot node pool)")


@dataclass(frozen=True)
class PoolNodes:
    """An agent pool's nodes: their size, how many, how they are bought and where they go."""

    name: str
    """Agent pool name (``^[a-z][a-z0-9]{0,11}$``), also the ``kubernetes.azure.com/agentpool`` node label."""
    vm_size: str
    """Azure VM size."""
    min_count: int
    """Autoscaler minimum."""
    max_count: int
    """Autoscaler maximum."""
    count: int
    """Initial node count; the autoscaler owns it afterwards."""
    spot: bool = False
    """Spot priority (evicted when Azure needs the capacity), else regular."""
    spot_max_price: float = -1.0
    """Spot price cap in USD per hour; -1: up to the on-demand price."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Node labels."""
    os_disk_size_gb: int = 128
    """OS disk size."""
    zones: tuple[str, ...] = ()
    """Availability zones; empty: wherever Azure has capacity."""
    capacity_reservation_group_id: str | None = None
    """A capacity reservation group whose reserved VMs the pool takes (regular pools only)."""
    autoscale: bool = True
    """The cluster autoscaler sizes the pool; off: ``count`` nodes always (a cluster with node auto-provisioning)."""


def pool_taints(pool: PoolNodes, gpu: bool) -> tuple[str, ...]:
    """Taints AKS puts on a pool's nodes: the GPU taint on GPU pools, the spot taint on spot pools."""
    return ((GPU_TAINT,) if gpu else ()) + ((SPOT_TAINT,) if pool.spot else ())


def upgrade_settings(pool: PoolNodes) -> cs.AgentPoolUpgradeSettingsArgs | None:
    """A regular pool's upgrade adds a node before it drains one, so an evicted GPU pod has somewhere to go, and
    gives the drain 30 minutes, enough for pods that stop gracefully, before it fails. A spot pool gets none: AKS
    applies neither to spot pools (SPOT_UPGRADE), so a setting there would only promise what does not happen."""
    if pool.spot:
        return None
    return cs.AgentPoolUpgradeSettingsArgs(max_surge=UPGRADE_SURGE, drain_timeout_in_minutes=DRAIN_TIMEOUT_MINUTES)


def agent_pool_settings(pool: PoolNodes, subnet_id: pulumi.Input[str], tags: Mapping[str, str],
                        taints: tuple[str, ...] = (), labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Properties shared by the inline system pool and every ``AgentPool``."""
    spot = {
        "scale_set_priority": cs.ScaleSetPriority.SPOT,
        "scale_set_eviction_policy": cs.ScaleSetEvictionPolicy.DELETE,
        "spot_max_price": pool.spot_max_price,
    } if pool.spot else {"scale_set_priority": cs.ScaleSetPriority.REGULAR}
    return dict(
        vm_size=pool.vm_size,
        os_type=cs.OSType.LINUX,
        os_sku=cs.OSSKU.UBUNTU,
        type=cs.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
        os_disk_size_gb=pool.os_disk_size_gb,
        enable_auto_scaling=pool.autoscale,
        # AKS takes a minimum and maximum only from a pool the autoscaler sizes.
        min_count=pool.min_count if pool.autoscale else None,
        max_count=pool.max_count if pool.autoscale else None,
        count=pool.count,
        max_pods=MAX_PODS,
        enable_node_public_ip=False,
        vnet_subnet_id=subnet_id,
        availability_zones=list(pool.zones) or None,
        node_taints=list(taints) or None,
        node_labels=dict(labels or {}) or None,
        tags=dict(tags),
        **spot,
        **({"capacity_reservation_group_id": pool.capacity_reservation_group_id}
           if pool.capacity_reservation_group_id else {}),
    )


@dataclass(frozen=True)
class NodePoolArgs:
    nodes: PoolNodes
    """The pool's nodes."""
    cluster_name: pulumi.Input[str]
    """Name of the AKS cluster."""
    resource_group_name: pulumi.Input[str]
    """Resource group of the cluster."""
    subnet_id: pulumi.Input[str]
    """Node subnet."""
    tags: Mapping[str, str]
    """Tags on the pool's VM scale set."""
    gpu: GpuNodes | None = None
    """What its GPUs offer and who installs their driver; ``None`` for a CPU pool."""
    extra_labels: Mapping[str, str] | None = None
    """Labels other components need on the nodes (e.g. the device-plugin config selector)."""
    after: pulumi.Resource | None = None
    """The pool created before this one: AKS refuses a pool operation while another runs on the cluster
    (OperationNotAllowed) and two pools racing for one VNet fail (SetVNetOwnershipFailed, Azure/AKS#4522)."""


class _NodePool(pulumi.ComponentResource):
    """One user ``AgentPool`` and what pods need to land on it (its taints' tolerations, its node selector)."""

    pool_name: str
    """Agent pool name (also the value of the ``kubernetes.azure.com/agentpool`` node label)."""
    nodes: PoolNodes
    """Its nodes: size and bounds (what a queue's quota counts)."""
    taints: tuple[str, ...]
    tolerations: list[dict[str, str]]
    """What every pod on this pool must tolerate."""
    node_selector: dict[str, str]
    """What pins a pod to this pool."""
    agent_pool: cs.AgentPool

    def __init__(self, token: str, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(token, name, None, opts)
        pool, gpu = args.nodes, args.gpu
        self.pool_name, self.nodes = pool.name, pool
        self.taints = pool_taints(pool, gpu=gpu is not None)
        self.tolerations = [toleration(t) for t in self.taints]
        self.node_selector = {POOL_LABEL: pool.name}
        labels = {**pool.labels, **({"accelerator": "nvidia"} if gpu else {}), **(args.extra_labels or {})}
        extra: dict[str, Any] = {}
        if gpu is not None:
            extra = {"gpu_profile": cs.GPUProfileArgs(
                         driver=cs.GPUDriver.NONE if gpu.driver.operator_owned else cs.GPUDriver.INSTALL),
                     "gpu_instance_profile": gpu.mig_profile}
            # Every GPU node runs the OS NVIDIA's precompiled drivers are built for (GPU_NODE_OS says why).
            extra["os_sku"] = GPU_NODE_OS
            labels.update(driver_label(gpu.driver))
        self.agent_pool = cs.AgentPool(
            f"{name}-pool",
            # Explicit: an auto-name would carry the logical name's hyphens, which AKS refuses in pool names.
            agent_pool_name=pool.name,
            resource_name_=args.cluster_name,
            resource_group_name=args.resource_group_name,
            mode=cs.AgentPoolMode.USER,
            **{**agent_pool_settings(pool, args.subnet_id, args.tags, self.taints, labels), **extra},
            upgrade_settings=upgrade_settings(pool),
            # The autoscaler owns `count`; the explicit pool name means a replacement must delete first.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["count"], delete_before_replace=True,
                                        replace_on_changes=list(FIXED_AT_CREATION),
                                        depends_on=[args.after] if args.after else []),
        )
        self.register_outputs({"pool_name": self.pool_name, "agent_pool_id": self.agent_pool.id})


class GpuNodePool(_NodePool):
    """A GPU pool: the GPU taint besides the spot one, the driver owner, MIG partitioning."""

    gpu: GpuNodes
    """What its nodes' GPUs offer (size, sharing): workloads and the GPU software read it here."""

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        if args.gpu is None:
            raise ValueError(f"GPU pool {name}: args.gpu is required")
        self.gpu = args.gpu
        super().__init__("aksgpu:aks:GpuNodePool", name, args, opts)  # frozen: components/__init__.py


class CpuNodePool(_NodePool):
    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:aks:CpuNodePool", name, args, opts)  # frozen: components/__init__.py
