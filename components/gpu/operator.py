"""The NVIDIA GPU operator: driver (for pools that skip AKS's), toolkit, device plugin with sharing config.

One ClusterPolicy comes from the chart's values; this component never creates or patches a second one
(seed 003's ``kubectl patch clusterpolicy`` becomes ``devicePlugin.config`` here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import apiextensions, core

from components.gpu import sharing as gpu_sharing
from components.gpu.nfd import MIG_NOT_READY, NVIDIA_GPU
from components.kubernetes import charts, helm
from components.kubernetes.scheduling import merged_tolerations
from components.kubernetes.security import PRIVILEGED_NAMESPACE_LABELS, namespace
from components.vocabulary import COMPILED, DRIVER_LABEL, PRECOMPILED_LABEL, GpuNodes, SharingMode

AKS_NVIDIA_RUNTIME = "nvidia-container-runtime"
"""The runtime handler AKS's containerd config defines on GPU nodes it set up (driver: install)."""


DRIVER_BRANCH = "595"
"""The precompiled images' driver branch: NVIDIA builds R580 and R595 for Ubuntu 24.04's Azure kernel
(NVIDIA/gpu-driver-container .github/precompiled-matrix-config.json; GPU operator v26.7 platform-support), and
R595 is the branch of the driver the chart compiles (driver.version), so a node that falls back to compiling runs
the same branch. CUDA 13 images need R580 or later."""
COMPILED_DRIVER_VERSION = "595.91.07"
"""The driver the operator compiles on a node: the chart's own ``driver.version`` at v26.7.0."""
NVIDIA_DRIVER_API = "nvidia.com/v1alpha1"
PRECOMPILED_DRIVER, COMPILED_DRIVER = "precompiled", "compiled"
"""The two NVIDIADriver resources, for the nodes labelled ``aksgpu.io/driver=precompiled`` and ``=compiled``."""

DCGM_VIRTUAL_GPUS = "KUBERNETES_VIRTUAL_GPUS"
"""The DCGM exporter's switch for GPUs shared by time-slicing or MPS (off by default; the operator never sets it)."""


def daemonset_tolerations(gpu_tolerations: list[dict[str, str]]) -> list[dict[str, str]]:
    """What every operator DaemonSet tolerates: the chart's nvidia.com/gpu entry, every GPU pool's taints (and the
    GPU node gate's, which the GPU software layer adds), MIG's not-ready taint."""
    return merged_tolerations([NVIDIA_GPU], gpu_tolerations, [MIG_NOT_READY])


