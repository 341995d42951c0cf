"""The AKS cluster: Entra ID + Azure RBAC, CNI overlay, workload identity, autoscaler, auto-upgrades.

Only the system pool is declared inline (AKS needs one at creation); every other pool is its own
``AgentPool`` so editing a pool never touches the cluster resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
from pulumi_azure_native import authorization, managedidentity, privatedns
from pulumi_azure_native import containerservice as cs

from components.azure import roles
from components.azure.node_pools import PoolNodes, agent_pool_settings
from components.vocabulary import (
    SECURITY_EXCEPTION,
    MaintenanceWindow,
    NetworkPolicy,
    NodeOsUpgradeChannel,
    PrincipalType,
    SecurityException,
    SkuTier,
    UpgradeChannel,
)


@dataclass(frozen=True)
class ClusterArgs:
    resource_group_name: pulumi.Input[str]
    """Resource group of the cluster."""
    location: str
    """Azure region."""
    cluster_name: str
    """Physical cluster name."""
    node_resource_group: str
    """Name AKS gives the resource group of nodes (instead of MC_...), so cleanup checks know it."""
    dns_prefix: str
    """API server DNS prefix."""
    node_subnet_id: pulumi.Input[str]
    """Subnet for every pool's nodes."""
    system_pool: PoolNodes
    """The system pool, declared inline (AKS needs one at creation)."""
    pod_cidr: str
    """Overlay pod range."""
    service_cidr: str
    """Kubernetes service range."""
    dns_service_ip: str
    """Cluster DNS address inside the service range."""
    tags: Mapping[str, str]
    """Tags for every resource."""
    autoscaler: Mapping[str, str] = field(default_factory=dict)
    """The cluster autoscaler profile, by the SDK's argument names (``scan_interval``, ``expander``...)."""
    kubernetes_version: str | None = None
    """Kubernetes version; None: AKS's default."""
    sku_tier: SkuTier = SkuTier.FREE
    """``Free``, ``Standard`` (uptime SLA) or ``Premium``."""
    private: bool = False
    """Private API server."""
    authorized_ip_ranges: tuple[str, ...] = ()
    """CIDRs allowed to reach a public API server."""
    open_api_server: bool = False
    """A public API server without authorized ranges, accepted on purpose: tagged as a security exception."""
    local_accounts: bool = False
    """Keep AKS local (admin certificate) accounts."""
    admin_group_object_ids: tuple[str, ...] = ()
    """Entra ID groups made cluster admins."""
    network_policy: NetworkPolicy = NetworkPolicy.CILIUM
    """Network policy engine (Cilium runs on the Cilium dataplane)."""
    upgrade_channel: UpgradeChannel = UpgradeChannel.PATCH
    """Automatic Kubernetes upgrades."""
    node_os_upgrade_channel: NodeOsUpgradeChannel = NodeOsUpgradeChannel.NODE_IMAGE
    """Node OS updates."""
    maintenance_window: MaintenanceWindow | None = None
    """When the two channels may upgrade (planned maintenance); None: whenever AKS chooses."""
    managed_blob_csi_driver: bool = False
    """The AKS-managed Blob CSI driver."""
    deployer_object_id: pulumi.Input[str] | None = None
    """Object id of whoever runs ``pulumi up``, granted AKS RBAC Cluster Admin; None: no grant."""
    deployer_principal_type: PrincipalType = PrincipalType.USER
    """Its principal type (Azure refuses an assignment whose type is wrong)."""
    prometheus_metrics: bool = False
    """Run the managed Prometheus collector (``azureMonitorProfile.metrics``); its workspace is separate."""
    keda: bool = False
    """The KEDA add-on (``workloadAutoScalerProfile.keda``)."""
    ai_toolchain_operator: bool = False
    """The AI toolchain operator add-on (KAITO, ``aiToolchainOperatorProfile``); it needs the OIDC issuer, which
    every cluster here has."""
    registry_id: pulumi.Input[str] | None = None
    """A registry the nodes pull from: the kubelet identity gets AcrPull on it, as ``--attach-acr`` grants."""
    runner_vnet_id: str | None = None
    """A private cluster's API server zone (which AKS makes in the node resource group) is linked to this VNet too,
    in state: where ``pulumi up`` runs resolves the API server, and destroy removes the link."""
    node_auto_provisioning: bool = False
    """AKS node auto-provisioning (Karpenter) makes the nodes of NAP pools; then no pool autoscales and the cluster
    has no autoscaler profile (node-auto-provisioning: NAP and the cluster autoscaler do not mix)."""
    reservation_groups: tuple[str, ...] = ()
    """Capacity reservation groups the pools take VMs from: AKS needs a user-assigned control-plane identity with
    Contributor on each group's resource group (use-capacity-reservation-groups); none: a system-assigned one."""
    control_plane_identity_name: str = ""
    """Name of that user-assigned identity."""
    after: Sequence[pulumi.Resource] = ()
    """Other writes to the node subnet's VNet (subnets, DNS links, private endpoints). AKS fails to take ownership of
    a VNet that another operation is updating (SetVNetOwnershipFailed, Azure/AKS#4522), so they go first."""


