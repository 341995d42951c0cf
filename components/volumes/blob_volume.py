"""A static PersistentVolume + claim for one blob container, mounted with blobfuse2 (``blob.csi.azure.com``).

``identity`` mode mounts with the workload's own managed identity: the driver exchanges the pod's ServiceAccount
token for an Entra ID token (workload identity) and blobfuse2 mounts with it, so no key or SAS exists anywhere and
only pods running as that ServiceAccount can mount the volume. This is the driver's token-only mode
(``mountWithWorkloadIdentityToken``, Preview since 1.27.0): ``clientID`` alone would make the driver fetch the
account key, which identity-mode accounts refuse. The mount is per pod and the driver remounts with a fresh token
when the kubelet republishes the volume. ``sas`` mode, as seed 003, keeps a container SAS in a Kubernetes Secret —
never in Helm values — with a configurable expiry; only `pulumi up` asks Azure for it, never a preview.

A PersistentVolume's source is immutable, so any change to how it mounts replaces it, and its claim with it. With
fixed names that replacement deletes first, and a claim that running pods hold never goes: ``pulumi up`` hangs.
So the names carry a hash of the mount settings: a change is a new volume and claim, the workloads (which take
the claim name from ``claim_name``) roll onto it, and only then is the old pair deleted.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import storage
from pulumi_kubernetes import core

from components.azure.storage import sas_expiry
from components.vocabulary import StorageAuth

ACCESS_MODES = {True: "ReadOnlyMany", False: "ReadWriteMany"}
"""By ``read_only``."""
SAS_PERMISSIONS = {True: "rl", False: "racwdl"}
"""By ``read_only``: read and list, or also add, create, write and delete."""
PROTOCOL = "fuse2"
"""blobfuse2 through the driver's proxy on the host."""
MOUNT_OPTIONS = ["-o allow_other", "--file-cache-timeout-in-seconds=120"]
"""blobfuse2 options: other UIDs than the mounter may read (pods run non-root), and cached files are
revalidated after two minutes (the driver's own example uses 120)."""


WORKLOAD_IDENTITY_TOKEN = "mountWithWorkloadIdentityToken"  # noqa: S105 (a name, not a secret)
"""Volume attribute: mount with the workload identity's token, never fetching the account key."""


def volume_handle(account: str, container: str, settings: str) -> str:
    """Unique per volume in the cluster (two generations of one container may briefly coexist); the driver
    reserves ``#`` and ``/``."""
    return f"{account}_{container}_{settings}"


def settings_hash(*settings: object) -> str:
    """Eight hex characters that change whenever a mount setting does."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass(frozen=True)
class WorkloadVolumes:
    """What one workload mounts, and as whom: workload components take this from the workspace."""

    service_account: str | None
    """The ServiceAccount its pods must run as, whose identity the volumes mount with; None for SAS volumes."""
    claims: Mapping[str, pulumi.Output[str]]
    """Blob container → the claim to mount."""


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
    """Base name of the PersistentVolumeClaim; the claim is ``<claim_name>-<settings hash>`` (``claim_name``)."""
    read_only: bool = True
    """ReadOnlyMany and mounted read-only (inputs); else ReadWriteMany."""
    auth: StorageAuth = StorageAuth.IDENTITY
    """``identity`` or ``sas``."""
    identity_client_id: pulumi.Input[str] | None = None
    """Client id of the workload's managed identity (identity mode); its pods must run as the federated
    ServiceAccount."""
    identity_name: str | None = None
    """That identity's Azure name: part of the mount settings, so another identity is a new volume generation."""
    sas_expiry_days: int = 7
    """SAS lifetime (sas mode)."""
    capacity: str = "100Gi"
    """Nominal size; blob containers have no quota, Kubernetes wants a number."""
    wait_for: Sequence[pulumi.Resource] = ()
    """What must exist before the volume can mount and Pulumi cannot see: the CSI driver release (it owns the
    CSIDriver object) and the storage role assignment."""


