"""The Azure layer every scenario stands on: network, cluster, pools, registry, storage, Kubernetes access."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization

from components.autoscaling.keda import (
    KEDA_NAMESPACE,
    KEDA_OPERATOR,
    SCALEDOBJECT_CRD,
    TRIGGERAUTHENTICATION_CRD,
)
from components.azure import roles
from components.azure.cluster import Cluster, ClusterArgs
from components.azure.network import Network, NetworkArgs
from components.azure.node_pools import CpuNodePool, GpuNodePool, NodePoolArgs, PoolNodes
from components.azure.node_provisioning import NODECLASS_CRD, NODEPOOL_CRD, GpuPoolComponent, NapGpuPool, NapPoolArgs
from components.azure.registry import Registry, RegistryArgs
from components.azure.storage import BlobStorage, BlobStorageArgs, DataGrant
from components.gpu import sharing
from components.gpu.gate import GATE_TAINT
from components.identity.workload_identity import Grant, WorkloadIdentity, WorkloadIdentityArgs
from components.images.digest import RegistryAccess
from components.kubernetes.access import KubernetesAccess, KubernetesAccessArgs
from components.monitoring.alert_rules import gpu_alert_rules
from components.monitoring.autoscaler_logs import AutoscalerLogs, AutoscalerLogsArgs
from components.monitoring.gpu_scraping import PODMONITOR_CRD
from components.monitoring.managed_prometheus import GrafanaAccess, ManagedPrometheus, ManagedPrometheusArgs
from program import outputs
from program.config.schema import GpuPool, Pool, StackConfig
from program.needs import Needs
from program.outputs import Outputs


@dataclass
class AzureLayer:
    network: Network
    cluster: Cluster
    gpu_pools: dict[str, GpuPoolComponent]
    """By pool name, in config order: agent pools, or NodePools of node auto-provisioning."""
    cpu_pools: dict[str, CpuNodePool]
    registry: Registry | None
    storage: dict[str, BlobStorage]
    """By storage role (``input``, ``output``, ``ckpt``)."""
    kubernetes: KubernetesAccess
    metrics: ManagedPrometheus | None = None
    """Managed Prometheus, its alert rules and Grafana (``monitoring.enabled``)."""
    autoscaler_logs: AutoscalerLogs | None = None
    """The cluster autoscaler's logs in Log Analytics (``monitoring.autoscalerLogs``)."""
    keda_identity: WorkloadIdentity | None = None
    """What the KEDA add-on reads the workspace's metrics as (``addons.keda``)."""

    @property
    def registry_access(self) -> RegistryAccess:
        """The registry as images need it: pods wait for the kubelet's pull grant, and ``pulumi up``'s machine for
        what it needs before it talks to the registry's data plane (pushes, digests): a private registry's endpoint
        and DNS record, and the runner's peering and DNS links."""
        if self.registry is None:
            raise ValueError("images need the stack's registry (scenario checks require registry.enabled)")
        link = self.registry.private_link
        return RegistryAccess(self.registry.name, self.registry.login_server, self.cluster.kubelet_pull,
                              [link, *self.network.runner_links] if link is not None else [])

    @property
    def kubernetes_opts(self) -> pulumi.ResourceOptions:
        """Every in-cluster component uses the stack's one Kubernetes provider."""
        return pulumi.ResourceOptions(providers=[self.kubernetes.provider])


def pool_nodes(pool: Pool, autoscale: bool = True) -> PoolNodes:
    """A pool from config as its component takes it; ``autoscale`` off in a cluster with node auto-provisioning."""
    return PoolNodes(name=pool.name, vm_size=pool.vm_size, min_count=pool.min_count, max_count=pool.max_count,
                     count=pool.initial_count, spot=pool.spot, spot_max_price=pool.spot_max_price,
                     labels=dict(pool.labels), os_disk_size_gb=pool.os_disk_size_gb, zones=tuple(pool.zones),
                     capacity_reservation_group_id=getattr(pool, "capacity_reservation_group", None),
                     autoscale=autoscale)


def autoscaler_profile(cfg: StackConfig) -> dict[str, str]:
    """The config's autoscaler section by the SDK's argument names."""
    a = cfg.cluster.autoscaler
    return {"scan_interval": a.scan_interval, "scale_down_unneeded_time": a.scale_down_unneeded_time,
            "scale_down_delay_after_add": a.scale_down_delay_after_add,
            "max_node_provision_time": a.max_node_provision_time, "expander": a.expander.value,
            "skip_nodes_with_local_storage": str(a.skip_nodes_with_local_storage).lower()}


