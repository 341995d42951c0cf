"""Images pulled ahead: on a GPU pool, a DaemonSet per workload image whose pod pulls it as soon as a new node
joins, while the node's driver and device plugin are still starting.

A GPU pod cannot be scheduled before the device plugin advertises ``nvidia.com/gpu``, and the kubelet pulls its
image only once it is scheduled: without this, a multi-GB image waits behind the GPU's start on every new node
(scale from zero, spot replacement). These pods ask for no GPU, so they land when the node joins; an init container
runs the image's ``true`` (so each image needs one: Debian and Ubuntu bases have it), and the workload pulling the
same image later gets it from the node, or waits for the pull already under way. One DaemonSet per image, because
the kubelet starts a pod's containers one after another: separate pods pull at the same time.

On AKS agent pools the kubelet pulls images in parallel from Kubernetes 1.31 (Azure/AKS#4499), so these pulls do
not hold up the GPU operator's images. NAP nodes still pull one image at a time (karpenter-provider-azure#1260):
a multi-GB pull there would delay the device plugin, so ``Platform.pull_ahead`` skips NAP pools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_kubernetes import apps

from components.azure.node_provisioning import GpuPoolComponent
from components.gpu.gate import GATE_TOLERATION
from components.kubernetes.pods import container, pod_spec
from components.kubernetes.scheduling import merged_tolerations
from components.kubernetes.security import resources, workload_namespace

PAUSE_IMAGE = ("registry.k8s.io/pause:3.10"
               "@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a")
"""What the pod runs once its pulls are done: nothing, in a few hundred kB."""
COMPONENT = "image-pull-ahead"
"""The ``app.kubernetes.io/component`` label of every such DaemonSet (the first-GPU-pod estimate finds them by it)."""
NO_PROBES = {
    # Nothing runs in the pod but pause: there is no health to probe.
    "checkov.io/skip1": "CKV_K8S_8=the pod only pulls images and holds pause",
    "checkov.io/skip2": "CKV_K8S_9=the pod only pulls images and holds pause",
}


@dataclass(frozen=True)
class ImagePullAheadArgs:
    pool: GpuPoolComponent
    """The GPU pool whose new nodes pull the images."""
    images: Mapping[str, pulumi.Input[str]]
    """The images its workloads run, each by a short name that names its DaemonSet (``vllm``: ``pull-vllm``)."""


class ImagePullAhead(pulumi.ComponentResource):
    """The DaemonSets in a namespace of their own named ``name`` (restricted, no traffic: the pods send none)."""

    daemon_sets: dict[str, apps.v1.DaemonSet]
    """By the images' short names."""

    def __init__(self, name: str, args: ImagePullAheadArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:images:ImagePullAhead", name, None, opts)  # frozen: components/__init__.py
        if not args.images:
            raise ValueError(f"{name}: no images to pull ahead")
        namespace = workload_namespace(f"{name}-ns", name, self).metadata["name"]
        hold = container("hold", PAUSE_IMAGE, None, resources("10m", "16Mi"), tmp=False)
        spec = pod_spec(args.pool, [hold], tmp=False)
        # The pulls run while the GPU node gate still holds the node: they are what its workloads will need.
        spec["tolerations"] = merged_tolerations(spec["tolerations"], [GATE_TOLERATION])
        self.daemon_sets = {}
        for short, image in args.images.items():
            labels = {"app.kubernetes.io/name": f"{name}-{short}", "app.kubernetes.io/component": COMPONENT}
            pull = container("pull", image, ["true"], resources("10m", "32Mi"), tmp=False)
            self.daemon_sets[short] = apps.v1.DaemonSet(
                f"{name}-{short}",
                metadata={"name": f"pull-{short}", "namespace": namespace, "labels": labels,
                          # `pulumi up` needs nothing from it: the pulls happen on nodes as they come.
                          "annotations": {"pulumi.com/skipAwait": "true", **NO_PROBES}},
                spec={
                    "selector": {"matchLabels": labels},
                    # A new image digest starts every node's pull at once, as the workloads roll onto it.
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
                    "template": {"metadata": {"labels": labels},
                                 "spec": {**spec, "initContainers": [pull]}},
                },
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"daemon_sets": [d.metadata["name"] for d in self.daemon_sets.values()]})
