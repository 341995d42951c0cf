"""Blob storage accounts with private containers: HTTPS only, TLS 1.2, no anonymous access.

Identity mode turns shared keys off (workloads get container-scoped roles of their own: program/layers/namespace.py);
SAS mode keeps keys on (a SAS is signed with one) but caps SAS lifetimes with a policy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import storage

from components.azure import roles
from components.azure.private_link import PrivateAccess, PrivateLink, private_endpoint
from components.vocabulary import StorageAuth


def sas_expiry(days: int, today: dt.date | None = None) -> str:
    """Midnight UTC ``days`` after today: stable within a day, so ``pulumi preview`` shows no churn hourly."""
    day = (today or dt.datetime.now(dt.UTC).date()) + dt.timedelta(days=days)
    return f"{day.isoformat()}T00:00:00Z"


@dataclass(frozen=True)
class DataGrant:
    """A person's or a pipeline's access to the account's blobs, e.g. for the stack's upload commands."""

    principal_id: pulumi.Input[str]
    """Object id in Entra ID."""
    principal_type: pulumi.Input[str]
    """``User``, ``ServicePrincipal`` or ``Group``: Azure refuses an assignment whose type is wrong."""
    write: bool
    """Storage Blob Data Contributor; else Storage Blob Data Reader."""


@dataclass(frozen=True)
class BlobStorageArgs:
    resource_group_name: pulumi.Input[str]
    """Resource group of the account."""
    location: str
    """Azure region."""
    account_name: str
    """Physical name (3-24 lowercase letters and digits, globally unique)."""
    containers: Sequence[str]
    """Private blob containers to create."""
    tags: Mapping[str, str]
    """Tags for every resource."""
    auth: StorageAuth = StorageAuth.IDENTITY
    """``identity`` (shared keys off) or ``sas``."""
    sas_expiry_days: int = 7
    """Longest SAS lifetime the account's policy allows in ``sas`` mode."""
    deployer: DataGrant | None = None
    """Access for whoever runs ``pulumi up`` (Owner and Contributor grant no blob data access)."""
    protect: bool = False
    """Refuse ``pulumi destroy`` of the account and its containers."""
    private: PrivateAccess | None = None
    """Private mode: public network access off, blob private endpoint in the VNet."""


class BlobStorage(pulumi.ComponentResource):
    account_name: pulumi.Output[str]
    account_id: pulumi.Output[str]
    containers: dict[str, pulumi.Output[str]]
    """Container name → the container's name as an output: what writes a blob must wait for the container."""
    container_ids: dict[str, pulumi.Output[str]]
    """Container name → its resource id: the scope of a workload's data role."""
    private_link: PrivateLink | None
    """Its blob private endpoint; None when public."""

    def __init__(self, name: str, args: BlobStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:storage:BlobStorage", name, None, opts)  # frozen: components/__init__.py
        private = args.private is not None
        keep = pulumi.ResourceOptions(parent=self, protect=args.protect)

        account = storage.StorageAccount(
            f"{name}-account",
            account_name=args.account_name,
            resource_group_name=args.resource_group_name,
            location=args.location,
            kind=storage.Kind.STORAGE_V2,
            sku=storage.SkuArgs(name=storage.SkuName.STANDARD_LRS),
            enable_https_traffic_only=True,
            minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
            allow_blob_public_access=False,
            allow_shared_key_access=args.auth == StorageAuth.SAS,
            default_to_o_auth_authentication=args.auth == StorageAuth.IDENTITY,
            allow_cross_tenant_replication=False,
            public_network_access=(storage.PublicNetworkAccess.DISABLED if private
                                   else storage.PublicNetworkAccess.ENABLED),
            network_rule_set=storage.NetworkRuleSetArgs(
                default_action=storage.DefaultAction.DENY if private else storage.DefaultAction.ALLOW,
                bypass=storage.Bypass.AZURE_SERVICES,
            ),
            sas_policy=storage.SasPolicyArgs(
                sas_expiration_period=f"{args.sas_expiry_days}.00:00:00",
                expiration_action=storage.ExpirationAction.BLOCK,
            ) if args.auth == StorageAuth.SAS else None,
            tags=dict(args.tags),
            opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(delete_before_replace=True)),
        )
        # Soft delete: a mistaken overwrite or delete of results can be undone for 7 days.
        storage.BlobServiceProperties(
            f"{name}-blob-service",
            account_name=account.name,
            resource_group_name=args.resource_group_name,
            blob_services_name="default",
            delete_retention_policy=storage.DeleteRetentionPolicyArgs(enabled=True, days=7),
            container_delete_retention_policy=storage.DeleteRetentionPolicyArgs(enabled=True, days=7),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.containers, self.container_ids = {}, {}
        for container in args.containers:
            blob_container = storage.BlobContainer(
                f"{name}-{container}",
                container_name=container,
                account_name=account.name,
                resource_group_name=args.resource_group_name,
                public_access=storage.PublicAccess.NONE,
                opts=keep,
            )
            self.containers[container], self.container_ids[container] = blob_container.name, blob_container.id
        if args.deployer is not None:
            role = roles.STORAGE_BLOB_DATA_CONTRIBUTOR if args.deployer.write else roles.STORAGE_BLOB_DATA_READER
            roles.assign(f"{name}-deployer-data", role, args.deployer.principal_id, account.id,
                         "Lets the identity running pulumi up use the stack's blob commands (Entra ID, no keys).",
                         self, principal_type=args.deployer.principal_type)
        self.private_link = None
        if args.private is not None:
            self.private_link = private_endpoint(
                f"{name}-private", self, args.private, target_id=account.id, group_id="blob",
                target_name=f"{args.account_name}-blob", location=args.location,
                resource_group_name=args.resource_group_name, tags=args.tags)

        self.account_name = account.name
        self.account_id = account.id
        self.register_outputs({"account_name": self.account_name, "account_id": self.account_id})


def blob_batch_command(account: str, container: str, upload: bool, local: str, path: str | None = None) -> str:
    """The ``az storage blob`` command that copies folder ``local`` into ``container`` (under ``path``), or the
    container (``path`` only) into ``local``; signed in with Entra ID (``--auth-mode login``), never a key."""
    head = f"az storage blob {'upload' if upload else 'download'}-batch --auth-mode login --account-name {account}"
    if upload:
        return f"{head} --destination {container}" + (f" --destination-path {path}" if path else "") + \
            f" --source {local}"
    return f"{head} --source {container}" + (f" --pattern '{path}/*'" if path else "") + f" --destination {local}"