def node_pools(cfg: StackConfig, cluster: Cluster, net: Network
               ) -> tuple[dict[str, GpuNodePool], dict[str, CpuNodePool]]:
    """The user agent pools, GPU pools first, each created after the one before it (NAP pools are not agent pools:
    ``nap_pools`` makes them)."""
    gpu_pools: dict[str, GpuNodePool] = {}
    cpu_pools: dict[str, CpuNodePool] = {}
    previous = None
    for pool in (*(g for g in cfg.gpu_pools if not g.nap), *cfg.cpu_pools):
        args = NodePoolArgs(nodes=pool_nodes(pool, not cfg.node_auto_provisioning), cluster_name=cluster.name,
                            resource_group_name=net.resource_group_name, subnet_id=net.node_subnet_id,
                            tags=cfg.tags, after=previous)
        made: GpuNodePool | CpuNodePool
        if isinstance(pool, GpuPool):
            made = gpu_pools[pool.name] = GpuNodePool(f"gpu-{pool.name}", dataclasses.replace(
                args, gpu=pool.gpu, extra_labels=sharing.node_labels(pool.gpu)))
        else:
            made = cpu_pools[pool.name] = CpuNodePool(f"cpu-{pool.name}", args)
        previous = made.agent_pool
    return gpu_pools, cpu_pools


def nap_pools(cfg: StackConfig, net: Network, access: KubernetesAccess) -> dict[str, NapGpuPool]:
    """The GPU pools node auto-provisioning makes: a NodePool and an AKSNodeClass each, through the cluster's API."""
    return {g.name: NapGpuPool(f"gpu-{g.name}", NapPoolArgs(
        nodes=pool_nodes(g), vm_sizes=g.vm_sizes, gpu=g.gpu, location=cfg.location, subnet_id=net.node_subnet_id,
        tags=cfg.tags, extra_labels=sharing.node_labels(g.gpu),
        startup_taints=(GATE_TAINT,) if cfg.addons.gpu_node_gate and cfg.addons.gpu_operator else ()),
        opts=pulumi.ResourceOptions(
            providers=[access.provider])) for g in cfg.gpu_pools if g.nap}


def deployer_id(cfg: StackConfig, deployer: authorization.GetClientConfigResult) -> str:
    """Who deploys the stack: ``cluster.deployerObjectId``, else the identity running Pulumi. The workflows name the
    deploy app, so a pull request's preview, run as the preview app, shows the stack's role assignments as they are
    deployed rather than handed to the preview app."""
    return cfg.cluster.deployer_object_id or deployer.object_id