def operator_values(pools: Sequence[GpuNodes], gpu_tolerations: list[dict[str, str]], bundled_nfd: bool,
                    sharing_config_name: pulumi.Input[str] | None, device_plugin: bool = True) -> dict[str, Any]:
    """Chart values; the driver is the operator's exactly when some pool skips the AKS driver. Which driver a node
    gets (precompiled or compiled) is the two NVIDIADriver resources' business (``driver_specs``): the chart's
    ClusterPolicy sets one kind for every node and takes the OS of one of them for every image."""
    tolerations = daemonset_tolerations(gpu_tolerations)
    owns_driver = any(p.driver.operator_owned for p in pools)
    driver: dict[str, Any] = {"enabled": owns_driver}
    if owns_driver:
        driver["nvidiaDriverCRD"] = {"enabled": True, "deployDefaultCR": False}
    values: dict[str, Any] = {
        # Parallel NFD deployments are unsupported: bundle it only when no separate release exists.
        "nfd": {"enabled": bundled_nfd},
        # This list replaces the chart default, so it keeps the nvidia.com/gpu entry and adds the pool taints.
        "daemonsets": {"tolerations": tolerations},
        "driver": driver,
        "toolkit": {"enabled": owns_driver},
    }
    if not device_plugin:
        values["devicePlugin"] = {"enabled": False}
    if bundled_nfd:
        values["node-feature-discovery"] = {"worker": {"tolerations": tolerations}}
    if sharing_config_name is not None:
        # No default: only nodes labelled nvidia.com/device-plugin.config=<key> share their GPUs.
        values["devicePlugin"] = {"config": {"name": sharing_config_name, "default": ""}}
    if any(p.sharing.has_replicas for p in pools):
        # A shared GPU's series would carry only one of the pods using it (the exporter's pod map keeps one entry
        # per GPU, dcgm-exporter internal/pkg/transformation/kubernetes.go:886-909): with this the exporter writes
        # the GPU's series once per pod, so each pod's KEDA query sees the load (pkg/cmd/app.go:299-304).
        # It attributes a shared GPU's utilisation and memory to the pods by their processes, mapping each PID
        # through /proc/<pid>/cgroup: it must see the host's PIDs, or every pod reads 0 (k8s audit #2;
        # dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go, pidmapper.go; the chart's
        # dcgmExporter.hostPID is false by default).
        # It then matches each process's pod UID (from its cgroup) against the pods the kubelet lists, whose UIDs
        # it reads from the API server (dcgm-exporter internal/pkg/transformation/kubernetes.go); the operator mounts
        # the exporter's token and grants it pods get/list/watch only with pod-UID enrichment on (GPU operator
        # v26.7.0 controllers/object_controls.go). On MPS, whether NVML credits the clients or the MPS server is
        # untested here.
        values["dcgmExporter"] = {"env": [{"name": DCGM_VIRTUAL_GPUS, "value": "true"}], "hostPID": True,
                                  "enablePodUID": True}
    if any(p.sharing == SharingMode.MIG for p in pools):
        values["mig"] = {"strategy": "single"}
        # AKS partitions MIG pools from gpuInstanceProfile; the operator's MIG manager (default config
        # "all-disabled") must never repartition them.
        values["migManager"] = {"enabled": False}
    if any(not p.driver.operator_owned for p in pools):
        # On nodes where AKS installed the driver, containerd's NVIDIA runtime is named nvidia-container-runtime;
        # the operator's pods would otherwise ask for a runtime class `nvidia` that those nodes lack (NVIDIA's AKS
        # guide). The toolkit takes the same name on the nodes it configures, so both kinds agree.
        values["operator"] = {"runtimeClass": AKS_NVIDIA_RUNTIME}
    return values


