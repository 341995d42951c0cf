"""Rules across keys of the platform's sections, each a generator of one-line errors (``ConfigError``).

A value that alone can be wrong is refused by its type (``schema.py``); what is here needs two keys or more: a
subnet inside the VNet, a pool's minimum below its maximum, a driver owner for every GPU pool. ``check`` runs them
all; the API server decision comes last, so a stack file with other mistakes reads those first.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from components.gpu.sizes import catalogue_freshness, lookup_gpu_size
from components.vocabulary import (
    GPU_NODE_OS_KUBERNETES,
    PRIVATE_DNS_ZONES,
    BuildMode,
    GpuDriver,
    NetworkPolicy,
    NodeOsUpgradeChannel,
    RegistrySku,
    SharingMode,
    UpgradeChannel,
)
from program.config.errors import ConfigError
from program.config.expiry import Lifetime
from program.config.keys import KEY_PREFIX
from program.config.schema import ClusterConfig, GpuPool, NetworkConfig, Pool, StackConfig

Problems = Iterator[ConfigError]

AKS_RESERVED_RANGES = tuple(ipaddress.ip_network(r) for r in
                            ("169.254.0.0/16", "172.30.0.0/16", "172.31.0.0/16", "192.0.2.0/24"))
"""Ranges AKS refuses for pods and services (concepts-network-cni-overview: reserved address ranges)."""
MAX_SERVICE_PREFIX = 12
"""The service range must be smaller than a /12 (concepts-network-azure-cni-overlay)."""
_RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/", "k8s.io/")
"""Labels AKS owns or refuses on node pools."""
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
GPU_FAMILIES = ("Standard_NC", "Standard_ND", "Standard_NV")
"""Azure's GPU VM families (N-series): never a system or CPU pool."""


def network(n: NetworkConfig) -> Problems:
    at = f"{KEY_PREFIX}network."
    # IPv4 only: the schema refuses other CIDRs (schema._cidr).
    vnet, nodes, endpoints = (ipaddress.IPv4Network(c) for c in (n.address_space, n.node_subnet, n.endpoint_subnet))
    pods, services = ipaddress.IPv4Network(n.pod_cidr), ipaddress.IPv4Network(n.service_cidr)
    for key, subnet in (("nodeSubnet", nodes), ("endpointSubnet", endpoints)):
        if not subnet.subnet_of(vnet):
            yield ConfigError(at + key, str(subnet), f"must lie inside network.addressSpace {vnet}")
    if nodes.overlaps(endpoints):
        yield ConfigError(at + "endpointSubnet", str(endpoints), f"overlaps network.nodeSubnet {nodes}")
    for key, net in (("podCidr", pods), ("serviceCidr", services)):
        if net.overlaps(vnet):
            yield ConfigError(at + key, str(net), f"must not overlap network.addressSpace {vnet}")
        if reserved := next((r for r in AKS_RESERVED_RANGES if net.overlaps(r)), None):
            yield ConfigError(at + key, str(net), f"overlaps {reserved}, which AKS reserves")
    if pods.overlaps(services):
        yield ConfigError(at + "serviceCidr", str(services), f"overlaps network.podCidr {pods}")
    if services.prefixlen <= MAX_SERVICE_PREFIX:
        yield ConfigError(at + "serviceCidr", str(services),
                          f"must be smaller than a /{MAX_SERVICE_PREFIX} (AKS refuses larger service ranges)")
    dns = ipaddress.ip_address(n.dns_service_ip)
    if dns not in services or dns in (services.network_address, services.network_address + 1):
        yield ConfigError(at + "dnsServiceIp", n.dns_service_ip,
                          f"must be inside network.serviceCidr {services}, not its first two addresses")


def pool(p: Pool, at: str) -> Problems:
    """``at``: the pool's key, e.g. ``aksgpu:gpuPools[0].``."""
    if p.min_count > p.max_count:
        yield ConfigError(at + "minCount", p.min_count, f"pool '{p.name}': must be <= maxCount {p.max_count}")
    elif not p.min_count <= p.initial_count <= p.max_count:
        yield ConfigError(at + "count", p.count,
                          f"pool '{p.name}': must be between minCount {p.min_count} and maxCount {p.max_count}")
    if not p.spot and p.spot_max_price != -1:
        yield ConfigError(at + "spotMaxPrice", p.spot_max_price, f"pool '{p.name}': only applies with priority spot")
    for k, v in p.labels.items():
        if not _LABEL_KEY.match(k) or k.startswith(_RESERVED_LABEL_PREFIXES):
            yield ConfigError(f"{at}labels.{k}", v, "label keys must be valid Kubernetes names outside "
                              "kubernetes.azure.com/, kubernetes.io/ and k8s.io/")
        elif not _LABEL_VALUE.match(v):
            yield ConfigError(f"{at}labels.{k}", v, "label values are up to 63 letters, digits, '-', '_', '.'")


