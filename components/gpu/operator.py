"""The NVIDIA GPU operator: driver (for pools that skip AKS's), toolkit, device plugin with sharing config.

One ClusterPolicy comes from the chart's values; this component never creates or patches a second one
(seed 003's ``kubectl patch clusterpolicy`` becomes ``devicePlugin.config`` here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import core

from components.gpu import sharing as gpu_sharing
from components.gpu.nfd import MIG_NOT_READY, NVIDIA_GPU
from components.kubernetes import charts, helm
from components.kubernetes.scheduling import merged_tolerations
from components.kubernetes.security import PRIVILEGED_NAMESPACE_LABELS, namespace
from components.vocabulary import GpuDriver, GpuNodes, SharingMode

AKS_NVIDIA_RUNTIME = "nvidia-container-runtime"
"""The runtime handler AKS's containerd config defines on GPU nodes it set up (driver: install)."""


PRECOMPILED_BRANCH = "580"
"""The driver branch of the precompiled images: NVIDIA builds them for the latest long-term servicing branch only
(precompiled-drivers: limitations), R580, which runs CUDA 13 images."""
VALIDATOR_WORKLOAD = {"name": "WITH_WORKLOAD", "value": "true"}
"""The operator's plugin validator then runs a CUDA pod through the device plugin on every new GPU node before the
node's GPUs count as ready: the per-node smoke test (a node that fails it never advertises nvidia.com/gpu)."""

DCGM_VIRTUAL_GPUS = "KUBERNETES_VIRTUAL_GPUS"
"""The DCGM exporter's switch for GPUs shared by time-slicing or MPS (off by default; the operator never sets it)."""


def operator_values(pools: Sequence[GpuNodes], gpu_tolerations: list[dict[str, str]], bundled_nfd: bool,
                    sharing_config_name: pulumi.Input[str] | None, rdma: bool = False) -> dict[str, Any]:
    """Chart values; the driver is the operator's exactly when some pool skips the AKS driver (precompiled when
    those pools say so; config allows one kind per cluster). ``rdma``: GPUDirect
    RDMA, the driver's nvidia-peermem module over the Network Operator's OFED driver (Azure/aks-rdma-infiniband
    configs/values/gpu-operator: driver.rdma.enabled; useHostMofed stays false, the OFED driver is a container)."""
    tolerations = merged_tolerations([NVIDIA_GPU], gpu_tolerations, [MIG_NOT_READY])
    owns_driver = any(p.driver.operator_owned for p in pools)
    driver: dict[str, Any] = {"enabled": owns_driver}
    if any(p.driver == GpuDriver.PRECOMPILED for p in pools):
        # With usePrecompiled the version is a branch: the operator picks <branch>-<kernel>-ubuntu22.04 per node.
        driver |= {"usePrecompiled": True, "version": PRECOMPILED_BRANCH}
    if rdma:
        driver["rdma"] = {"enabled": True, "useHostMofed": False}
    values: dict[str, Any] = {
        # Parallel NFD deployments are unsupported: bundle it only when no separate release exists.
        "nfd": {"enabled": bundled_nfd},
        # This list replaces the chart default, so it keeps the nvidia.com/gpu entry and adds the pool taints.
        "daemonsets": {"tolerations": tolerations},
        "driver": driver,
        "toolkit": {"enabled": owns_driver},
        "validator": {"plugin": {"env": [VALIDATOR_WORKLOAD]}},
    }
    if bundled_nfd:
        values["node-feature-discovery"] = {"worker": {"tolerations": tolerations}}
    if sharing_config_name is not None:
        # No default: only nodes labelled nvidia.com/device-plugin.config=<key> share their GPUs.
        values["devicePlugin"] = {"config": {"name": sharing_config_name, "default": ""}}
    if any(p.sharing.has_replicas for p in pools):
        # A shared GPU's series would carry only one of the pods using it (the exporter's pod map keeps one entry
        # per GPU, dcgm-exporter internal/pkg/transformation/kubernetes.go:886-909): with this the exporter writes
        # the GPU's series once per pod, so each pod's KEDA query sees the load (pkg/cmd/app.go:299-304).
        values["dcgmExporter"] = {"env": [{"name": DCGM_VIRTUAL_GPUS, "value": "true"}]}
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


@dataclass(frozen=True)
class GpuOperatorArgs:
    pools: Sequence[GpuNodes]
    """Every GPU pool of the cluster (driver owner, sharing)."""
    gpu_tolerations: list[dict[str, str]]
    """Tolerations of the GPU pools' taints, for every operator DaemonSet."""
    bundled_nfd: bool = False
    """True when no separate NFD release exists."""
    namespace: str = "gpu-operator"
    """Namespace the program creates for the operator."""
    rdma: bool = False
    """GPUDirect RDMA for InfiniBand pools (the Network Operator runs beside it)."""


class GpuOperator(pulumi.ComponentResource):
    release: pulumi.Resource
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

        values = operator_values(args.pools, args.gpu_tolerations, args.bundled_nfd, config_name, args.rdma)
        # GPU nodes are slow to join: the operator pods wait for NFD labels and the driver build.
        # The chart upgrades the ClusterPolicy CRD in a pre-upgrade Job (operator.upgradeCRD); NVIDIA asks for
        # --disable-openapi-validation so a chart bump is not refused before that Job runs.
        self.release = helm.release(f"{name}-release", "gpu-operator", charts.GPU_OPERATOR, ns.metadata["name"],
                                    values, self, timeout_seconds=900, upgrades_own_crds=True)
        self.namespace = ns.metadata["name"]
        self.register_outputs({"release": self.release.id})
