"""The Azure layer every scenario stands on: network, cluster, pools, registry, storage, Kubernetes access."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pulumi

from components import gpu_sharing
from components.cluster import Cluster, ClusterArgs
from components.kubernetes_access import KubernetesAccess, KubernetesAccessArgs
from components.network import Network, NetworkArgs
from components.node_pools import CpuNodePool, GpuNodePool, NodePoolArgs
from components.registry import Registry, RegistryArgs
from components.storage import BlobStorage, BlobStorageArgs
from stacks import outputs
from stacks.config import StackConfig


@dataclass
class AzureLayer:
    network: Network
    cluster: Cluster
    gpu_pools: dict[str, GpuNodePool]
    """By agent pool name."""
    cpu_pools: dict[str, CpuNodePool]
    registry: Registry | None
    storage: dict[str, BlobStorage]
    """By storage role (``input``, ``output``, ``ckpt``)."""
    kubernetes: KubernetesAccess


def private_services(cfg: StackConfig) -> list[str]:
    """Private Link services the stack's VNet must resolve."""
    services = []
    if cfg.registry.enabled and cfg.registry.private:
        services.append("registry")
    if cfg.storage.accounts and cfg.storage.private:
        services.append("blob")
    return services


def build_azure_layer(cfg: StackConfig) -> AzureLayer:
    """Declare the Azure resources of ``cfg``."""
    n, tags = cfg.naming, cfg.tags
    net = Network("net", NetworkArgs(
        resource_group_name=n.resource_group(), vnet_name=n.vnet(), location=cfg.location,
        address_space=cfg.network.address_space, node_subnet=cfg.network.node_subnet,
        endpoint_subnet=cfg.network.endpoint_subnet, tags=tags, private_services=private_services(cfg),
        resource_group_tags=cfg.resource_group_tags(dt.datetime.now(dt.timezone.utc)),
    ))
    cluster = Cluster("aks", ClusterArgs(
        resource_group_name=net.resource_group_name, location=cfg.location, cluster_name=n.cluster(),
        node_resource_group=n.node_resource_group(), dns_prefix=n.dns_prefix(),
        node_subnet_id=net.node_subnet_id, network=cfg.network, settings=cfg.cluster, tags=tags,
    ))
    pool_args = dict(cluster_name=cluster.name, resource_group_name=net.resource_group_name,
                     subnet_id=net.node_subnet_id, tags=tags)
    gpu_pools = {
        g.pool.name: GpuNodePool(f"gpu-{g.pool.name}", g, NodePoolArgs(
            **pool_args, extra_labels=gpu_sharing.node_labels(g)))
        for g in cfg.gpu_pools
    }
    cpu_pools = {p.name: CpuNodePool(f"cpu-{p.name}", p, NodePoolArgs(**pool_args)) for p in cfg.cpu_pools}

    registry = None
    if cfg.registry.enabled:
        registry = Registry("registry", RegistryArgs(
            resource_group_name=net.resource_group_name, location=cfg.location,
            registry_name=cfg.registry.name or n.registry(), sku=cfg.registry.sku,
            kubelet_object_id=cluster.kubelet_object_id, tags=tags,
            private=net.private_access if cfg.registry.private else None,
        ))

    storage = {
        a.role: BlobStorage(f"storage-{a.role}", BlobStorageArgs(
            resource_group_name=net.resource_group_name, location=cfg.location,
            account_name=a.name or n.storage_account(a.role), containers=a.containers, tags=tags,
            auth=cfg.storage.auth, sas_expiry_days=cfg.storage.sas_expiry_days,
            # Blob volumes mount with the kubelet identity in identity mode (no key or SAS anywhere).
            data_contributors=[cluster.kubelet_object_id] if cfg.storage.auth == "identity" else [],
            protect=a.protect, private=net.private_access if cfg.storage.private else None,
        ))
        for a in cfg.storage.accounts
    }

    access = KubernetesAccess("k8s", KubernetesAccessArgs(
        cluster=cluster.managed_cluster, cluster_name=cluster.name, resource_group_name=net.resource_group_name,
        login_mode=cfg.cluster.login_mode, local_accounts=cfg.cluster.local_accounts,
        wait_for=[cluster.deployer_admin] if cluster.deployer_admin else None,
        private=cfg.cluster.private,
    ))
    layer = AzureLayer(net, cluster, gpu_pools, cpu_pools, registry, storage, access)
    export_azure_outputs(cfg, layer)
    return layer


def export_azure_outputs(cfg: StackConfig, layer: AzureLayer) -> None:
    pulumi.export(outputs.RESOURCE_GROUP, layer.network.resource_group_name)
    pulumi.export(outputs.CLUSTER_NAME, layer.cluster.name)
    pulumi.export(outputs.KUBECONFIG, layer.kubernetes.kubeconfig)
    pulumi.export(outputs.OIDC_ISSUER_URL, layer.cluster.oidc_issuer_url)
    pulumi.export(outputs.GPU_POOLS, sorted(layer.gpu_pools))
    pulumi.export(outputs.CPU_POOLS, sorted(layer.cpu_pools))
    pulumi.export(outputs.GET_CREDENTIALS, pulumi.Output.concat(
        "az aks get-credentials --resource-group ", layer.network.resource_group_name,
        " --name ", layer.cluster.name, " && kubelogin convert-kubeconfig -l ", cfg.cluster.login_mode))
    if layer.registry is not None:
        pulumi.export(outputs.REGISTRY_LOGIN_SERVER, layer.registry.login_server)
    if layer.storage:
        pulumi.export(outputs.STORAGE_ACCOUNTS, {role: s.account_name for role, s in layer.storage.items()})