def cpu_size(p: Pool, at: str, where: str) -> Problems:
    if p.vm_size.startswith(GPU_FAMILIES):
        yield ConfigError(at + "vmSize", p.vm_size, f"GPU sizes belong in gpuPools, not {where}")


def gpu_pool(g: GpuPool, at: str) -> Problems:
    size, mode, name = g.size, g.sharing.mode, g.name
    sharing = f"{at}sharing."
    if size.grid and g.gpu_driver.operator_owned:
        yield ConfigError(at + "driver", g.gpu_driver,
                          f"{size.name} needs the GRID driver that only AKS installs; use driver install")
    if mode.has_replicas and g.sharing.shares < 2:
        yield ConfigError(sharing + "replicas", g.sharing.replicas, f"pool '{name}': {mode} needs replicas >= 2")
    if not mode.has_replicas and g.sharing.shares != 1:
        yield ConfigError(sharing + "replicas", g.sharing.replicas,
                          f"pool '{name}': replicas only apply to time-slicing or mps, not {mode}")
    if mode in (SharingMode.MIG, SharingMode.MPS) and size.grid:
        yield ConfigError(sharing + "mode", mode, f"pool '{name}': {size.gpu_model} ({size.name}) does not support "
                          f"{mode}")
    elif mode == SharingMode.MIG and not size.mig:
        yield ConfigError(sharing + "mode", mode, f"pool '{name}': MIG needs a MIG-capable size (A100, H100), not "
                          f"{size.gpu_model} ({size.name})")
    elif mode == SharingMode.MIG and g.sharing.mig_profile is None:
        yield ConfigError(sharing + "migProfile", None, f"pool '{name}': mode mig needs a profile such as MIG1g")
    elif mode == SharingMode.MIG and g.gpu_driver != GpuDriver.INSTALL:
        # AKS partitions MIG GPUs (gpuInstanceProfile) as part of its own driver setup.
        yield ConfigError(at + "driver", g.gpu_driver, f"pool '{name}': MIG pools need driver install")
    if g.capacity_reservation_group and g.spot:
        yield ConfigError(at + "capacityReservationGroup", g.capacity_reservation_group,
                          f"pool '{name}': reserved capacity holds regular VMs; a spot pool cannot take it (set "
                          "priority regular)")
    if mode != SharingMode.MIG and g.sharing.mig_profile is not None:
        yield ConfigError(sharing + "migProfile", g.sharing.mig_profile,
                          f"pool '{name}': a MIG profile needs mode mig; MIG and {mode} do not mix on one pool")


def offered(g: GpuPool, at: str, location: str) -> Problems:
    """What the refreshed catalogue knows of where and how Azure offers the size (nothing before a refresh; the
    capacity preflight asks Azure itself)."""
    size = g.size
    if size.regions is not None and location not in size.regions:
        where = ", ".join(sorted(size.regions)[:6]) or "none"
        yield ConfigError(at + "vmSize", g.vm_size, f"pool '{g.name}': not offered in location {location} "
                          f"({catalogue_freshness()}); regions that offer it: {where}")
    elif size.regions is not None and (missing := [z for z in g.zones if z not in size.regions[location]]):
        yield ConfigError(at + "zones", list(g.zones), f"pool '{g.name}': {g.vm_size} is not offered in zone(s) "
                          f"{', '.join(missing)} of {location}; it is in zones: "
                          f"{', '.join(size.regions[location]) or 'none (leave zones empty)'}")
    if g.spot and size.spot is False:
        yield ConfigError(at + "priority", g.priority, f"pool '{g.name}': {g.vm_size} cannot run as spot (Resource "
                          "SKUs: not LowPriorityCapable); use priority regular")


