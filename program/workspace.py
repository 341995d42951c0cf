"""A scenario's workspace: its namespace, and for each workload that touches data its identity and blob volumes.

Each such workload gets its own managed identity, federated with its ServiceAccount, with a role on each blob
container it uses (read-only where it only reads), and its own volume per container mounted with that identity's
token. The kubelet identity, which any pod on a node could use, holds no data role. In ``sas`` mode the volumes
mount with a SAS per workload and container instead (read-only SAS where the workload only reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi

from components.identity.workload_identity import WorkloadIdentity, WorkloadIdentityArgs, blob_grant
from components.kubernetes.workspace import Workspace
from components.volumes.blob_volume import BlobVolume, BlobVolumeArgs, WorkloadVolumes
from program.azure_layer import AzureLayer
from program.cluster_software import GpuSoftware
from stackconfig.schema import SecurityException, StackConfig, StorageAuth

DataAccess = Mapping[str, Mapping[str, bool]]
"""Workload (also its ServiceAccount's name) → storage role → write (True) or read only (False)."""


@dataclass
class ScenarioWorkspace:
    workspace: Workspace
    data: dict[str, WorkloadVolumes] = field(default_factory=dict)
    """By workload, as the scenario's ``data_access`` names them."""


def build_workspace(cfg: StackConfig, layer: AzureLayer, software: GpuSoftware, namespace: str,
                    access: DataAccess, exception: SecurityException | None = None) -> ScenarioWorkspace:
    """The namespace, then per workload of ``access`` its identity (identity mode) and a volume per container.
    ``exception``: the namespace's stated departure from restricted Pod Security, if any."""
    opts = layer.kubernetes_opts
    ws = ScenarioWorkspace(Workspace("workspace", namespace, opts=opts, exception=exception))
    driver = [software.blob_csi.release] if software.blob_csi else []
    accounts = {a.role: a for a in cfg.storage.accounts}
    for workload, roles in access.items():
        containers = {(role, c): write for role, write in roles.items() for c in accounts[role].containers}
        identity = None
        if cfg.storage.auth == StorageAuth.IDENTITY:
            identity = WorkloadIdentity(f"identity-{workload}", WorkloadIdentityArgs(
                identity_name=cfg.naming.identity(workload),
                resource_group_name=layer.network.resource_group_name, location=cfg.location,
                oidc_issuer_url=layer.cluster.oidc_issuer_url,
                namespace=ws.workspace.namespace, namespace_name=namespace, service_account=workload,
                grants=[blob_grant(c, layer.storage[role].container_ids[c], write, f"{workload} in {namespace}")
                        for (role, c), write in containers.items()],
                tags=cfg.tags,
            ), opts=opts)
        claims: dict[str, pulumi.Output[str]] = {}
        for (role, container), write in containers.items():
            account = accounts[role]
            volume = BlobVolume(f"volume-{workload}-{container}", BlobVolumeArgs(
                account_name=cfg.storage_account_name(account),
                container=container,
                resource_group_name=layer.network.resource_group_name,
                namespace=ws.workspace.namespace,
                claim_name=f"{container}-{workload}",
                read_only=not write,
                auth=cfg.storage.auth,
                identity_client_id=identity.client_id if identity else None,
                identity_name=cfg.naming.identity(workload) if identity else None,
                sas_expiry_days=cfg.storage.sas_expiry_days,
                wait_for=[*driver, layer.storage[role], *(identity.grants if identity else [])],
            ), opts=opts)
            claims[container] = volume.claim_name
        ws.data[workload] = WorkloadVolumes(identity.service_account if identity else None, claims)
    return ws
