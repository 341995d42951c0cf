"""Resource group and virtual network with a subnet for nodes and one for private endpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, privatedns, resources

from aksgpu.azure.private_link import PRIVATE_DNS_ZONES, PrivateAccess


@dataclass(frozen=True)
class NetworkArgs:
    resource_group_name: str
    """Physical name of the resource group."""
    vnet_name: str
    """Physical name of the virtual network."""
    location: str
    """Azure region."""
    address_space: str
    """VNet CIDR."""
    node_subnet: str
    """CIDR of the AKS node subnet."""
    endpoint_subnet: str
    """CIDR of the private endpoint subnet."""
    tags: Mapping[str, str]
    """Tags for every resource."""
    resource_group_tags: Mapping[str, str] | None = None
    """Tags of the resource group itself (the stack's expiry lives there); default: ``tags``."""
    private_services: Sequence[str] = ()
    """Private Link group ids (``registry``, ``blob``) that need a private DNS zone linked to this VNet."""
    protect_group: bool = False
    """Refuse ``pulumi destroy`` of the resource group: it holds protected data, and deleting a resource group in
    Azure deletes everything in it, protected or not."""


class Network(pulumi.ComponentResource):
    resource_group_name: pulumi.Output[str]
    vnet_id: pulumi.Output[str]
    node_subnet_id: pulumi.Output[str]
    endpoint_subnet_id: pulumi.Output[str]
    private_access: PrivateAccess
    """What a private endpoint needs: the endpoint subnet and the DNS zones."""
    vnet_writes: list[pulumi.Resource]
    """Writes to the VNet after its node subnet (the endpoint subnet, the DNS zone links): AKS must not take
    ownership of the VNet while one runs."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:azure:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        group = resources.ResourceGroup(
            f"{name}-rg", resource_group_name=args.resource_group_name, location=args.location,
            tags=dict(args.resource_group_tags or args.tags),
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect_group),
        )
        vnet = network.VirtualNetwork(
            f"{name}-vnet",
            virtual_network_name=args.vnet_name,
            resource_group_name=group.name,
            location=args.location,
            address_space=network.AddressSpaceArgs(address_prefixes=[args.address_space]),
            tags=dict(args.tags),
            opts=child,
        )
        # Standalone subnets: since network API 2023-09-01 a VNet update that omits `subnets` keeps them.
        nodes = network.Subnet(
            f"{name}-nodes",
            subnet_name="nodes",
            resource_group_name=group.name,
            virtual_network_name=vnet.name,
            address_prefix=args.node_subnet,
            # Nodes reach the internet through the AKS load balancer, never through implicit default outbound.
            default_outbound_access=False,
            opts=child,
        )
        endpoints = network.Subnet(
            f"{name}-endpoints",
            subnet_name="private-endpoints",
            resource_group_name=group.name,
            virtual_network_name=vnet.name,
            address_prefix=args.endpoint_subnet,
            default_outbound_access=False,
            private_endpoint_network_policies=network.VirtualNetworkPrivateEndpointNetworkPolicies.ENABLED,
            # Azure serialises subnet operations on one VNet; ordering them avoids AnotherOperationInProgress.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[nodes]),
        )

        zone_ids: dict[str, pulumi.Output[str]] = {}
        self.vnet_writes = [endpoints]
        for service in sorted(set(args.private_services)):
            zone = privatedns.PrivateZone(
                f"{name}-{service}-zone", private_zone_name=PRIVATE_DNS_ZONES[service],
                resource_group_name=group.name, location="global", tags=dict(args.tags), opts=child,
            )
            self.vnet_writes.append(privatedns.VirtualNetworkLink(
                f"{name}-{service}-zone-link",
                resource_group_name=group.name,
                private_zone_name=zone.name,
                virtual_network=privatedns.SubResourceArgs(id=vnet.id),
                registration_enabled=False,
                location="global",
                tags=dict(args.tags),
                opts=child,
            ))
            zone_ids[service] = zone.id

        self.resource_group_name = group.name
        self.vnet_id = vnet.id
        self.node_subnet_id = nodes.id
        self.endpoint_subnet_id = endpoints.id
        self.private_access = PrivateAccess(subnet_id=endpoints.id, dns_zone_ids=zone_ids)
        self.register_outputs({
            "resource_group_name": self.resource_group_name,
            "vnet_id": self.vnet_id,
            "node_subnet_id": self.node_subnet_id,
            "endpoint_subnet_id": self.endpoint_subnet_id,
        })
