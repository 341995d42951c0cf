"""In-cluster software every GPU scenario shares: NFD, the GPU operator, the Blob CSI driver, the smoke test, GPU
metrics scraping and KEDA's access to them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from components.autoscaling.keda import KedaWorkloadIdentity, KedaWorkloadIdentityArgs, MetricsAccess
from components.gpu.gate import GATE_TOLERATION, GpuNodeGate, GpuNodeGateArgs
from components.gpu.network_operator import NetworkOperator, NetworkOperatorArgs
from components.gpu.nfd import NodeFeatureDiscovery, NodeFeatureDiscoveryArgs
from components.gpu.node_repair import GpuNodeRepair, GpuNodeRepairArgs
from components.gpu.nvidia_smi import GpuSmokeTest, GpuSmokeTestArgs
from components.gpu.operator import GpuOperator, GpuOperatorArgs
from components.images.built import GPU_TOOLS_IMAGE, ContainerImage
from components.kubernetes.scheduling import merged_tolerations
from components.monitoring.gpu_scraping import GpuMetricsScraping, GpuMetricsScrapingArgs
from components.vocabulary import SharingMode
from components.volumes.blob_csi import BlobCsiDriver, BlobCsiDriverArgs
from program.config.schema import StackConfig
from program.layers.azure import AzureLayer


@dataclass
class GpuSoftware:
    nfd: NodeFeatureDiscovery | None
    operator: GpuOperator | None
    blob_csi: BlobCsiDriver | None
    smoke_test: GpuSmokeTest | None
    scraping: GpuMetricsScraping | None = None
    metrics_access: MetricsAccess | None = None
    """How a ScaledObject reads GPU utilisation (KEDA on, monitoring on)."""
    network_operator: NetworkOperator | None = None
    """InfiniBand driver and RDMA device plugin (addons.networkOperator)."""
    node_repair: GpuNodeRepair | None = None
    """Cordons and drains sick GPU nodes (addons.gpuNodeRepair)."""
    node_gate: GpuNodeGate | None = None
    """Holds each new GPU node until its GPUs pass a check (addons.gpuNodeGate)."""


def build_gpu_software(cfg: StackConfig, layer: AzureLayer, images: Mapping[str, ContainerImage],
                       add_on_device_plugin: bool = False) -> GpuSoftware:
    """``images``: the stack's, the GPU tools image among them where an MPS pool's smoke test runs it.
    ``add_on_device_plugin``: an AKS add-on (KAITO) runs NVIDIA's device plugin, so the operator's stays off."""
    opts = layer.kubernetes_opts
    pools = list(layer.gpu_pools.values())
    # The GPU software runs on a node the GPU node gate still holds: its check needs the driver and device plugin.
    tolerations = merged_tolerations(*(p.tolerations for p in pools), [GATE_TOLERATION])
    addons = cfg.addons
    nfd = None
    if addons.nfd:
        nfd = NodeFeatureDiscovery("nfd", NodeFeatureDiscoveryArgs(gpu_tolerations=tolerations), opts=opts)
    operator = None
    if addons.gpu_operator and pools:
        operator = GpuOperator("gpu-operator", GpuOperatorArgs(
            pools=[p.gpu for p in pools], gpu_tolerations=tolerations, bundled_nfd=not addons.nfd,
            pool_resources=pools, device_plugin=not add_on_device_plugin), opts=opts)
    network = None
    if addons.network_operator and nfd is not None:
        network = NetworkOperator("network-operator", NetworkOperatorArgs(tolerations, nfd.release), opts=opts)
    blob_csi = BlobCsiDriver("blob-csi", BlobCsiDriverArgs(), opts=opts) if addons.blob_csi else None
    smoke = None
    # An MPS pool is always checked: whether a non-root CUDA client reaches its server is what the pool is for.
    checked = pools if addons.smoke_test else [p for p in pools if p.gpu.sharing == SharingMode.MPS]
    if checked and operator is not None:
        tools = images.get(GPU_TOOLS_IMAGE[0])
        # Not after the operator's release: the pending Job already makes the autoscaler add a node (it reads the
        # size's GPUs from the scale set), so the node boots while the operator installs (First GPU pod estimate).
        smoke = GpuSmokeTest("gpu-smoke-test", GpuSmokeTestArgs(
            pools=checked, cuda_client_image=tools.image_ref if tools else None), opts=opts)
    scraping = access = None
    if layer.metrics is not None and operator is not None:
        scraping = GpuMetricsScraping("gpu-metrics", GpuMetricsScrapingArgs(operator.namespace, operator.release),
                                      opts=opts)
    if layer.metrics is not None and layer.keda_identity is not None:
        keda = KedaWorkloadIdentity("keda", KedaWorkloadIdentityArgs(layer.keda_identity.client_id), opts=opts)
        access = MetricsAccess(layer.metrics.query_endpoint, layer.keda_identity.client_id, keda.restart)
    repair = None
    if addons.gpu_node_repair and pools:
        repair = GpuNodeRepair("gpu-node-repair", GpuNodeRepairArgs(
            pools, operator.namespace if operator is not None else "gpu-operator"), opts=opts)
    gate = None
    if addons.gpu_node_gate and operator is not None:
        gate = GpuNodeGate("gpu-node-gate", GpuNodeGateArgs(pools, images[GPU_TOOLS_IMAGE[0]].image_ref,
                                                            operator.namespace), opts=opts)
    return GpuSoftware(nfd, operator, blob_csi, smoke, scraping, access, network, repair, gate)