def node_auto_provisioning(cfg: StackConfig) -> Problems:
    """What AKS refuses or NAP cannot do (node-auto-provisioning: limitations; node-auto-provisioning-networking)."""
    for i, g in enumerate(cfg.gpu_pools):
        at = f"{KEY_PREFIX}gpuPools[{i}]."
        if not g.nap:
            if g.alternative_vm_sizes:
                yield ConfigError(at + "alternativeVmSizes", list(g.alternative_vm_sizes),
                                  f"pool '{g.name}': only a provisioning nap pool picks among sizes")
            continue
        if g.min_count:
            yield ConfigError(at + "minCount", g.min_count, f"pool '{g.name}': NAP creates nodes for pending pods "
                              "only; use 0, or provisioning autoscaler for nodes that stay")
        if g.count is not None:
            yield ConfigError(at + "count", g.count, f"pool '{g.name}': NAP starts no nodes of its own, it creates "
                              "them for pending pods; remove count, or use provisioning autoscaler")
        for size in g.alternative_vm_sizes:
            other = lookup_gpu_size(size)
            if (other.gpu_model, other.gpus) != (g.size.gpu_model, g.size.gpus):
                yield ConfigError(at + "alternativeVmSizes", size, f"pool '{g.name}': has {other.gpus} × "
                                  f"{other.gpu_model}, vmSize {g.vm_size} {g.size.gpus} × {g.size.gpu_model}; the "
                                  "GPU software and quotas take every node of a pool as the same")
        if g.spot_max_price != -1:
            yield ConfigError(at + "spotMaxPrice", g.spot_max_price, f"pool '{g.name}': NAP buys spot at up to the "
                              "on-demand price; a cap needs provisioning autoscaler")
        if g.capacity_reservation_group:
            yield ConfigError(at + "capacityReservationGroup", g.capacity_reservation_group,
                              f"pool '{g.name}': reserved capacity goes to agent pools; use provisioning autoscaler")
        if g.sharing.mode == SharingMode.MIG:
            yield ConfigError(at + "sharing.mode", g.sharing.mode, f"pool '{g.name}': AKS partitions MIG GPUs for "
                              "agent pools only; use provisioning autoscaler")
    if not cfg.node_auto_provisioning:
        return
    if cfg.cluster.network_policy != NetworkPolicy.CILIUM:
        yield ConfigError(f"{KEY_PREFIX}cluster.networkPolicy", cfg.cluster.network_policy,
                          "node auto-provisioning runs on Azure CNI overlay with the Cilium dataplane; Calico is not "
                          "supported")
    # AKS enables NAP only on clusters without the cluster autoscaler: every agent pool keeps a fixed size.
    fixed = [("cluster.systemPool", cfg.cluster.system_pool),
             *((f"gpuPools[{i}]", g) for i, g in enumerate(cfg.gpu_pools) if not g.nap),
             *((f"cpuPools[{i}]", c) for i, c in enumerate(cfg.cpu_pools))]
    for key, p in fixed:
        if p.min_count != p.max_count:
            yield ConfigError(f"{KEY_PREFIX}{key}.maxCount", p.max_count,
                              f"pool '{p.name}': with node auto-provisioning no "
                              f"pool may autoscale; fix its size (maxCount = minCount {p.min_count}) or make it a nap "
                              "pool")


def pools(cfg: StackConfig) -> Problems:
    system, at = cfg.cluster.system_pool, f"{KEY_PREFIX}cluster.systemPool."
    yield from pool(system, at)
    yield from cpu_size(system, at, "cluster.systemPool")
    if system.spot:
        yield ConfigError(at + "priority", "spot", "the system pool must be regular (AKS refuses spot system pools)")
    if system.min_count < 1:
        yield ConfigError(at + "minCount", system.min_count, "the system pool needs at least 1 node")
    for i, g in enumerate(cfg.gpu_pools):
        yield from pool(g, f"{KEY_PREFIX}gpuPools[{i}].")
        yield from gpu_pool(g, f"{KEY_PREFIX}gpuPools[{i}].")
        yield from offered(g, f"{KEY_PREFIX}gpuPools[{i}].", cfg.location)
    version = cfg.cluster.kubernetes_version
    if version is not None and any(g.gpu_driver.operator_owned for g in cfg.gpu_pools):
        (low, high), minor = GPU_NODE_OS_KUBERNETES, tuple(int(n) for n in version.split(".")[:2])
        if not low <= minor <= high:
            yield ConfigError(f"{KEY_PREFIX}cluster.kubernetesVersion", version,
                              f"GPU nodes whose driver the GPU operator installs run Ubuntu 24.04, which AKS's "
                              f"Ubuntu is on Kubernetes {low[0]}.{low[1]} to {high[0]}.{high[1]} (or give the GPU "
                              "pools driver: install)")
    for i, c in enumerate(cfg.cpu_pools):
        yield from pool(c, f"{KEY_PREFIX}cpuPools[{i}].")
        yield from cpu_size(c, f"{KEY_PREFIX}cpuPools[{i}].", "cpuPools")
    seen = {system.name: f"{KEY_PREFIX}cluster.systemPool"}
    for key, group in (("gpuPools", cfg.gpu_pools), ("cpuPools", cfg.cpu_pools)):
        for i, p in enumerate(group):
            where = f"{KEY_PREFIX}{key}[{i}].name"
            if p.name in seen:
                yield ConfigError(where, p.name, f"pool names must be unique; {seen[p.name]} already uses it")
            seen[p.name] = where


