"""A GPU pool made by AKS node auto-provisioning (NAP, Karpenter) instead of an agent pool.

Two cluster-scoped objects of the Karpenter version AKS runs (the CRDs of Azure/karpenter-provider-azure v1.12.2,
the first to let the GPU operator own the driver, Azure/AKS#5362): an ``AKSNodeClass`` (image, OS disk, subnet,
who installs the GPU driver) and a ``NodePool`` (the sizes, spot then on-demand, at most ``maxCount`` nodes, the
GPU taint and labels the GPU software selects). NAP creates a node when a GPU pod is pending and removes it once
empty. Workloads select the pool by its ``karpenter.sh/nodepool`` label, which every node it makes carries.

Karpenter disrupts nodes for three reasons: Empty, Underutilized and Drifted. NAP marks every node drifted when it
picks up a new node image (in the node OS maintenance window, or at once when the image is over 90 days old) and
replaces drifted nodes honouring only node disruption budgets and PodDisruptionBudgets (learn.microsoft.com/azure/
aks/node-auto-provisioning-upgrade-image); a training Job has no PodDisruptionBudget. So the pool's budget lets no
node go for drift: a drifted node keeps running its pods, goes once empty, and NAP makes its successor from the new
image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import apiextensions

from components.azure.node_pools import GPU_TAINT, MAX_PODS, GpuNodePool, PoolNodes
from components.kubernetes.scheduling import taint_fields, toleration
from components.vocabulary import GPU_NODE_OS, GpuNodes, driver_label

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.azure.com/v1beta1"
NODEPOOL_CRD = "nodepools.karpenter.sh"
NODECLASS_CRD = "aksnodeclasses.karpenter.azure.com"
KARPENTER_VERSION = "1.12.2"
"""The karpenter-provider-azure release whose CRDs the objects are checked against (tests/fixtures/crds)."""
NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""The label Karpenter puts on each node with its NodePool's name."""
EMPTY_NODE_MINUTES = 10
"""How long an empty GPU node stays before NAP removes it: the cluster autoscaler's scale-down time here."""
NO_DRIFT_DISRUPTION = {"nodes": "0", "reasons": ["Drifted"]}
"""No node goes for drift while it has pods (karpenter-provider-azure v1.12.2 pkg/apis/crds/karpenter.sh_nodepools.yaml:
a budget's ``reasons`` are Underutilized, Empty, Drifted; with budgets left undefined one ``nodes: 10%`` budget
applies to every reason, drift included)."""


@dataclass(frozen=True)
class NapPoolArgs:
    nodes: PoolNodes
    """Name, the first size, maximum nodes, spot, labels, OS disk and zones of the pool."""
    vm_sizes: tuple[str, ...]
    """Every size NAP may make, the preferred first (same GPU model and count)."""
    gpu: GpuNodes
    """What its GPUs offer and who installs their driver."""
    location: str
    """The cluster's region (a zone requirement is ``<region>-<zone>``)."""
    subnet_id: pulumi.Input[str]
    """Node subnet: NAP nodes join the cluster's VNet like its agent pools."""
    tags: Mapping[str, str]
    """Tags on the VMs NAP makes."""
    extra_labels: Mapping[str, str] | None = None
    """Labels other components need on the nodes (the device-plugin config selector)."""
    startup_taints: tuple[Mapping[str, str], ...] = ()
    """Taints a node is born with that something in the cluster removes (the GPU node gate's), which NAP does not
    hold against the pending pods it creates the node for (karpenter NodePool ``startupTaints``)."""


def node_class_spec(args: NapPoolArgs, subnet_id: Any) -> dict[str, Any]:
    return {
        # Every GPU node runs the OS NVIDIA's precompiled drivers are built for (GPU_NODE_OS says why).
        "imageFamily": GPU_NODE_OS,
        "osDiskSizeGB": args.nodes.os_disk_size_gb,
        "maxPods": MAX_PODS,
        "vnetSubnetID": subnet_id,
        # None: AKS installs no driver and the GPU operator does, as on the agent pools with gpuProfile.driver None.
        "gpu": {"mode": "None" if args.gpu.driver.operator_owned else "Driver"},
        "tags": dict(args.tags),
    }


def node_pool_spec(args: NapPoolArgs, labels: Mapping[str, str]) -> dict[str, Any]:
    pool = args.nodes
    requirements = [
        {"key": "karpenter.azure.com/sku-name", "operator": "In", "values": list(args.vm_sizes)},
        # NAP takes spot first when both are allowed (node-auto-provisioning-node-pools: capacity type).
        {"key": "karpenter.sh/capacity-type", "operator": "In",
         "values": ["spot", "on-demand"] if pool.spot else ["on-demand"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    if pool.zones:
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In",
                             "values": [f"{args.location}-{z}" for z in pool.zones]})
    return {
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": pool.name},
                "requirements": requirements,
                "taints": [taint_fields(GPU_TAINT)],
                **({"startupTaints": [dict(t) for t in args.startup_taints]} if args.startup_taints else {}),
                # A GPU node lives until it is empty: no expiry in the middle of a training run.
                "expireAfter": "Never",
            },
        },
        # Only empty nodes go: consolidating a busy GPU node would evict its pods to save little, and a new node
        # image (drift) waits until the node is empty (NO_DRIFT_DISRUPTION).
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{EMPTY_NODE_MINUTES}m",
                       "budgets": [NO_DRIFT_DISRUPTION]},
        "limits": {"nodes": str(pool.max_count)},
    }


class NapGpuPool(pulumi.ComponentResource):
    """What a GPU agent pool offers its workloads (taints to tolerate, a node selector, the GPUs), made by NAP."""

    pool_name: str
    nodes: PoolNodes
    """Its first size and node bounds (what a queue's quota counts)."""
    vm_sizes: tuple[str, ...]
    taints: tuple[str, ...]
    tolerations: list[dict[str, str]]
    node_selector: dict[str, str]
    gpu: GpuNodes
    node_pool: apiextensions.CustomResource
    agent_pool = None
    """No agent pool: nothing to create after it."""

    def __init__(self, name: str, args: NapPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:aks:NapGpuPool", name, None, opts)  # frozen: components/__init__.py
        pool = args.nodes
        self.pool_name, self.nodes, self.vm_sizes, self.gpu = pool.name, pool, args.vm_sizes, args.gpu
        self.taints = (GPU_TAINT,)
        self.tolerations = [toleration(GPU_TAINT)]
        self.node_selector = {NODEPOOL_LABEL: pool.name}
        labels = {**pool.labels, "accelerator": "nvidia", **(args.extra_labels or {}),
                  **driver_label(args.gpu.driver)}
        node_class = apiextensions.CustomResource(
            f"{name}-nodeclass", api_version=NODECLASS_API, kind="AKSNodeClass", metadata={"name": pool.name},
            spec=pulumi.Output.from_input(args.subnet_id).apply(lambda subnet: node_class_spec(args, subnet)),
            opts=pulumi.ResourceOptions(parent=self))
        self.node_pool = apiextensions.CustomResource(
            f"{name}-nodepool", api_version=NODEPOOL_API, kind="NodePool", metadata={"name": pool.name},
            spec=node_pool_spec(args, labels), opts=pulumi.ResourceOptions(parent=self, depends_on=[node_class]))
        self.register_outputs({"pool_name": self.pool_name})


GpuPoolComponent = GpuNodePool | NapGpuPool
"""What workloads and the GPU software place pods on: a GPU agent pool or a NAP pool (the same attributes)."""