class BlobVolume(pulumi.ComponentResource):
    claim_name: pulumi.Output[str]
    """The claim to mount: workloads take it from here, so a new volume generation reaches them."""

    def __init__(self, name: str, args: BlobVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:storage:BlobVolume", name, None, opts)  # frozen: components/__init__.py
        if args.auth == StorageAuth.IDENTITY and (args.identity_client_id is None or args.identity_name is None):
            raise ValueError(f"blob volume {name}: identity mode needs the workload identity's client id and name")
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for))
        settings = settings_hash(args.account_name, args.container, args.read_only, args.auth, MOUNT_OPTIONS,
                                 PROTOCOL, args.identity_name, WORKLOAD_IDENTITY_TOKEN)
        claim_name = f"{args.claim_name}-{settings}"
        attributes: dict[str, pulumi.Input[str]] = {
            "storageAccount": args.account_name,
            "containerName": args.container,
            "resourceGroup": args.resource_group_name,
            "protocol": PROTOCOL,
        }
        handle = volume_handle(args.account_name, args.container, settings)
        csi: dict = {"driver": "blob.csi.azure.com", "volumeHandle": handle, "readOnly": args.read_only,
                     "volumeAttributes": attributes}
        if args.auth == StorageAuth.IDENTITY:
            # No AzureStorageAuthType: the driver would pass MSI to blobfuse2 beside the workload identity token.
            assert args.identity_client_id is not None  # refused above without one
            attributes["clientID"] = args.identity_client_id
            attributes[WORKLOAD_IDENTITY_TOKEN] = "true"
        else:
            token = self._sas_token(args)
            # `data`, not `stringData`: a new day's token is then an update of the Secret, not a delete and a
            # re-create that leaves a moment without it.
            secret = core.v1.Secret(
                f"{name}-sas",
                metadata={"name": f"{claim_name}-sas", "namespace": args.namespace},
                type="Opaque",
                data=pulumi.Output.secret(token).apply(
                    lambda value: {"azurestorageaccountname": _b64(args.account_name),
                                   "azurestorageaccountsastoken": _b64(str(value))}),
                opts=child,
            )
            csi["nodeStageSecretRef"] = {"name": secret.metadata["name"], "namespace": secret.metadata["namespace"]}

        volume = core.v1.PersistentVolume(
            f"{name}-pv",
            metadata={"name": f"pv-{handle}".replace("_", "-"), "labels": {"aksgpu/volume": args.claim_name}},
            spec={
                "capacity": {"storage": args.capacity},
                "accessModes": [ACCESS_MODES[args.read_only]],
                # Deleting the claim never deletes data: the container belongs to BlobStorage.
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",  # static binding only; never the cluster's default class
                "mountOptions": MOUNT_OPTIONS,
                "claimRef": {"namespace": args.namespace, "name": claim_name},
                "csi": csi,
            },
            opts=child,
        )
        claim = core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata={"name": claim_name, "namespace": args.namespace},
            spec={
                "accessModes": [ACCESS_MODES[args.read_only]],
                "storageClassName": "",
                "volumeName": volume.metadata["name"],
                "resources": {"requests": {"storage": args.capacity}},
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.claim_name = claim.metadata["name"]
        self.register_outputs({"claim_name": self.claim_name})

    def _sas_token(self, args: BlobVolumeArgs) -> pulumi.Output[Any]:
        """The container's SAS; unknown in a preview. Listing a service SAS is a POST action
        (Microsoft.Storage/storageAccounts/listServiceSas/action), which the identity a preview runs as, allowed to
        read only (Reader: ``*/read``), may not perform, and a preview writes no Secret: the token is made by
        `pulumi up`, so a preview shows the Secret's data as computed then."""
        if pulumi.runtime.is_dry_run():
            return pulumi.Output.from_input(pulumi.UNKNOWN)
        return storage.list_storage_account_service_sas_output(
            account_name=args.account_name,
            resource_group_name=args.resource_group_name,
            canonicalized_resource=f"/blob/{args.account_name}/{args.container}",
            resource=storage.SignedResource.C,
            permissions=SAS_PERMISSIONS[args.read_only],
            protocols=storage.HttpProtocol.HTTPS,
            shared_access_expiry_time=sas_expiry(args.sas_expiry_days),
            # The account's name is known before the account exists: without the edge, a stack's first
            # `pulumi up` asks for its SAS before it is created and fails (ResourceNotFound).
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=list(args.wait_for)),
        ).service_sas_token
