"""A static PersistentVolume + claim for one blob container, mounted with blobfuse2 (``blob.csi.azure.com``).

``identity`` mode mounts with a managed identity's Entra ID token (no key or SAS anywhere); ``sas`` mode, as
seed 003, keeps a container SAS in a Kubernetes Secret — never in Helm values — with a configurable expiry.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Sequence

import pulumi
from pulumi_azure_native import storage
from pulumi_kubernetes import core

ACCESS_MODES = {"input": "ReadOnlyMany", "output": "ReadWriteMany"}
SAS_PERMISSIONS = {"input": "rl", "output": "racwdl"}


def volume_handle(account: str, container: str) -> str:
    """Unique per container in the cluster; the driver reserves ``#`` and ``/``."""
    return f"{account}_{container}"


def sas_expiry(days: int, today: dt.date | None = None) -> str:
    """Midnight UTC ``days`` after today: stable within a day, so ``pulumi preview`` shows no churn hourly."""
    day = (today or dt.datetime.now(dt.timezone.utc).date()) + dt.timedelta(days=days)
    return f"{day.isoformat()}T00:00:00Z"


@dataclass(frozen=True)
class BlobVolumeArgs:
    account_name: str
    """Storage account (physical name)."""
    container: str
    """Blob container."""
    resource_group_name: pulumi.Input[str]
    """Resource group of the account."""
    namespace: pulumi.Input[str]
    """Namespace of the claim (and of the SAS Secret)."""
    claim_name: str
    """Name of the PersistentVolumeClaim workloads mount."""
    direction: str = "input"
    """``input``: ReadOnlyMany, mounted read-only; ``output``: ReadWriteMany."""
    auth: str = "identity"
    """``identity`` or ``sas``."""
    identity_client_id: pulumi.Input[str] | None = None
    """Client id of the managed identity on the nodes (identity mode)."""
    sas_expiry_days: int = 7
    """SAS lifetime (sas mode)."""
    capacity: str = "100Gi"
    """Nominal size; blob containers have no quota, Kubernetes wants a number."""
    wait_for: Sequence[pulumi.Resource] = ()
    """What must exist before the volume can mount and Pulumi cannot see: the CSI driver release (it owns the
    CSIDriver object) and the storage role assignment."""


class BlobVolume(pulumi.ComponentResource):
    claim_name: pulumi.Output[str]

    def __init__(self, name: str, args: BlobVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:storage:BlobVolume", name, None, opts)
        if args.direction not in ACCESS_MODES:
            raise ValueError(f"blob volume {name}: direction must be input or output, not {args.direction!r}")
        if args.auth == "identity" and args.identity_client_id is None:
            raise ValueError(f"blob volume {name}: identity mode needs identity_client_id")
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for))
        attributes: dict[str, pulumi.Input[str]] = {
            "storageAccount": args.account_name,
            "containerName": args.container,
            "resourceGroup": args.resource_group_name,
            "protocol": "fuse2",
        }
        csi: dict = {"driver": "blob.csi.azure.com", "volumeHandle": volume_handle(args.account_name, args.container),
                     "readOnly": args.direction == "input", "volumeAttributes": attributes}
        if args.auth == "identity":
            attributes["AzureStorageAuthType"] = "MSI"
            attributes["AzureStorageIdentityClientID"] = args.identity_client_id
        elif args.auth == "sas":
            sas = storage.list_storage_account_service_sas_output(
                account_name=args.account_name,
                resource_group_name=args.resource_group_name,
                canonicalized_resource=f"/blob/{args.account_name}/{args.container}",
                resource=storage.SignedResource.C,
                permissions=SAS_PERMISSIONS[args.direction],
                protocols=storage.HttpProtocol.HTTPS,
                shared_access_expiry_time=sas_expiry(args.sas_expiry_days),
                opts=pulumi.InvokeOptions(parent=self),
            )
            secret = core.v1.Secret(
                f"{name}-sas",
                metadata={"name": f"{args.claim_name}-sas", "namespace": args.namespace},
                type="Opaque",
                string_data=pulumi.Output.secret(sas.service_sas_token).apply(
                    lambda token: {"azurestorageaccountname": args.account_name,
                                   "azurestorageaccountsastoken": token}),
                opts=child,
            )
            csi["nodeStageSecretRef"] = {"name": secret.metadata["name"], "namespace": secret.metadata["namespace"]}
        else:
            raise ValueError(f"blob volume {name}: auth must be identity or sas, not {args.auth!r}")

        pv_name = f"pv-{volume_handle(args.account_name, args.container)}".replace("_", "-")
        volume = core.v1.PersistentVolume(
            f"{name}-pv",
            metadata={"name": pv_name, "labels": {"aksgpu/volume": args.claim_name}},
            spec={
                "capacity": {"storage": args.capacity},
                "accessModes": [ACCESS_MODES[args.direction]],
                # Deleting the claim never deletes data: the container belongs to BlobStorage.
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",  # static binding only; never the cluster's default class
                "mountOptions": ["-o allow_other", "--file-cache-timeout-in-seconds=120"],
                "claimRef": {"namespace": args.namespace, "name": args.claim_name},
                "csi": csi,
            },
            opts=child,
        )
        claim = core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata={"name": args.claim_name, "namespace": args.namespace},
            spec={
                "accessModes": [ACCESS_MODES[args.direction]],
                "storageClassName": "",
                "volumeName": volume.metadata["name"],
                "resources": {"requests": {"storage": args.capacity}},
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.claim_name = claim.metadata["name"]
        self.register_outputs({"claim_name": self.claim_name})