def build_azure_layer(cfg: StackConfig, needs: Needs, deployer: authorization.GetClientConfigResult,
                      preflight: bool = True) -> AzureLayer:
    """Declare the Azure resources of ``cfg`` and what the scenario's ``needs`` add (its deployer's blob access, its
    alert rules, its add-ons).

    ``deployer``: who runs ``pulumi up`` (the one client-config lookup of the program).
    ``preflight``: check the API server answers and the deployer's access works before any Kubernetes call; off
    only where no cluster exists (the offline render).
    """
    n, tags = cfg.naming, cfg.tags
    net = Network("net", NetworkArgs(
        resource_group_name=n.resource_group(), vnet_name=n.vnet(), location=cfg.location,
        address_space=cfg.network.address_space, node_subnet=cfg.network.node_subnet,
        endpoint_subnet=cfg.network.endpoint_subnet, tags=tags, private_services=cfg.private_services,
        resource_group_tags=cfg.resource_group_tags(dt.datetime.now(dt.UTC)),
        protect_group=any(a.protect for a in cfg.storage.accounts), runner_vnet_id=cfg.network.runner_vnet_id,
        shared_zone_ids={str(s): z for s, z in cfg.network.private_dns_zone_ids.items()},
        subscription_id=deployer.subscription_id,
    ))
    c = cfg.cluster
    # Registry and storage first: their private endpoints write to the VNet, which AKS then takes over.
    registry = None
    if cfg.registry.enabled:
        registry = Registry("registry", RegistryArgs(
            resource_group_name=net.resource_group_name, location=cfg.location,
            registry_name=cfg.registry_name, sku=cfg.registry.sku, tags=tags,
            private=net.private_access if cfg.registry.private else None,
        ))

    storage = {
        a.role: BlobStorage(f"storage-{a.role}", BlobStorageArgs(
            resource_group_name=net.resource_group_name, location=cfg.location,
            account_name=cfg.storage_account_name(a), containers=a.container_names, tags=tags,
            auth=cfg.storage.auth, sas_expiry_days=cfg.storage.sas_expiry_days,
            deployer=DataGrant(deployer_id(cfg, deployer), c.deployer_principal_type,
                               needs.deployer_blob_access[a.role])
            if c.grant_deployer_admin and a.role in needs.deployer_blob_access else None,
            protect=a.protect, private=net.private_access if cfg.storage.private else None,
        ))
        for a in cfg.storage.accounts
    }
    endpoints = [s.private_link for s in (registry, *storage.values()) if s is not None and s.private_link]

    cluster = Cluster("aks", ClusterArgs(
        resource_group_name=net.resource_group_name, location=cfg.location, cluster_name=n.cluster(),
        node_resource_group=n.node_resource_group(), dns_prefix=n.dns_prefix(),
        node_subnet_id=net.node_subnet_id, system_pool=pool_nodes(c.system_pool, not cfg.node_auto_provisioning),
        node_auto_provisioning=cfg.node_auto_provisioning, pod_cidr=cfg.network.pod_cidr,
        service_cidr=cfg.network.service_cidr, dns_service_ip=cfg.network.dns_service_ip, tags=tags,
        autoscaler=autoscaler_profile(cfg), kubernetes_version=c.kubernetes_version, sku_tier=c.sku_tier,
        private=c.private, authorized_ip_ranges=tuple(c.authorized_ip_ranges), open_api_server=c.open_api_server,
        local_accounts=c.local_accounts, admin_group_object_ids=tuple(c.admin_group_object_ids),
        network_policy=c.network_policy, upgrade_channel=c.upgrade_channel,
        node_os_upgrade_channel=c.node_os_upgrade_channel, managed_blob_csi_driver=c.managed_blob_csi_driver,
        maintenance_window=c.maintenance_window.window,
        deployer_object_id=deployer_id(cfg, deployer) if c.grant_deployer_admin else None,
        deployer_principal_type=c.deployer_principal_type, prometheus_metrics=cfg.monitoring.enabled,
        keda=cfg.addons.keda, ai_toolchain_operator=needs.ai_toolchain_operator,
        registry_id=registry.id if registry else None, runner_vnet_id=cfg.network.runner_vnet_id,
        reservation_groups=tuple(sorted({g.capacity_reservation_group for g in cfg.gpu_pools
                                         if g.capacity_reservation_group})),
        control_plane_identity_name=n.identity("aks"),
        after=[*net.vnet_writes, *endpoints],
    ))
    agent_pools, cpu_pools = node_pools(cfg, cluster, net)

    metrics, autoscaler_logs, keda_identity = _monitoring(cfg, net, cluster, deployer, needs)

    access = KubernetesAccess("k8s", KubernetesAccessArgs(
        cluster=cluster.managed_cluster, cluster_name=cluster.name, resource_group_name=net.resource_group_name,
        login_mode=cfg.cluster.login_mode, local_accounts=cfg.cluster.local_accounts,
        # The deployer's role for every call; the subnet role for LoadBalancer Services (LinkedAuthorizationFailed).
        wait_for=[cluster.network_contributor, *([cluster.deployer_admin] if cluster.deployer_admin else [])],
        preflight=preflight, private=cfg.cluster.private, add_on_crds=add_on_crds(cfg, needs),
        reachable_after=[*net.runner_links, *([cluster.runner_dns_link] if cluster.runner_dns_link else [])],
    ))
    made: dict[str, GpuPoolComponent] = {**agent_pools, **nap_pools(cfg, net, access)}
    gpu_pools = {g.name: made[g.name] for g in cfg.gpu_pools}  # config order
    return AzureLayer(net, cluster, gpu_pools, cpu_pools, registry, storage, access, metrics, autoscaler_logs,
                      keda_identity)


