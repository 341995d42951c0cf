"""Private endpoints for Azure services, resolved through privatelink DNS zones owned by the Network.

One zone per service: two private storage accounts share ``privatelink.blob.core.windows.net``, and so can stacks, from
the zones a hub (or an earlier stack) holds (``network.privateDnsZoneIds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network

from components.vocabulary import PRIVATE_DNS_ZONES


@dataclass(frozen=True)
class PrivateAccess:
    """Where a service's private endpoint goes and which zones resolve it."""

    subnet_id: pulumi.Input[str]
    """Subnet for the endpoint's NIC."""
    dns_zone_ids: Mapping[str, pulumi.Input[str]]
    """Group id (``registry``, ``blob``) → id of its private DNS zone linked to the VNet."""


@dataclass(frozen=True)
class PrivateLinkArgs:
    resource_group_name: pulumi.Input[str]
    """Resource group for the endpoint."""
    location: str
    """Azure region of the endpoint."""
    endpoint_name: str
    """Physical name of the private endpoint."""
    target_id: pulumi.Input[str]
    """Resource id of the service (registry, storage account)."""
    group_id: str
    """Sub-resource of the service: ``registry`` or ``blob``."""
    access: PrivateAccess
    """Subnet and DNS zones."""
    tags: Mapping[str, str]
    """Tags for the endpoint."""


class PrivateLink(pulumi.ComponentResource):
    endpoint_id: pulumi.Output[str]

    def __init__(self, name: str, args: PrivateLinkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:azure:PrivateLink", name, None, opts)  # frozen: components/__init__.py
        if args.group_id not in args.access.dns_zone_ids:
            raise ValueError(f"private endpoint {args.endpoint_name}: the network has no DNS zone for "
                             f"{args.group_id!r} ({PRIVATE_DNS_ZONES.get(args.group_id, 'unknown service')})")
        child = pulumi.ResourceOptions(parent=self)
        endpoint = network.PrivateEndpoint(
            f"{name}-endpoint",
            private_endpoint_name=args.endpoint_name,
            resource_group_name=args.resource_group_name,
            location=args.location,
            subnet=network.SubnetArgs(id=args.access.subnet_id),
            private_link_service_connections=[network.PrivateLinkServiceConnectionArgs(
                name=args.endpoint_name,
                private_link_service_id=args.target_id,
                group_ids=[args.group_id],
            )],
            tags=dict(args.tags),
            opts=child,
        )
        # The zone group keeps the zone's A record in step with the endpoint's private IP.
        network.PrivateDnsZoneGroup(
            f"{name}-dns",
            private_dns_zone_group_name="default",
            private_endpoint_name=endpoint.name,
            resource_group_name=args.resource_group_name,
            private_dns_zone_configs=[network.PrivateDnsZoneConfigArgs(
                name=PRIVATE_DNS_ZONES[args.group_id].replace(".", "-"),
                private_dns_zone_id=args.access.dns_zone_ids[args.group_id],
            )],
            opts=child,
        )
        self.endpoint_id = endpoint.id
        self.register_outputs({"endpoint_id": self.endpoint_id})


def private_endpoint(name: str, parent: pulumi.Resource, access: PrivateAccess, *, target_id: pulumi.Input[str],
                     group_id: str, target_name: str, location: str, resource_group_name: pulumi.Input[str],
                     tags: Mapping[str, str]) -> PrivateLink:
    """A service's private endpoint ``pe-<target_name>`` in the VNet, as a child of the service's component."""
    return PrivateLink(name, PrivateLinkArgs(
        resource_group_name=resource_group_name, location=location, endpoint_name=f"pe-{target_name}",
        target_id=target_id, group_id=group_id, access=access, tags=tags,
    ), opts=pulumi.ResourceOptions(parent=parent))