def driver_specs(tolerations: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """The NVIDIADriver resources (GPU operator v26.7.0 api/nvidia/v1alpha1/nvidiadriver_types.go), neither of them
    the default, each selecting its value of ``aksgpu.io/driver``: NVIDIA's precompiled driver for the nodes of
    ``precompiled`` pools, the compiled one for a ``none`` pool's and for a node whose kernel NVIDIA has not built the
    precompiled image for yet, which the GPU node gate relabels (``node_gate_job.py``; the operator itself never falls
    back: controllers/object_controls.go builds the tag from the node's kernel and pulls it). The operator moves a node
    to another driver only when a label its current driver selects on changes (controllers/nodelabeling_controller.go
    SetupWithManager): a default driver selects nothing, so a relabelled node would stay on it.

    No ``rdma``: GPUDirect RDMA on InfiniBand pools registers GPU memory through the kernel's DMA-BUF, which NVIDIA
    recommends over the legacy nvidia-peermem module and which needs neither that module nor the OFED driver at
    build time (docs.nvidia.com gpu-operator gpu-operator-rdma: "NVIDIA recommends using DMA-BUF when it is
    supported"; it needs the open kernel modules, which ``kernelModuleType: auto`` picks for every GPU here, Turing
    and later on R595, and a kernel of 5.12 or later: AKS's Ubuntu 24.04 runs 6.8). NCCL uses it by itself."""
    common: dict[str, Any] = {"driverType": "gpu", "repository": "nvcr.io/nvidia", "image": "driver",
                              "tolerations": tolerations, "default": False}
    return {
        PRECOMPILED_DRIVER: {**common, "usePrecompiled": True, "version": DRIVER_BRANCH,
                             "nodeSelector": {DRIVER_LABEL: PRECOMPILED_LABEL}},
        COMPILED_DRIVER: {**common, "usePrecompiled": False, "version": COMPILED_DRIVER_VERSION,
                          "nodeSelector": {DRIVER_LABEL: COMPILED}},
    }


NAMESPACE = "gpu-operator"
"""The operator's namespace: its DCGM exporter runs there."""


@dataclass(frozen=True)
class GpuOperatorArgs:
    pools: Sequence[GpuNodes]
    """Every GPU pool of the cluster (driver owner, sharing)."""
    gpu_tolerations: list[dict[str, str]]
    """Tolerations of the GPU pools' taints, for every operator DaemonSet."""
    bundled_nfd: bool = False
    """True when no separate NFD release exists."""
    namespace: str = NAMESPACE
    """Namespace the program creates for the operator."""
    pool_resources: Sequence[pulumi.Resource] = ()
    """The GPU pools (agent pools, NAP NodePools) whose nodes carry the driver label the NVIDIADrivers select on:
    the drivers change after them, so a deployed stack's nodes are relabelled before a driver's selector moves."""
    device_plugin: bool = True
    """False where an add-on runs NVIDIA's device plugin itself (KAITO 0.6's workspace chart renders one on every
    node, kaito-project/kaito#1700): two plugins registering nvidia.com/gpu with one kubelet replace each other."""


class GpuOperator(pulumi.ComponentResource):
    release: pulumi.CustomResource
    drivers: list[pulumi.Resource]
    """The NVIDIADriver resources, where the operator installs some pool's driver."""
    namespace: pulumi.Output[str]
    """The operator's namespace (its DCGM exporter runs there)."""

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:GpuOperator", name, None, opts)  # frozen: components/__init__.py
        if not args.pools:
            raise ValueError("GPU operator: no GPU pools to serve")
        ns = namespace(f"{name}-ns", args.namespace, PRIVILEGED_NAMESPACE_LABELS, self)

        config_name = None
        data = gpu_sharing.configmap_data(args.pools)
        if data:
            config = core.v1.ConfigMap(
                f"{name}-sharing-config",
                metadata={"name": gpu_sharing.configmap_name(data), "namespace": ns.metadata["name"],
                          "labels": {"app.kubernetes.io/part-of": "gpu-operator"}},
                data=data,
                # Content-named and immutable: a change is a new ConfigMap, which restarts the device plugin.
                immutable=True,
                opts=pulumi.ResourceOptions(parent=self),
            )
            config_name = config.metadata["name"]

        values = operator_values(args.pools, args.gpu_tolerations, args.bundled_nfd, config_name, args.device_plugin)
        # GPU nodes are slow to join: the operator pods wait for NFD labels and the driver build.
        # The chart upgrades the ClusterPolicy CRD in a pre-upgrade Job (operator.upgradeCRD); NVIDIA asks for
        # --disable-openapi-validation so a chart bump is not refused before that Job runs.
        self.release = helm.release(f"{name}-release", "gpu-operator", charts.GPU_OPERATOR, ns.metadata["name"],
                                    values, self, timeout_seconds=900, upgrades_own_crds=True)
        self.namespace = ns.metadata["name"]
        self.drivers = [
            apiextensions.CustomResource(
                f"{name}-driver-{kind}", api_version=NVIDIA_DRIVER_API, kind="NVIDIADriver", metadata={"name": kind},
                spec=spec, opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release, *args.pool_resources]))
            for kind, spec in driver_specs(daemonset_tolerations(args.gpu_tolerations)).items()
        ] if any(p.driver.operator_owned for p in args.pools) else []
        self.register_outputs({"release": self.release.id})
