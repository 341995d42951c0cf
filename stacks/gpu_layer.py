"""In-cluster software every GPU scenario shares: NFD, the GPU operator, the Blob CSI driver, blob volumes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components.blob_csi import BlobCsiDriver
from components.blob_volume import BlobVolume, BlobVolumeArgs
from components.gpu_operator import GpuOperator, GpuOperatorArgs
from components.gpu_smoke_test import GpuSmokeTest, GpuSmokeTestArgs
from components.nfd import NodeFeatureDiscovery, NodeFeatureDiscoveryArgs
from components.node_pools import merged_tolerations
from components.workspace import Workspace
from stacks.azure_layer import AzureLayer
from stacks.config import StackConfig


@dataclass
class GpuSoftware:
    nfd: NodeFeatureDiscovery | None
    operator: GpuOperator | None
    blob_csi: BlobCsiDriver | None
    smoke_test: GpuSmokeTest | None


@dataclass
class ScenarioWorkspace:
    workspace: Workspace
    volumes: dict[str, BlobVolume] = field(default_factory=dict)
    """Blob volumes by claim name (the container name)."""


def k8s_opts(layer: AzureLayer) -> pulumi.ResourceOptions:
    """Every in-cluster component uses the stack's one Kubernetes provider."""
    return pulumi.ResourceOptions(providers=[layer.kubernetes.provider])


def build_gpu_software(cfg: StackConfig, layer: AzureLayer) -> GpuSoftware:
    opts = k8s_opts(layer)
    pools = list(layer.gpu_pools.values())
    tolerations = merged_tolerations(*(p.tolerations for p in pools))
    addons = cfg.addons
    nfd = None
    if addons.nfd:
        nfd = NodeFeatureDiscovery("nfd", NodeFeatureDiscoveryArgs(gpu_tolerations=tolerations), opts=opts)
    operator = None
    if addons.gpu_operator and pools:
        operator = GpuOperator("gpu-operator", GpuOperatorArgs(
            pools=cfg.gpu_pools, gpu_tolerations=tolerations, bundled_nfd=not addons.nfd), opts=opts)
    blob_csi = BlobCsiDriver("blob-csi", opts=opts) if addons.blob_csi else None
    smoke = None
    if addons.smoke_test and operator is not None:
        smoke = GpuSmokeTest("gpu-smoke-test", GpuSmokeTestArgs(pools=pools, wait_for=[operator.release]),
                             opts=opts)
    return GpuSoftware(nfd, operator, blob_csi, smoke)


def build_workspace(cfg: StackConfig, layer: AzureLayer, software: GpuSoftware, namespace: str,
                    inputs: tuple[str, ...] = ("input",)) -> ScenarioWorkspace:
    """The scenario's namespace and a blob volume per container; roles in ``inputs`` mount read-only."""
    opts = k8s_opts(layer)
    ws = ScenarioWorkspace(Workspace("workspace", namespace, opts=opts))
    driver = [software.blob_csi.release] if software.blob_csi else []
    for account in cfg.storage.accounts:
        for container in account.containers:
            ws.volumes[container] = BlobVolume(f"volume-{container}", BlobVolumeArgs(
                account_name=account.name or cfg.naming.storage_account(account.role),
                container=container,
                resource_group_name=layer.network.resource_group_name,
                namespace=ws.workspace.namespace,
                claim_name=container,
                direction="input" if account.role in inputs else "output",
                auth=cfg.storage.auth,
                identity_client_id=layer.cluster.kubelet_client_id,
                sas_expiry_days=cfg.storage.sas_expiry_days,
                wait_for=driver + [layer.storage[account.role]],
            ), opts=opts)
    return ws