def cluster(c: ClusterConfig) -> Problems:
    at = f"{KEY_PREFIX}cluster."
    for i, r in enumerate(c.authorized_ip_ranges):
        if ipaddress.ip_network(r).prefixlen == 0:
            yield ConfigError(f"{at}authorizedIpRanges[{i}]", r,
                              "must not open the API server to every address; list your egress CIDRs")
    if c.private and c.authorized_ip_ranges:
        yield ConfigError(at + "authorizedIpRanges", list(c.authorized_ip_ranges),
                          "must be empty when cluster.private is true (a private API server has no public ranges)")
    if c.open_api_server and (c.private or c.authorized_ip_ranges):
        yield ConfigError(at + "openApiServer", True,
                          "contradicts cluster.private or cluster.authorizedIpRanges; set only one of the three")
    if c.upgrade_channel == UpgradeChannel.NODE_IMAGE and c.node_os_upgrade_channel != NodeOsUpgradeChannel.NODE_IMAGE:
        # auto-upgrade-node-os-image: the node OS channel cannot be changed while the cluster channel is node-image.
        yield ConfigError(at + "nodeOsUpgradeChannel", c.node_os_upgrade_channel,
                          "must be NodeImage while cluster.upgradeChannel is node-image (AKS forces it)")


def storage(cfg: StackConfig) -> Problems:
    at = f"{KEY_PREFIX}storage.accounts"
    roles: dict[str, int] = {}
    names: dict[str | None, int] = {}  # None (a derived name) is never compared
    containers: dict[str, str] = {}
    for i, account in enumerate(cfg.storage.accounts):
        if account.role in roles:
            yield ConfigError(f"{at}[{i}].role", account.role, "each storage account needs its own role")
        roles[account.role] = i
        if account.name is not None and account.name in names:
            yield ConfigError(f"{at}[{i}].name", account.name, "each storage account needs its own name")
        names[account.name] = i
        # Every container becomes a claim of the same name in the scenario's namespace: names must not repeat.
        for j, container in enumerate(account.container_names):
            where = f"{at}[{i}].containers[{j}]"
            if container in containers:
                yield ConfigError(where, container, f"container names must be unique in the stack; "
                                  f"{containers[container]} already uses it (each becomes a volume claim of that name)")
            containers[container] = where