def add_on_crds(cfg: StackConfig, needs: Needs) -> tuple[str, ...]:
    """The add-on kinds this stack writes, which the cluster must serve before the first Kubernetes call."""
    crds = list(needs.add_on_kinds)
    if cfg.node_auto_provisioning:
        crds += [NODEPOOL_CRD, NODECLASS_CRD]
    if cfg.monitoring.enabled and cfg.addons.gpu_operator:
        crds.append(PODMONITOR_CRD)
    if cfg.addons.keda and cfg.monitoring.enabled and needs.autoscaled:
        crds += [SCALEDOBJECT_CRD, TRIGGERAUTHENTICATION_CRD]
    return tuple(crds)


def _monitoring(cfg: StackConfig, net: Network, cluster: Cluster, deployer: authorization.GetClientConfigResult,
                needs: Needs
                ) -> tuple[ManagedPrometheus | None, AutoscalerLogs | None, WorkloadIdentity | None]:
    """Managed Prometheus with the GPU alerts (and Grafana), the autoscaler's logs, KEDA's identity: each as
    config asks."""
    n, tags, group = cfg.naming, cfg.tags, net.resource_group_name
    metrics = autoscaler_logs = keda_identity = None
    if cfg.monitoring.enabled:
        metrics = ManagedPrometheus("metrics", ManagedPrometheusArgs(
            resource_group_name=group, location=cfg.location, workspace_name=n.monitor_workspace(),
            cluster_id=cluster.id, cluster_name=n.cluster(),
            rules=[*gpu_alert_rules(cfg.monitoring.idle_gpu_minutes, cfg.cluster.autoscaler.provision_minutes,
                                   cfg.addons.gpu_node_gate),
                   *needs.alert_rules],
            tags=tags, alert_email=cfg.monitoring.alert_email,
            grafana_name=n.grafana() if cfg.monitoring.grafana else None,
            grafana_admin=GrafanaAccess(deployer_id(cfg, deployer), cfg.cluster.deployer_principal_type)
            if cfg.cluster.grant_deployer_admin else None,
        ))
    if cfg.monitoring.autoscaler_logs:
        autoscaler_logs = AutoscalerLogs("autoscaler-logs", AutoscalerLogsArgs(
            resource_group_name=group, location=cfg.location, workspace_name=n.log_workspace(),
            cluster_id=cluster.id, tags=tags))
    if cfg.addons.keda and metrics is not None and needs.autoscaled:
        # The KEDA add-on's operator (kube-system/keda-operator) reads GPU utilisation as this identity.
        keda_identity = WorkloadIdentity("identity-keda", WorkloadIdentityArgs(
            identity_name=n.identity("keda"), resource_group_name=group, location=cfg.location,
            oidc_issuer_url=cluster.oidc_issuer_url, namespace_name=KEDA_NAMESPACE, service_account=KEDA_OPERATOR,
            grants=[Grant("metrics-reader", roles.MONITORING_DATA_READER, metrics.workspace_id,
                          "KEDA reads GPU utilisation from managed Prometheus to scale GPU workloads.")],
            tags=tags))
    return metrics, autoscaler_logs, keda_identity


def azure_outputs(cfg: StackConfig, layer: AzureLayer) -> Outputs:
    """The stack outputs every scenario has."""
    values: dict[str, pulumi.Input[object]] = {
        outputs.RESOURCE_GROUP: layer.network.resource_group_name,
        outputs.CLUSTER_NAME: layer.cluster.name,
        outputs.KUBECONFIG: layer.kubernetes.kubeconfig,
        outputs.OIDC_ISSUER_URL: layer.cluster.oidc_issuer_url,
        outputs.GPU_POOLS: sorted(layer.gpu_pools),
        outputs.CPU_POOLS: sorted(layer.cpu_pools),
        outputs.GET_CREDENTIALS: pulumi.Output.concat(
            "az aks get-credentials --resource-group ", layer.network.resource_group_name,
            " --name ", layer.cluster.name, " && kubelogin convert-kubeconfig -l ", cfg.cluster.login_mode.value),
    }
    if layer.registry is not None:
        values[outputs.REGISTRY_LOGIN_SERVER] = layer.registry.login_server
    if layer.storage:
        values[outputs.STORAGE_ACCOUNTS] = {role: s.account_name for role, s in layer.storage.items()}
    if layer.metrics is not None:
        values[outputs.PROMETHEUS_QUERY_ENDPOINT] = layer.metrics.query_endpoint
        if layer.metrics.grafana_endpoint is not None:
            values[outputs.GRAFANA_URL] = layer.metrics.grafana_endpoint
            values[outputs.IMPORT_GPU_DASHBOARD] = layer.metrics.import_dashboard_command
    return values