def api_server_zone(private_fqdn: str) -> str:
    """The private DNS zone that resolves a private API server: its FQDN without the host label."""
    zone = private_fqdn.partition(".")[2]
    if ".privatelink." not in f".{zone}":
        raise ValueError(f"{private_fqdn!r} is not a private API server FQDN (<host>.<guid>.privatelink.<region>...)")
    return zone


class Cluster(pulumi.ComponentResource):
    name: pulumi.Output[str]
    id: pulumi.Output[str]
    kubelet_object_id: pulumi.Output[str]
    oidc_issuer_url: pulumi.Output[str]
    resource_group_name: pulumi.Output[str]
    managed_cluster: cs.ManagedCluster
    deployer_admin: authorization.RoleAssignment | None
    """The deployer's RBAC role; Kubernetes calls must wait for it (an edge Pulumi cannot see)."""
    network_contributor: authorization.RoleAssignment
    """The control plane's role on the node subnet; a LoadBalancer Service needs it (an edge Pulumi cannot see)."""
    kubelet_pull: authorization.RoleAssignment | None
    """The kubelet identity's AcrPull on ``registry_id`` (what a pod's image pull waits for)."""
    runner_dns_link: privatedns.VirtualNetworkLink | None
    """The private API server zone's link to ``runner_vnet_id``."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:aks:Cluster", name, None, opts)  # frozen: components/__init__.py
        identity, principal_id, reservation_grants = self._control_plane_identity(name, args)
        system = cs.ManagedClusterAgentPoolProfileArgs(
            name=args.system_pool.name,
            mode=cs.AgentPoolMode.SYSTEM,
            **agent_pool_settings(args.system_pool, args.node_subnet_id, args.tags),
        )
        cluster = cs.ManagedCluster(
            f"{name}-aks",
            resource_name_=args.cluster_name,
            resource_group_name=args.resource_group_name,
            location=args.location,
            dns_prefix=args.dns_prefix,
            node_resource_group=args.node_resource_group,
            kubernetes_version=args.kubernetes_version,
            sku=cs.ManagedClusterSKUArgs(name=cs.ManagedClusterSKUName.BASE, tier=args.sku_tier),
            identity=identity,
            enable_rbac=True,
            aad_profile=cs.ManagedClusterAADProfileArgs(
                managed=True, enable_azure_rbac=True, admin_group_object_ids=list(args.admin_group_object_ids),
            ),
            disable_local_accounts=not args.local_accounts,
            oidc_issuer_profile=cs.ManagedClusterOIDCIssuerProfileArgs(enabled=True),
            security_profile=cs.ManagedClusterSecurityProfileArgs(
                workload_identity=cs.ManagedClusterSecurityProfileWorkloadIdentityArgs(enabled=True),
            ),
            network_profile=cs.ContainerServiceNetworkProfileArgs(
                network_plugin=cs.NetworkPlugin.AZURE,
                network_plugin_mode=cs.NetworkPluginMode.OVERLAY,
                network_policy=args.network_policy,
                # Cilium network policy runs only on the Cilium dataplane.
                network_dataplane=cs.NetworkDataplane.CILIUM if args.network_policy == NetworkPolicy.CILIUM else None,
                pod_cidr=args.pod_cidr,
                service_cidr=args.service_cidr,
                dns_service_ip=args.dns_service_ip,
                load_balancer_sku=cs.LoadBalancerSku.STANDARD,
                outbound_type=cs.OutboundType.LOAD_BALANCER,
            ),
            api_server_access_profile=cs.ManagedClusterAPIServerAccessProfileArgs(
                enable_private_cluster=args.private,
                authorized_ip_ranges=list(args.authorized_ip_ranges) or None,
            ),
            auto_scaler_profile=None if args.node_auto_provisioning else
            cs.ManagedClusterPropertiesAutoScalerProfileArgs(
                **args.autoscaler,
                # GPU operator DaemonSets run on every GPU node; they must not keep an idle node alive.
                ignore_daemonsets_utilization=True,
                daemonset_eviction_for_empty_nodes=True,
            ),
            # NAP's default NodePools stay: they give CPU pods that outgrow the fixed system pool a node.
            node_provisioning_profile=cs.ManagedClusterNodeProvisioningProfileArgs(
                mode=cs.NodeProvisioningMode.AUTO, default_node_pools=cs.NodeProvisioningDefaultNodePools.AUTO)
            if args.node_auto_provisioning else None,
            auto_upgrade_profile=cs.ManagedClusterAutoUpgradeProfileArgs(
                upgrade_channel=args.upgrade_channel, node_os_upgrade_channel=args.node_os_upgrade_channel,
            ),
            # Off unless config asks: the Helm-installed Blob CSI driver registers the same CSIDriver.
            storage_profile=cs.ManagedClusterStorageProfileArgs(
                blob_csi_driver=cs.ManagedClusterStorageProfileBlobCSIDriverArgs(enabled=args.managed_blob_csi_driver),
            ),
            azure_monitor_profile=cs.ManagedClusterAzureMonitorProfileArgs(
                metrics=cs.ManagedClusterAzureMonitorProfileMetricsArgs(enabled=True),
            ) if args.prometheus_metrics else None,
            workload_auto_scaler_profile=cs.ManagedClusterWorkloadAutoScalerProfileArgs(
                keda=cs.ManagedClusterWorkloadAutoScalerProfileKedaArgs(enabled=True)) if args.keda else None,
            ai_toolchain_operator_profile=cs.ManagedClusterAIToolchainOperatorProfileArgs(enabled=True)
            if args.ai_toolchain_operator else None,
            agent_pool_profiles=[system],
            tags={**args.tags, **({SECURITY_EXCEPTION: SecurityException.OPEN_API_SERVER.value}
                                  if args.open_api_server else {})},
            # The autoscaler owns the system pool's count; GPU/CPU pools are separate AgentPool resources.
            # The reservation grants first: they take a while to reach AKS, which checks them when a pool joins
            # its group.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["agentPoolProfiles[0].count"],
                                        depends_on=[*args.after, *reservation_grants]),
        )

        # The CLI grants this on a BYO subnet; ARM does not. Without it the cloud provider cannot join load
        # balancers and NICs to the subnet (an internal LoadBalancer fails with LinkedAuthorizationFailed).
        self.network_contributor = roles.assign(f"{name}-network-contributor", roles.NETWORK_CONTRIBUTOR,
                     principal_id or cluster.identity.apply(lambda i: i.principal_id), args.node_subnet_id,
                     "AKS control plane manages load balancers and IPs in the node subnet (concepts-network).", self)
        self.deployer_admin = None
        if args.deployer_object_id is not None:
            self.deployer_admin = roles.assign(
                f"{name}-deployer-admin", roles.AKS_RBAC_CLUSTER_ADMIN, args.deployer_object_id, cluster.id,
                "Lets the identity running pulumi up manage Kubernetes objects (Azure RBAC).", self,
                principal_type=args.deployer_principal_type)

        kubelet = cluster.identity_profile.apply(lambda p: p["kubeletidentity"])
        self.kubelet_object_id = kubelet.apply(lambda k: k.object_id)
        self.kubelet_pull = None
        if args.registry_id is not None:
            self.kubelet_pull = roles.assign(
                f"{name}-acrpull", roles.ACR_PULL, self.kubelet_object_id, args.registry_id,
                "AKS kubelet identity pulls images (az aks --attach-acr).", self,
                # The registry component held this grant until 2026-11: existing stacks keep their assignment.
                aliases=[pulumi.Alias(name="registry-acrpull",
                                      parent=pulumi.create_urn("registry", "aksgpu:azure:Registry"))])

        if args.maintenance_window is not None:
            self._maintenance(name, args, args.maintenance_window, cluster)

        self.runner_dns_link = None
        if args.private and args.runner_vnet_id is not None:
            self.runner_dns_link = privatedns.VirtualNetworkLink(
                f"{name}-api-zone-runner-link",
                resource_group_name=args.node_resource_group,
                # The private FQDN is <prefix>-<hash>.<zone>; AKS names the zone <guid>.privatelink.<region>.azmk8s.io.
                private_zone_name=cluster.private_fqdn.apply(api_server_zone),
                virtual_network_link_name="runner",
                virtual_network=privatedns.SubResourceArgs(id=args.runner_vnet_id),
                registration_enabled=False,
                location="global",
                tags=dict(args.tags),
                opts=pulumi.ResourceOptions(parent=self),
            )

        self.managed_cluster = cluster
        self.name = cluster.name
        self.id = cluster.id
        self.resource_group_name = pulumi.Output.from_input(args.resource_group_name)
        self.oidc_issuer_url = cluster.oidc_issuer_profile.apply(lambda p: p.issuer_url if p else "")
        self.register_outputs({
            "name": self.name,
            "id": self.id,
            "kubelet_object_id": self.kubelet_object_id,
            "oidc_issuer_url": self.oidc_issuer_url,
        })

    def _control_plane_identity(self, name: str, args: ClusterArgs
                                ) -> tuple[cs.ManagedClusterIdentityArgs, pulumi.Output[str] | None,
                                           list[authorization.RoleAssignment]]:
        """System-assigned, unless a pool takes reserved capacity: then a user-assigned identity with Contributor on
        each reservation group's resource group (system-assigned identities do not work for it)."""
        if not args.reservation_groups:
            return cs.ManagedClusterIdentityArgs(type=cs.ResourceIdentityType.SYSTEM_ASSIGNED), None, []
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity", resource_name_=args.control_plane_identity_name,
            resource_group_name=args.resource_group_name, location=args.location, tags=dict(args.tags),
            opts=pulumi.ResourceOptions(parent=self))
        groups = sorted({roles.resource_group_of(g) for g in args.reservation_groups})
        grants = [roles.assign(f"{name}-reservations-{i}", roles.CONTRIBUTOR, identity.principal_id, group,
                               "AKS associates node pools with capacity reservations here "
                               "(use-capacity-reservation-groups).", self)
                  for i, group in enumerate(groups)]
        return (cs.ManagedClusterIdentityArgs(type=cs.ResourceIdentityType.USER_ASSIGNED,
                                              user_assigned_identities=[identity.id]),
                identity.principal_id, grants)

    def _maintenance(self, name: str, args: ClusterArgs, window: MaintenanceWindow, cluster: cs.ManagedCluster
                     ) -> None:
        """The planned-maintenance windows of both upgrade channels (aks planned-maintenance: the configurations
        named ``aksManagedAutoUpgradeSchedule`` and ``aksManagedNodeOSUpgradeSchedule``, at least 4 hours)."""
        configs = ["aksManagedAutoUpgradeSchedule"]
        if args.node_os_upgrade_channel != NodeOsUpgradeChannel.UNMANAGED:
            configs.append("aksManagedNodeOSUpgradeSchedule")
        for config in configs:
            cs.MaintenanceConfiguration(
                f"{name}-{config}",
                resource_group_name=args.resource_group_name,
                resource_name_=cluster.name,
                config_name=config,
                maintenance_window=cs.MaintenanceWindowArgs(
                    schedule=cs.ScheduleArgs(weekly=cs.WeeklyScheduleArgs(day_of_week=window.day.value,
                                                                          interval_weeks=1)),
                    start_time=window.start_time, duration_hours=window.duration_hours,
                    utc_offset=window.utc_offset),
                opts=pulumi.ResourceOptions(parent=self))