def add_ons(cfg: StackConfig) -> Problems:
    addons, monitoring = cfg.addons, cfg.monitoring
    if cfg.registry.private and cfg.registry.sku != RegistrySku.PREMIUM:
        yield ConfigError(f"{KEY_PREFIX}registry.sku", cfg.registry.sku,
                          "registry.private needs Premium (private endpoints are Premium-only)")
    if not monitoring.enabled and (monitoring.grafana or monitoring.alert_email):
        key = "grafana" if monitoring.grafana else "alertEmail"
        yield ConfigError(f"{KEY_PREFIX}monitoring.{key}", monitoring.grafana or monitoring.alert_email,
                          "needs monitoring.enabled (Grafana and alerts read the managed Prometheus workspace)")
    # Exactly one driver owner per GPU node: AKS (driver install) or the GPU operator (precompiled or none).
    for i, g in enumerate(cfg.gpu_pools):
        if g.gpu_driver.operator_owned and not addons.gpu_operator:
            yield ConfigError(f"{KEY_PREFIX}gpuPools[{i}].driver", g.gpu_driver,
                              f"pool '{g.name}': nothing installs the GPU driver while addons.gpuOperator is false; "
                              "use driver install or enable the operator")
    if addons.network_operator:
        if not (addons.nfd and addons.gpu_operator):
            yield ConfigError(f"{KEY_PREFIX}addons.networkOperator", True,
                              "needs addons.nfd (its rule labels the InfiniBand "
                              "nodes) and addons.gpuOperator (GPUDirect RDMA is the operator driver's)")
        ib = [(i, g) for i, g in enumerate(cfg.gpu_pools) if g.size.infiniband]
        if not ib:
            yield ConfigError(f"{KEY_PREFIX}addons.networkOperator", True,
                              "no GPU pool has InfiniBand (ND sizes such as "
                              "Standard_ND96isr_H100_v5): nothing for the Network Operator to serve")
        for i, g in ib:
            if not g.gpu_driver.operator_owned:
                yield ConfigError(f"{KEY_PREFIX}gpuPools[{i}].driver", g.gpu_driver,
                                  f"pool '{g.name}': GPUDirect RDMA registers GPU memory through DMA-BUF with the "
                                  "open kernel modules the GPU operator loads; use driver precompiled or none")
    if addons.smoke_test and not addons.gpu_operator:
        yield ConfigError(f"{KEY_PREFIX}addons.smokeTest", True,
                          "the smoke test needs the GPU operator's device plugin (addons.gpuOperator)")
    if addons.blob_csi and cfg.cluster.managed_blob_csi_driver:
        yield ConfigError(f"{KEY_PREFIX}cluster.managedBlobCsiDriver", True,
                          "addons.blobCsi already installs the Blob CSI driver; enable one of them, not both")
    if cfg.storage.accounts and not (addons.blob_csi or cfg.cluster.managed_blob_csi_driver):
        yield ConfigError(f"{KEY_PREFIX}addons.blobCsi", False, "storage.accounts are mounted as blob volumes; enable "
                          "addons.blobCsi or cluster.managedBlobCsiDriver")
    # A quick ACR Task run builds on ACR's shared public agents: it cannot push into a registry whose public access
    # is off, and the trusted-services bypass does not cover it (manage-network-bypass-policy-for-tasks).
    if cfg.registry.enabled and cfg.registry.private and cfg.build.mode == BuildMode.ACR:
        yield ConfigError(f"{KEY_PREFIX}build.mode", cfg.build.mode,
                          "an ACR Task run cannot push into a private registry (registry.private); use build.mode "
                          "local from a machine in the VNet, which reaches the registry's private endpoint")
    if addons.keda and not monitoring.enabled:
        yield ConfigError(f"{KEY_PREFIX}addons.keda", True, "KEDA scales on metrics from managed Prometheus; enable "
                          "monitoring or set addons.keda false")


def unknown_gpu_pool(cfg: StackConfig, key: str, name: str | None) -> Problems:
    """For a scenario's ``pool`` key: the error when it names no GPU pool of the stack."""
    names = [g.name for g in cfg.gpu_pools]
    if name is not None and name not in names:
        yield ConfigError(key, name, f"must name a GPU pool of this stack: {', '.join(names) or 'none'}")


def api_server_decision(c: ClusterConfig) -> Problems:
    """Who may reach the API server is a decision each stack makes, never a default (security baseline: private or
    authorized ranges)."""
    if not (c.private or c.authorized_ip_ranges or c.open_api_server):
        yield ConfigError(f"{KEY_PREFIX}cluster.authorizedIpRanges", [],
                          "leaves the public API server open to every address; list your egress CIDRs, set "
                          "cluster.private: true, or accept an open (Entra ID-guarded) server with "
                          "cluster.openApiServer: true")


def runner_network(cfg: StackConfig) -> Problems:
    at, n = f"{KEY_PREFIX}network.", cfg.network
    if n.runner_vnet_id and not cfg.private_endpoints_or_api_server:
        yield ConfigError(at + "runnerVnetId", n.runner_vnet_id,
                          "links a runner to private endpoints and a private API server; this stack has none "
                          "(cluster.private, registry.private, storage.private)")
    if n.runner_address_spaces and not n.runner_vnet_id:
        yield ConfigError(at + "runnerAddressSpaces", list(n.runner_address_spaces),
                          "describes the VNet of network.runnerVnetId, which this stack does not name")
    space = ipaddress.IPv4Network(n.address_space)
    for runner in n.runner_address_spaces:
        if space.overlaps(ipaddress.IPv4Network(runner)):
            # Peered VNets "must have nonoverlapping IP address spaces" (virtual-network-manage-peering).
            yield ConfigError(at + "addressSpace", n.address_space,
                              f"overlaps {runner} of the runner VNet (network.runnerAddressSpaces), which it peers; "
                              "Azure peers a VNet only with address spaces that do not overlap")


