"""Blob storage accounts with private containers: HTTPS only, TLS 1.2, no anonymous access.

Identity mode turns shared keys off and grants Storage Blob Data Contributor to the given principals;
SAS mode keeps keys on (a SAS is signed with one) but caps SAS lifetimes with a policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import pulumi
from pulumi_azure_native import authorization, storage

from components import roles
from components.private_link import PrivateAccess, PrivateLink, PrivateLinkArgs


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
    auth: str = "identity"
    """``identity`` (shared keys off) or ``sas``."""
    sas_expiry_days: int = 7
    """Longest SAS lifetime the account's policy allows in ``sas`` mode."""
    data_contributors: Sequence[pulumi.Input[str]] = ()
    """Principal object ids (service principals, managed identities) that read and write blobs."""
    protect: bool = False
    """Refuse ``pulumi destroy`` of the account and its containers."""
    private: PrivateAccess | None = None
    """Private mode: public network access off, blob private endpoint in the VNet."""


class BlobStorage(pulumi.ComponentResource):
    account_name: pulumi.Output[str]
    account_id: pulumi.Output[str]
    container_names: list[str]

    def __init__(self, name: str, args: BlobStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:storage:BlobStorage", name, None, opts)
        if args.auth not in ("identity", "sas"):
            raise ValueError(f"storage {args.account_name}: auth must be identity or sas, not {args.auth!r}")
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
            allow_shared_key_access=args.auth == "sas",
            default_to_o_auth_authentication=args.auth == "identity",
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
            ) if args.auth == "sas" else None,
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
        for container in args.containers:
            storage.BlobContainer(
                f"{name}-{container}",
                container_name=container,
                account_name=account.name,
                resource_group_name=args.resource_group_name,
                public_access=storage.PublicAccess.NONE,
                opts=keep,
            )
        for i, principal in enumerate(args.data_contributors):
            authorization.RoleAssignment(
                f"{name}-data-contributor-{i}",
                principal_id=principal,
                principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
                role_definition_id=roles.role_definition_id(account.id, roles.STORAGE_BLOB_DATA_CONTRIBUTOR),
                scope=account.id,
                description="Reads and writes blobs with Entra ID tokens (no account key, no SAS).",
                opts=pulumi.ResourceOptions(parent=self),
            )
        if args.private is not None:
            PrivateLink(f"{name}-private", PrivateLinkArgs(
                resource_group_name=args.resource_group_name, location=args.location,
                endpoint_name=f"pe-{args.account_name}-blob", target_id=account.id, group_id="blob",
                access=args.private, tags=args.tags,
            ), opts=pulumi.ResourceOptions(parent=self))

        self.account_name = account.name
        self.account_id = account.id
        self.container_names = list(args.containers)
        self.register_outputs({"account_name": self.account_name, "account_id": self.account_id})
