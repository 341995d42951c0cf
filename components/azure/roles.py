"""Built-in Azure role definition ids this program assigns, and the one way it assigns them."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_azure_native import authorization

ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
MONITORING_DATA_READER = "b0d8363b-8ddd-447d-831f-62ca05bff136"
"""Query an Azure Monitor workspace's Prometheus metrics (Grafana, KEDA)."""
GRAFANA_ADMIN = "22926164-76b3-42b3-bc55-97df8dab3e41"
CONTRIBUTOR = "b24988ac-6180-42a0-ab88-20f7382dd24c"

DEPLOYER_ROLES = (AKS_RBAC_CLUSTER_ADMIN, GRAFANA_ADMIN, STORAGE_BLOB_DATA_CONTRIBUTOR, STORAGE_BLOB_DATA_READER)
"""The roles the program assigns to the identity running ``pulumi up`` (``cluster.deployerPrincipalType``: a
``User`` or ``Group`` where a person deploys): the only ones a user's or group's assignment of the program holds."""


def subscription_of(resource_id: str) -> str:
    """``/subscriptions/<id>`` from any Azure resource id."""
    parts = resource_id.split("/")
    if len(parts) < 3 or parts[1].lower() != "subscriptions":
        raise ValueError(f"not an Azure resource id: {resource_id!r}")
    return f"/subscriptions/{parts[2]}"


def resource_group_of(resource_id: str) -> str:
    """``/subscriptions/<id>/resourceGroups/<group>`` from a resource id inside a resource group."""
    parts = resource_id.split("/")
    if len(parts) < 5 or parts[1].lower() != "subscriptions" or parts[3].lower() != "resourcegroups":
        raise ValueError(f"not a resource id inside a resource group: {resource_id!r}")
    return "/".join(parts[:5])


def role_definition_id(scope: pulumi.Input[str], role: str) -> pulumi.Output[str]:
    """The subscription-level id of built-in ``role``, taken from the subscription of ``scope``."""
    return pulumi.Output.from_input(scope).apply(
        lambda s: f"{subscription_of(s)}/providers/Microsoft.Authorization/roleDefinitions/{role}"
    )


def assign(name: str, role: str, principal_id: pulumi.Input[str], scope: pulumi.Input[str], description: str,
           parent: pulumi.Resource,
           principal_type: pulumi.Input[str] = authorization.PrincipalType.SERVICE_PRINCIPAL,
           aliases: Sequence[pulumi.Alias] = ()) -> authorization.RoleAssignment:
    """Grant built-in ``role`` on ``scope``. The principal type is always sent: with it Azure accepts a managed
    identity created seconds ago, before Entra ID has replicated it (no PrincipalNotFound)."""
    return authorization.RoleAssignment(
        name,
        principal_id=principal_id,
        principal_type=principal_type,
        role_definition_id=role_definition_id(scope, role),
        scope=scope,
        description=description,
        opts=pulumi.ResourceOptions(parent=parent, aliases=list(aliases)),
    )
