"""One workload's Azure identity: a user-assigned managed identity, federated with the workload's ServiceAccount.

Pods that run as the ServiceAccount get Entra ID tokens for the identity through AKS workload identity (the
cluster's OIDC issuer signs the ServiceAccount token; Entra ID trusts it through the federated credential). The
Blob CSI driver uses exactly that to mount a workload's blob containers, so no other pod on the node, and not the
node's kubelet identity, can read them; KEDA's operator reads managed Prometheus the same way. Each role is a
``Grant`` on the narrowest scope that works: a blob container (read-only where the workload only reads), the
Azure Monitor workspace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import managedidentity
from pulumi_kubernetes import core

from components.azure import roles

TOKEN_AUDIENCE = "api://AzureADTokenExchange"  # noqa: S105 (a name, not a secret)
"""The audience Entra ID accepts for federated Kubernetes tokens (and the Blob CSI driver requests)."""
CLIENT_ID_ANNOTATION = "azure.workload.identity/client-id"


@dataclass(frozen=True)
class Grant:
    key: str
    """Names the role assignment (``<component>-<key>``)."""
    role: str
    """Built-in role definition id (``components.azure.roles``)."""
    scope: pulumi.Input[str]
    """What the role applies to: as narrow as the workload needs (a blob container, a workspace)."""
    reason: str
    """The assignment's description."""


def blob_grant(container: str, scope: pulumi.Input[str], write: bool, who: str) -> Grant:
    """Storage Blob Data Contributor (``write``) or Reader on one blob container."""
    return Grant(f"{container}-data", roles.STORAGE_BLOB_DATA_CONTRIBUTOR if write else roles.STORAGE_BLOB_DATA_READER,
                 scope, f"{who} {'writes' if write else 'reads'} blob container {container}.")


@dataclass(frozen=True)
class WorkloadIdentityArgs:
    identity_name: str
    """Azure name of the managed identity (``id-<root>-<workload>``)."""
    resource_group_name: pulumi.Input[str]
    """Resource group of the identity."""
    location: str
    """Azure region."""
    oidc_issuer_url: pulumi.Input[str]
    """The cluster's OIDC issuer: the only issuer whose tokens the identity trusts."""
    namespace_name: str
    """The ServiceAccount's namespace, for the federated credential's subject."""
    service_account: str
    """Name of the ServiceAccount the workload's pods run as."""
    grants: Sequence[Grant]
    """The identity's roles."""
    tags: Mapping[str, str]
    """Tags of the identity."""
    namespace: pulumi.Input[str] | None = None
    """The namespace as an output, to create the ServiceAccount in (it waits for it); None: the ServiceAccount
    exists already (an AKS add-on's) and only the federation is made."""


class WorkloadIdentity(pulumi.ComponentResource):
    client_id: pulumi.Output[str]
    """What a blob volume names to mount as this workload (``clientID``)."""
    principal_id: pulumi.Output[str]
    service_account: str
    """The ServiceAccount the workload's pods must run as."""
    grants: list[pulumi.Resource]
    """The role assignments: a volume mounted before they exist fails until they propagate."""

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:identity:WorkloadIdentity", name, None, opts)  # frozen: components/__init__.py
        child = pulumi.ResourceOptions(parent=self)
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity",
            resource_name_=args.identity_name,
            resource_group_name=args.resource_group_name,
            location=args.location,
            tags=dict(args.tags),
            opts=child,
        )
        managedidentity.FederatedIdentityCredential(
            f"{name}-federation",
            resource_name_=identity.name,
            resource_group_name=args.resource_group_name,
            federated_identity_credential_resource_name=f"{args.namespace_name}-{args.service_account}",
            issuer=args.oidc_issuer_url,
            subject=f"system:serviceaccount:{args.namespace_name}:{args.service_account}",
            audiences=[TOKEN_AUDIENCE],
            opts=child,
        )
        if args.namespace is not None:
            core.v1.ServiceAccount(
                f"{name}-service-account",
                metadata={"name": args.service_account, "namespace": args.namespace,
                          "annotations": {CLIENT_ID_ANNOTATION: identity.client_id}},
                # The pods mount blobs through the CSI driver and call no Azure API: no token in the pod.
                automount_service_account_token=False,
                opts=child,
            )
        self.grants = [roles.assign(f"{name}-{g.key}", g.role, identity.principal_id, g.scope, g.reason, self)
                       for g in args.grants]
        self.client_id = identity.client_id
        self.principal_id = identity.principal_id
        self.service_account = args.service_account
        self.register_outputs({"client_id": self.client_id, "principal_id": self.principal_id})
