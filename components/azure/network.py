"""Resource group and virtual network with a subnet for nodes and one for private endpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_azure_native as azure_native
from pulumi_azure_native import network, privatedns, resources

from components.azure.private_link import PrivateAccess
from components.vocabulary import PRIVATE_DNS_ZONES


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
    runner_vnet_id: str | None = None
    """A VNet to peer with both ways and to link this network's own private DNS zones to (where ``pulumi up``
    runs)."""
    shared_zone_ids: Mapping[str, str] = field(default_factory=dict)
    """Group id → an existing private DNS zone (a hub's, an earlier stack's) to link this VNet to and resolve that
    service through, instead of a zone of its own; none is linked to ``runner_vnet_id``, which resolves through it
    already (a VNet is linked to one zone of a name)."""
    subscription_id: str | None = None
    """The deployment's subscription: a runner VNet or a shared zone in another one is written through a provider
    for its own (a resource group name alone names a group of the deployment's subscription)."""


def peering_target(vnet_id: str) -> tuple[str, str]:
    """(resource group, name) of a VNet from its resource id."""
    parts = vnet_id.split("/")
    return parts[4], parts[8]


def zone_target(zone_id: str) -> tuple[str, str, str]:
    """(subscription, resource group, zone name) of a private DNS zone from its resource id."""
    parts = zone_id.split("/")
    return parts[2].lower(), parts[4], parts[8]


class Network(pulumi.ComponentResource):
    resource_group_name: pulumi.Output[str]
    vnet_id: pulumi.Output[str]
    node_subnet_id: pulumi.Output[str]
    endpoint_subnet_id: pulumi.Output[str]
    private_access: PrivateAccess
    """What a private endpoint needs: the endpoint subnet and the DNS zones."""
    vnet_writes: list[pulumi.Resource]
    """Writes to the VNet after its node subnet (the endpoint subnet, the DNS zone links, peerings): AKS must not
    take ownership of the VNet while one runs."""
    runner_links: list[pulumi.Resource]
    """The peerings and DNS links that let the runner's VNet reach this one's private endpoints."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:azure:Network", name, None, opts)  # frozen: components/__init__.py
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

        zone_ids: dict[str, pulumi.Input[str]] = {}
        self.vnet_writes = [endpoints]
        self.runner_links = []
        self._providers: dict[str, azure_native.Provider] = {}
        if args.runner_vnet_id is not None:
            self.runner_links += self._peer(name, args.runner_vnet_id, args, group.name, vnet)
        for service in sorted(set(args.private_services)):
            if service in args.shared_zone_ids:
                zone_ids[service] = args.shared_zone_ids[service]
                self.vnet_writes.append(self._link_shared(name, service, args, vnet))
                continue
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
            if args.runner_vnet_id is not None:
                # In state, so a destroy deletes it before the zone (ARM refuses a zone that still has links).
                self.runner_links.append(privatedns.VirtualNetworkLink(
                    f"{name}-{service}-zone-runner-link",
                    resource_group_name=group.name,
                    private_zone_name=zone.name,
                    virtual_network_link_name="runner",
                    virtual_network=privatedns.SubResourceArgs(id=args.runner_vnet_id),
                    registration_enabled=False,
                    location="global",
                    tags=dict(args.tags),
                    opts=child,
                ))
            zone_ids[service] = zone.id
        self.vnet_writes += self.runner_links

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

    def _in_subscription(self, name: str, subscription: str, args: NetworkArgs) -> pulumi.ResourceOptions:
        """Options for a child written in ``subscription``: through a provider for it where that is not the
        deployment's (one per subscription)."""
        if args.subscription_id is None or subscription == args.subscription_id.lower():
            return pulumi.ResourceOptions(parent=self)
        if subscription not in self._providers:
            self._providers[subscription] = azure_native.Provider(
                f"{name}-provider-{subscription[:8]}", subscription_id=subscription,
                opts=pulumi.ResourceOptions(parent=self))
        return pulumi.ResourceOptions(parent=self, provider=self._providers[subscription])

    def _link_shared(self, name: str, service: str, args: NetworkArgs, vnet: network.VirtualNetwork
                     ) -> privatedns.VirtualNetworkLink:
        """This VNet's link in an existing zone: named after the VNet and the deployment's subscription, unique
        among the zone's links from other stacks and clones."""
        subscription, group, zone = zone_target(args.shared_zone_ids[service])
        suffix = f"-{args.subscription_id[:8].lower()}" if args.subscription_id else ""
        return privatedns.VirtualNetworkLink(
            f"{name}-{service}-zone-link",
            resource_group_name=group,
            private_zone_name=zone,
            virtual_network_link_name=f"{args.vnet_name}{suffix}",
            virtual_network=privatedns.SubResourceArgs(id=vnet.id),
            registration_enabled=False,
            location="global",
            tags=dict(args.tags),
            opts=self._in_subscription(name, subscription, args),
        )

    def _peer(self, name: str, runner_vnet_id: str, args: NetworkArgs, group: pulumi.Output[str],
              vnet: network.VirtualNetwork) -> list[pulumi.Resource]:
        """Peerings both ways between this VNet and the runner's: traffic flows once both exist (Connected)."""
        runner_group, runner_vnet = peering_target(runner_vnet_id)
        settings = dict(allow_virtual_network_access=True, allow_forwarded_traffic=False, allow_gateway_transit=False,
                        use_remote_gateways=False)
        to_runner = network.VirtualNetworkPeering(
            f"{name}-to-runner", virtual_network_peering_name="to-runner", resource_group_name=group,
            virtual_network_name=vnet.name, remote_virtual_network=network.SubResourceArgs(id=runner_vnet_id),
            **settings, opts=pulumi.ResourceOptions(parent=self))
        # Named after this VNet: one runner VNet may be peered with several stacks. Written in the runner's
        # subscription, which may not be the deployment's.
        from_runner = network.VirtualNetworkPeering(
            f"{name}-from-runner", virtual_network_peering_name=vnet.name.apply(lambda v: f"to-{v}"),
            resource_group_name=runner_group, virtual_network_name=runner_vnet,
            remote_virtual_network=network.SubResourceArgs(id=vnet.id), **settings,
            opts=self._in_subscription(name, runner_vnet_id.split("/")[2].lower(), args))
        return [to_runner, from_runner]
