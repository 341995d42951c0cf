"""A scenario's workspace: its namespace and a blob volume for every container of the stack's storage."""

from __future__ import annotations

from dataclasses import dataclass, field

from components.kubernetes.workspace import Workspace
from components.volumes.blob_volume import BlobVolume, BlobVolumeArgs
from program.azure_layer import AzureLayer
from program.cluster_software import GpuSoftware
from stackconfig.schema import StackConfig


@dataclass
class ScenarioWorkspace:
    workspace: Workspace
    volumes: dict[str, BlobVolume] = field(default_factory=dict)
    """Blob volumes by claim name (the container name)."""


def build_workspace(cfg: StackConfig, layer: AzureLayer, software: GpuSoftware, namespace: str,
                    read_only_roles: tuple[str, ...]) -> ScenarioWorkspace:
    """The namespace and a blob volume per container; containers of ``read_only_roles`` mount read-only."""
    opts = layer.kubernetes_opts
    ws = ScenarioWorkspace(Workspace("workspace", namespace, opts=opts))
    driver = [software.blob_csi.release] if software.blob_csi else []
    for account in cfg.storage.accounts:
        for container in account.containers:
            ws.volumes[container] = BlobVolume(f"volume-{container}", BlobVolumeArgs(
                account_name=cfg.storage_account_name(account),
                container=container,
                resource_group_name=layer.network.resource_group_name,
                namespace=ws.workspace.namespace,
                claim_name=container,
                read_only=account.role in read_only_roles,
                auth=cfg.storage.auth,
                identity_client_id=layer.cluster.kubelet_client_id,
                sas_expiry_days=cfg.storage.sas_expiry_days,
                wait_for=driver + [layer.storage[account.role]],
            ), opts=opts)
    return ws