_PRIVATE_SWITCH = {"registry": "registry.private", "blob": "storage.private"}
"""The key that makes each Private Link service private."""


def private_dns_zones(cfg: StackConfig) -> Problems:
    """Each zone named in ``network.privateDnsZoneIds`` resolves a service the stack makes private, and is that
    service's zone (the names Azure documents, private-endpoint-dns)."""
    at = f"{KEY_PREFIX}network.privateDnsZoneIds."
    for service, zone_id in cfg.network.private_dns_zone_ids.items():
        zone = zone_id.rsplit("/", 1)[1]
        if service not in cfg.private_services:
            yield ConfigError(at + service, zone_id, f"this stack makes no private {service} endpoint "
                              f"({_PRIVATE_SWITCH[service]} is false); remove it, or set {_PRIVATE_SWITCH[service]}")
        elif zone.lower() != PRIVATE_DNS_ZONES[service]:
            yield ConfigError(at + service, zone_id, f"names zone {zone}; a private {service} endpoint resolves "
                              f"through {PRIVATE_DNS_ZONES[service]}")


@dataclass(frozen=True)
class Clash:
    """What two stack files would make Azure refuse together, and which of them is to change."""

    stacks: tuple[str, ...]
    """The stack whose file is to change, or both where neither is known to be the new one (which one is deployed
    cannot be told offline)."""
    error: ConfigError


KEEP_DEPLOYED = "a deployed stack keeps its own: changing it replaces its VNet, and its cluster with it"


def between_stacks(stacks: Mapping[str, StackConfig], new: Collection[str] = ()) -> list[Clash]:
    """What stack files deployed side by side would make Azure refuse. ``new``: the stacks whose config is new (the
    one ``offline new-stack`` writes, the one ``offline render --config`` gives), which a clash with another is put
    on; a clash between two others names both and tells neither to change what may be deployed."""
    return [*_shared_runner(stacks, set(new)), *_zones_of_demos(stacks)]


def _shared_runner(stacks: Mapping[str, StackConfig], new: set[str]) -> Iterator[Clash]:
    """Two stack files that peer one runner VNet (``network.runnerVnetId``): address spaces that overlap (peered
    VNets "must have nonoverlapping IP address spaces", virtual-network-manage-peering; the runner's second peering
    with an overlapping space is refused as overlapping one "already peered", reported by users), and two zones of
    one name linked to the runner (CreateOrUpdateVirtualNetworkLinkFailed: "A virtual network cannot be linked to
    multiple zones with overlapping namespaces")."""
    peered: dict[str, list[tuple[str, StackConfig]]] = {}
    for name, cfg in stacks.items():
        if cfg.network.runner_vnet_id is not None:
            peered.setdefault(cfg.network.runner_vnet_id.lower(), []).append((name, cfg))
    for group in peered.values():
        for i, (name, cfg) in enumerate(group):
            for other, earlier in group[:i]:
                mine = [s for s in (name, other) if s in new]
                if len(mine) == 1:
                    this, that = (name, cfg), (other, earlier)
                    if mine[0] == other:
                        this, that = that, this
                    yield from _runner_clash(this, that)
                else:
                    yield from _runner_clash_of_both((other, earlier), (name, cfg))


def _zone_id(cfg: StackConfig, zone: str) -> str:
    return (f"/subscriptions/<subscription>/resourceGroups/{cfg.naming.resource_group()}/providers/"
            f"Microsoft.Network/privateDnsZones/{zone}")


def _overlap(one: StackConfig, two: StackConfig) -> bool:
    return ipaddress.IPv4Network(one.network.address_space).overlaps(ipaddress.IPv4Network(two.network.address_space))


