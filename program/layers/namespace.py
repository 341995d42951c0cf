"""A scenario's namespace, and for each workload that touches data its identity and blob volumes.

Each such workload gets its own managed identity, federated with its ServiceAccount, with a role on each blob
container it uses (read-only where it only reads), and its own volume per container mounted with that identity's
token. The kubelet identity, which any pod on a node could use, holds no data role. In ``sas`` mode the volumes
mount with a SAS per workload and container instead (read-only SAS where the workload only reads).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from components.identity.workload_identity import WorkloadIdentity, WorkloadIdentityArgs, blob_grant
from components.kubernetes.workspace import Workspace, WorkspaceArgs
from components.vocabulary import StorageAuth
from components.volumes.blob_volume import BlobVolume, BlobVolumeArgs, WorkloadVolumes
from program.config.schema import StackConfig
from program.layers.azure import AzureLayer
from program.layers.gpu_software import GpuSoftware
from program.needs import Needs


def build_workspace(layer: AzureLayer, needs: Needs) -> Workspace:
    """The scenario's namespace (``needs.namespace``)."""
    assert needs.namespace is not None, "a workspace needs a namespace"
    return Workspace("workspace", WorkspaceArgs(needs.namespace, needs.namespace_exception),
                     opts=layer.kubernetes_opts)


def build_volumes(cfg: StackConfig, layer: AzureLayer, software: GpuSoftware, needs: Needs, workspace: Workspace,
                  runs_released_by: Sequence[pulumi.Resource] = ()) -> dict[str, WorkloadVolumes]:
    """Per workload of ``needs.data_access`` its identity (identity mode) and a volume per container it uses.

    ``runs_released_by``: what must outlive the runs a claim owns (components/training/jobset.py: a JobSet run is
    owned by its checkpoint claim). The claims come after it and, on ``pulumi destroy``, go before it: Kueue must
    still run to take its finalizer off a run's Workload, which else holds the run, and the claim, for good."""
    opts = layer.kubernetes_opts
    namespace = workspace.name
    volumes: dict[str, WorkloadVolumes] = {}
    driver = [software.blob_csi.release] if software.blob_csi else []
    accounts = {a.role: a for a in cfg.storage.accounts}
    for workload, roles in needs.data_access.items():
        containers = {(role, c): write for role, write in roles.items() for c in accounts[role].container_names}
        identity = None
        if cfg.storage.auth == StorageAuth.IDENTITY:
            identity = WorkloadIdentity(f"identity-{workload}", WorkloadIdentityArgs(
                identity_name=cfg.naming.identity(workload),
                resource_group_name=layer.network.resource_group_name, location=cfg.location,
                oidc_issuer_url=layer.cluster.oidc_issuer_url,
                namespace=workspace.namespace, namespace_name=namespace, service_account=workload,
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
                namespace=workspace.namespace,
                claim_name=f"{container}-{workload}",
                read_only=not write,
                auth=cfg.storage.auth,
                identity_client_id=identity.client_id if identity else None,
                identity_name=cfg.naming.identity(workload) if identity else None,
                sas_expiry_days=cfg.storage.sas_expiry_days,
                wait_for=[*driver, layer.storage[role], *(identity.grants if identity else []), *runs_released_by],
            ), opts=opts)
            claims[container] = volume.claim_name
        volumes[workload] = WorkloadVolumes(identity.service_account if identity else None, claims)
    return volumes
