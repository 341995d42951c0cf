"""Node Feature Discovery as its own release (as seed 003), and the rule that marks NVIDIA GPU nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
from pulumi_kubernetes import apiextensions

from components.kubernetes import charts, helm
from components.kubernetes.scheduling import merged_tolerations
from components.kubernetes.security import PRIVILEGED_NAMESPACE_LABELS, namespace

MIG_NOT_READY = {"key": "mig", "operator": "Equal", "value": "notReady", "effect": "NoSchedule"}
"""Set while MIG is being configured; NFD and the operator must still run then."""
NVIDIA_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU_PRESENT_LABEL = "feature.node.kubernetes.io/pci-10de.present"
"""One of the labels the GPU operator takes as 'this node has an NVIDIA GPU'."""


def gpu_node_rule(name: str) -> dict:
    """NodeFeatureRule spec: PCI vendor 10de (NVIDIA) → ``pci-10de.present=true`` (seed 003's nfd-gpu-rule)."""
    return {"rules": [{
        "name": name,
        "labels": {GPU_PRESENT_LABEL: "true"},
        "matchFeatures": [{"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}}}],
    }]}


@dataclass(frozen=True)
class NodeFeatureDiscoveryArgs:
    gpu_tolerations: list[dict[str, str]]
    """Tolerations of the GPU pools' taints: without them nfd-worker never runs on GPU nodes."""
    namespace: str = "node-feature-discovery"
    """Namespace the program creates for NFD."""
    extra_label_namespaces: list[str] = field(default_factory=lambda: ["nvidia.com"])
    """Label namespaces nfd-master may write besides its own."""


class NodeFeatureDiscovery(pulumi.ComponentResource):
    release: pulumi.CustomResource
    rule: pulumi.Resource

    def __init__(self, name: str, args: NodeFeatureDiscoveryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:NodeFeatureDiscovery", name, None, opts)  # frozen: components/__init__.py
        ns = namespace(f"{name}-ns", args.namespace, PRIVILEGED_NAMESPACE_LABELS, self)
        values = {
            "master": {"extraLabelNs": list(args.extra_label_namespaces)},
            "worker": {"tolerations": merged_tolerations(args.gpu_tolerations, [NVIDIA_GPU, MIG_NOT_READY])},
        }
        self.release = helm.release(f"{name}-release", "node-feature-discovery", charts.NFD, ns.metadata["name"],
                                    values, self)
        self.rule = apiextensions.CustomResource(
            f"{name}-gpu-rule",
            api_version="nfd.k8s-sigs.io/v1alpha1",
            kind="NodeFeatureRule",
            metadata={"name": "nvidia-gpu"},  # cluster-scoped: no namespace
            spec=gpu_node_rule("nvidia-gpu"),
            # The NodeFeatureRule CRD comes with the chart; Pulumi cannot see that edge.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        self.register_outputs({"release": self.release.id})