def _own_zones_both_link(mine: StackConfig, other: StackConfig) -> Iterator[tuple[str, str]]:
    """(service, zone) of each of ``mine``'s private services whose zone both stacks link, as their own, to the
    runner VNet."""
    for service in mine.private_services:
        zone = PRIVATE_DNS_ZONES[service]
        if zone in mine.runner_zones and zone in other.runner_zones:
            yield service, zone


def _runner_clash(this: tuple[str, StackConfig], that: tuple[str, StackConfig]) -> Iterator[Clash]:
    """Clashes on the new stack ``this``, beside the stack ``that``, which may be deployed."""
    (name, cfg), (other, earlier) = this, that
    at = f"{KEY_PREFIX}network."
    if _overlap(cfg, earlier):
        yield Clash((name,), ConfigError(
            at + "addressSpace", cfg.network.address_space,
            f"overlaps {earlier.network.address_space} of stack {other}, which peers the same runner VNet; Azure "
            "peers a VNet only with address spaces that do not overlap: give this new stack a free one "
            f"(python -m offline new-stack picks one); {KEEP_DEPLOYED}"))
    for service, zone in _own_zones_both_link(cfg, earlier):
        instead = (f"name a hub's (stack {other} is a demo: its zone goes when the expiry destroys it)"
                   if earlier.lifetime == Lifetime.DEMO else f"name that zone ({_zone_id(earlier, zone)}) or a hub's")
        yield Clash((name,), ConfigError(
            f"{at}privateDnsZoneIds.{service}", None,
            f"stack {other} already links its own {zone} to the same runner VNet, and a VNet is linked to one "
            f"zone of a name: {instead}"))


def _runner_clash_of_both(first: tuple[str, StackConfig], second: tuple[str, StackConfig]) -> Iterator[Clash]:
    """Clashes between two stack files of which neither is known to be new."""
    (a, one), (b, two) = first, second
    at, both = f"{KEY_PREFIX}network.", (a, b)
    if _overlap(one, two):
        yield Clash(both, ConfigError(
            at + "addressSpace", two.network.address_space,
            f"stacks {a} ({one.network.address_space}) and {b} ({two.network.address_space}) peer the same runner "
            "VNet with overlapping address spaces, which Azure refuses: give the one not deployed yet a free one "
            f"(python -m offline new-stack picks one); {KEEP_DEPLOYED}"))
    for service, zone in _own_zones_both_link(two, one):
        yield Clash(both, ConfigError(
            f"{at}privateDnsZoneIds.{service}", None,
            f"stacks {a} and {b} both link their own {zone} to the same runner VNet, and a VNet is linked to one "
            f"zone of a name: the one not deployed yet names the other's ({_zone_id(one, zone)} or "
            f"{_zone_id(two, zone)}) or a hub's"))


def _zones_of_demos(stacks: Mapping[str, StackConfig]) -> Iterator[Clash]:
    """A stack that names a zone in a demo stack's resource group (``network.privateDnsZoneIds``) ties the two
    lifetimes the hourly expiry does not know of: the demo's destroy deletes its zones, which Azure refuses while
    another VNet is still linked to them (Azure/deployment-stacks#227, Azure/azure-cli#15010), so it fails every hour
    until the other stack is gone. Put on the stack that names the zone."""
    groups = {cfg.naming.resource_group().lower(): (name, cfg) for name, cfg in stacks.items()}
    for name, cfg in stacks.items():
        for service, zone_id in sorted(cfg.network.private_dns_zone_ids.items()):
            owner = groups.get(zone_id.split("/")[4].lower())
            if owner is None or owner[0] == name or owner[1].lifetime != Lifetime.DEMO:
                continue
            yield Clash((name,), ConfigError(
                f"{KEY_PREFIX}network.privateDnsZoneIds.{service}", zone_id,
                f"is in stack {owner[0]}'s resource group, and {owner[0]} is a demo: the expiry destroys it after its "
                "ttlHours, and Azure refuses to delete a zone another VNet is still linked to, so that destroy would "
                f"fail every hour while this stack lives; name a hub's zone, or make {owner[0]} long-lived "
                "(aksgpu:lifetime)"))


def check(cfg: StackConfig) -> list[ConfigError]:
    """Every rule but the API server decision (the loader runs that one last, after the scenario's)."""
    return [*network(cfg.network), *pools(cfg), *node_auto_provisioning(cfg), *cluster(cfg.cluster), *storage(cfg),
            *add_ons(cfg), *runner_network(cfg), *private_dns_zones(cfg)]
