"""Azure Container Registry, optionally private; the cluster attaches it (components/azure/cluster.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import containerregistry as acr

from components.azure.private_link import PrivateAccess, PrivateLink, private_endpoint
from components.vocabulary import RegistrySku


@dataclass(frozen=True)
class RegistryArgs:
    resource_group_name: pulumi.Input[str]
    """Resource group of the registry."""
    location: str
    """Azure region."""
    registry_name: str
    """Physical name (5-50 letters and digits, globally unique)."""
    sku: RegistrySku
    """``Basic``, ``Standard`` or ``Premium``."""
    tags: Mapping[str, str]
    """Tags for every resource."""
    private: PrivateAccess | None = None
    """Private mode: public network access off, reached through a private endpoint."""


class Registry(pulumi.ComponentResource):
    login_server: pulumi.Output[str]
    id: pulumi.Output[str]
    name: pulumi.Output[str]
    private_link: PrivateLink | None
    """Its private endpoint; None when public."""

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:azure:Registry", name, None, opts)  # frozen: components/__init__.py
        if args.private is not None and args.sku != RegistrySku.PREMIUM:
            raise ValueError(f"registry {args.registry_name}: private endpoints need sku Premium, not {args.sku}")
        private = args.private is not None

        registry = acr.Registry(
            f"{name}-acr",
            registry_name=args.registry_name,
            resource_group_name=args.resource_group_name,
            location=args.location,
            sku=acr.SkuArgs(name=args.sku),
            admin_user_enabled=False,
            anonymous_pull_enabled=False,
            public_network_access=acr.PublicNetworkAccess.DISABLED if private else acr.PublicNetworkAccess.ENABLED,
            # No trusted-service bypass: nothing here needs one. A quick ACR Task run could not use it to push into a
            # private registry anyway (it builds on public agents without a system-assigned identity), so private
            # stacks build from inside the VNet (config refuses build.mode acr there).
            network_rule_bypass_options=acr.NetworkRuleBypassOptions.NONE,
            tags=dict(args.tags),
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        self.private_link = None
        if args.private is not None:
            self.private_link = private_endpoint(
                f"{name}-private", self, args.private, target_id=registry.id, group_id="registry",
                target_name=args.registry_name, location=args.location,
                resource_group_name=args.resource_group_name, tags=args.tags)

        self.login_server = registry.login_server
        self.id = registry.id
        self.name = registry.name
        self.register_outputs({"login_server": self.login_server, "id": self.id})
