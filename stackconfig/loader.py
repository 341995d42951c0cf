"""Read a stack's config once and validate it whole, before any resource is declared.

Every default comes from the dataclasses in ``stackconfig.schema``; this module only parses and checks. Each
error is one line naming the key, the bad value and what is allowed (``ConfigError``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Collection, Mapping
from typing import Any

from stackconfig import naming
from stackconfig import settings as scenario_settings
from stackconfig.expiry import Lifetime
from stackconfig.gpu_sizes import GpuSize, lookup_gpu_size
from stackconfig.reader import ConfigError, Section
from stackconfig.schema import (
    CPU_POOL_DEFAULTS,
    GPU_POOL_DEFAULTS,
    MIG_INSTANCES_PER_GPU,
    AddonsConfig,
    AutoscalerConfig,
    BuildConfig,
    BuildMode,
    ClusterConfig,
    Expander,
    Exposure,
    FunctionConfig,
    GpuDriver,
    GpuPoolConfig,
    LoginMode,
    MonitoringConfig,
    NetworkConfig,
    NetworkPolicy,
    NodeOsUpgradeChannel,
    PoolConfig,
    PrincipalType,
    Priority,
    RegistryConfig,
    RegistrySku,
    SharingConfig,
    SharingMode,
    SkuTier,
    StackConfig,
    StorageAccountConfig,
    StorageAuth,
    StorageConfig,
    UpgradeChannel,
    WorkloadsConfig,
)

MAX_TTL_HOURS = 720
MIG_PROFILES = tuple(MIG_INSTANCES_PER_GPU)
# Labels AKS owns or refuses on node pools.
_RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/", "k8s.io/")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_GPU_FAMILIES = ("Standard_NC", "Standard_ND", "Standard_NV")
"""Azure's GPU VM families (N-series): never a system or CPU pool."""
AKS_RESERVED_RANGES = tuple(ipaddress.ip_network(r) for r in
                            ("169.254.0.0/16", "172.30.0.0/16", "172.31.0.0/16", "192.0.2.0/24"))
"""Ranges AKS refuses for pods and services (concepts-network-cni-overview: reserved address ranges)."""
MAX_SERVICE_PREFIX = 12
"""The service range must be smaller than a /12 (concepts-network-azure-cni-overlay)."""
_MINUTES, _SECONDS = re.compile(r"[1-9]\d*m"), re.compile(r"[1-9]\d*s")
_AUTOSCALER_DURATIONS = (("scanInterval", "scan_interval", _SECONDS, "seconds, such as 10s"),
                         ("scaleDownUnneededTime", "scale_down_unneeded_time", _MINUTES, "minutes, such as 10m"),
                         ("scaleDownDelayAfterAdd", "scale_down_delay_after_add", _MINUTES, "minutes, such as 10m"),
                         ("maxNodeProvisionTime", "max_node_provision_time", _MINUTES, "minutes, such as 15m"))
"""AKS's autoscaler profile takes the three scale-down/provision times in whole minutes only and the scan
interval in seconds (ManagedClusterPropertiesAutoScalerProfile, API 2025-09-01)."""


def load_config(raw: Mapping[str, Any], project: str, stack: str, scenarios: Collection[str]) -> StackConfig:
    """Parse and validate the project's config namespace (keys without the ``aksgpu:`` prefix).

    ``scenarios`` are the registered scenario names the ``scenario`` key may take.
    """
    d = StackConfig(project=project, stack=stack)
    top = Section(dict(raw), f"{project}:")
    scenario = top.get("scenario", str, d.scenario)
    if scenario not in scenarios:
        raise ConfigError(top.key("scenario"), scenario, f"allowed: {', '.join(scenarios)}")
    environment = top.get("environment", str, d.environment) or stack
    owner = top.get("owner", str, d.owner)
    lifetime = top.choice("lifetime", Lifetime, d.lifetime)
    ttl_hours = top.get("ttlHours", int, d.ttl_hours)
    if not 1 <= ttl_hours <= MAX_TTL_HOURS:
        raise ConfigError(top.key("ttlHours"), ttl_hours, f"must be between 1 and {MAX_TTL_HOURS} (30 days); "
                          "set lifetime: long-lived for a stack that should not expire")
    location = top.get("location", str, d.location)
    if not re.fullmatch(r"[a-z][a-z0-9]+", location):
        raise ConfigError(top.key("location"), location, "must be an Azure region name such as eastus")
    root = top.get("nameRoot", str, d.name_root) or naming.root_from_stack(stack)
    if err := naming.name_root_error(root):
        raise ConfigError(top.key("nameRoot"), root, err)
    runner = top.get("ciRunner", str, d.ci_runner)
    if runner and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", runner):
        raise ConfigError(top.key("ciRunner"), runner, "must be one runner label: letters, digits, '.', '_', '-'")

    network = _network(top.section("network"))
    cluster = _cluster(top.section("cluster"))
    # An empty entry is the default pool: every field comes from GPU_POOL_DEFAULTS.
    gpu_pools = top.items("gpuPools", _gpu_pool, [{}])
    cpu_pools = top.items("cpuPools", _cpu_pool, [])
    registry = _registry(top.section("registry"))
    storage = _storage(top.section("storage"), default_private=cluster.private)
    addons = _addons(top.section("addons"), default_blob_csi=bool(storage.accounts))
    monitoring = _monitoring(top.section("monitoring"))
    build = _build(top.section("build"))
    function = _function(top.section("function"), gpu_pools, network)
    workloads = _workloads(top.section("workloads"))
    _check_unique_pool_names(top, cluster.system_pool, gpu_pools, cpu_pools)
    cfg = StackConfig(
        project=project, stack=stack, scenario=scenario, environment=environment, owner=owner,
        lifetime=lifetime, ttl_hours=ttl_hours, location=location, name_root=root, ci_runner=runner,
        network=network, cluster=cluster, gpu_pools=gpu_pools, cpu_pools=cpu_pools,
        registry=registry, storage=storage, addons=addons, monitoring=monitoring, build=build, function=function,
        workloads=workloads,
    )
    # The scenario's own section, read against the rest; on another scenario's stack the key stays unknown.
    cfg = dataclasses.replace(cfg, settings=scenario_settings.read(top, cfg))
    top.done()

    _check_driver_owner(top, gpu_pools, addons)
    _check_blob_driver(top, cluster, storage, addons)
    _check_build_reaches_registry(top, registry, build)
    _check_keda_reads_metrics(top, addons, monitoring)
    _check_api_server_decision(top, cluster)
    return cfg


def _cidr(s: Section, name: str, default: str) -> ipaddress.IPv4Network:
    value = s.get(name, str, default)
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        raise ConfigError(s.key(name), value, f"must be a CIDR such as 10.20.0.0/16 ({e})") from None
    if not isinstance(net, ipaddress.IPv4Network):
        raise ConfigError(s.key(name), value, "must be an IPv4 CIDR")
    return net


def _network(s: Section) -> NetworkConfig:
    d = NetworkConfig()
    vnet = _cidr(s, "addressSpace", d.address_space)
    nodes = _cidr(s, "nodeSubnet", d.node_subnet)
    endpoints = _cidr(s, "endpointSubnet", d.endpoint_subnet)
    pods = _cidr(s, "podCidr", d.pod_cidr)
    services = _cidr(s, "serviceCidr", d.service_cidr)
    dns = s.get("dnsServiceIp", str, d.dns_service_ip)
    s.done()
    for key, subnet in (("nodeSubnet", nodes), ("endpointSubnet", endpoints)):
        if not subnet.subnet_of(vnet):
            raise ConfigError(s.key(key), str(subnet), f"must lie inside network.addressSpace {vnet}")
    if nodes.overlaps(endpoints):
        raise ConfigError(s.key("endpointSubnet"), str(endpoints), f"overlaps network.nodeSubnet {nodes}")
    for key, net in (("podCidr", pods), ("serviceCidr", services)):
        if net.overlaps(vnet):
            raise ConfigError(s.key(key), str(net), f"must not overlap network.addressSpace {vnet}")
    if pods.overlaps(services):
        raise ConfigError(s.key("serviceCidr"), str(services), f"overlaps network.podCidr {pods}")
    for key, net in (("podCidr", pods), ("serviceCidr", services)):
        if reserved := next((r for r in AKS_RESERVED_RANGES if net.overlaps(r)), None):
            raise ConfigError(s.key(key), str(net), f"overlaps {reserved}, which AKS reserves")
    if services.prefixlen <= MAX_SERVICE_PREFIX:
        raise ConfigError(s.key("serviceCidr"), str(services),
                          f"must be smaller than a /{MAX_SERVICE_PREFIX} (AKS refuses larger service ranges)")
    try:
        dns_ip = ipaddress.ip_address(dns)
    except ValueError:
        raise ConfigError(s.key("dnsServiceIp"), dns, "must be an IPv4 address") from None
    if dns_ip not in services or dns_ip in (services.network_address, services.network_address + 1):
        raise ConfigError(s.key("dnsServiceIp"), dns,
                          f"must be inside network.serviceCidr {services}, not its first two addresses")
    return NetworkConfig(address_space=str(vnet), node_subnet=str(nodes), endpoint_subnet=str(endpoints),
                         pod_cidr=str(pods), service_cidr=str(services), dns_service_ip=dns)


def _pool(s: Section, d: PoolConfig) -> PoolConfig:
    """A pool's fields, each defaulting to ``d`` (the system, CPU or GPU pool defaults)."""
    name = s.get("name", str, d.name)
    if err := naming.agent_pool_name_error(name):
        raise ConfigError(s.key("name"), name, err)
    vm_size = s.get("vmSize", str, d.vm_size)
    min_count = s.get("minCount", int, d.min_count)
    max_count = s.get("maxCount", int, d.max_count)
    count = s.get("count", int, min_count)
    if min_count < 0:
        raise ConfigError(s.key("minCount"), min_count, f"pool '{name}': must be >= 0")
    if max_count < 1 or max_count > 1000:
        raise ConfigError(s.key("maxCount"), max_count, f"pool '{name}': must be between 1 and 1000")
    if min_count > max_count:
        raise ConfigError(s.key("minCount"), min_count, f"pool '{name}': must be <= maxCount {max_count}")
    if not min_count <= count <= max_count:
        raise ConfigError(s.key("count"), count,
                          f"pool '{name}': must be between minCount {min_count} and maxCount {max_count}")
    priority = s.choice("priority", Priority, d.priority)
    price = s.get("spotMaxPrice", float, d.spot_max_price)
    if priority != Priority.SPOT and "spotMaxPrice" in s.raw:
        raise ConfigError(s.key("spotMaxPrice"), price, f"pool '{name}': only applies with priority spot")
    if price != -1 and (price <= 0 or round(price, 5) != price):
        raise ConfigError(s.key("spotMaxPrice"), price, "must be -1 or a price > 0 with at most 5 decimals")
    labels = s.string_map("labels")
    for k, v in labels.items():
        if not _LABEL_KEY.match(k) or k.startswith(_RESERVED_LABEL_PREFIXES):
            raise ConfigError(f"{s.key('labels')}.{k}", v,
                              "label keys must be valid Kubernetes names outside kubernetes.azure.com/, "
                              "kubernetes.io/ and k8s.io/")
        if not _LABEL_VALUE.match(v):
            raise ConfigError(f"{s.key('labels')}.{k}", v, "label values are up to 63 letters, digits, '-', '_', '.'")
    disk = s.get("osDiskSizeGb", int, d.os_disk_size_gb)
    if not 30 <= disk <= 2048:
        raise ConfigError(s.key("osDiskSizeGb"), disk, "must be between 30 and 2048")
    zones = s.strings("zones", list(d.zones))
    for i, z in enumerate(zones):
        if z not in ("1", "2", "3"):
            raise ConfigError(f"{s.key('zones')}[{i}]", z, "allowed: 1, 2, 3")
    return PoolConfig(name=name, vm_size=vm_size, min_count=min_count, max_count=max_count, count=count,
                      priority=priority, spot_max_price=price, labels=labels, os_disk_size_gb=disk, zones=zones)


def _gpu_pool(s: Section) -> GpuPoolConfig:
    d = GpuPoolConfig(pool=GPU_POOL_DEFAULTS, size=lookup_gpu_size(GPU_POOL_DEFAULTS.vm_size))
    pool = _pool(s, GPU_POOL_DEFAULTS)
    try:
        size = lookup_gpu_size(pool.vm_size)
    except ValueError as e:
        raise ConfigError(s.key("vmSize"), pool.vm_size, str(e)) from None
    driver = s.choice("driver", GpuDriver, d.driver)
    if size.grid and driver == GpuDriver.NONE:
        raise ConfigError(s.key("driver"), driver,
                          f"{size.name} needs the GRID driver that only AKS installs; use driver install")
    sharing = _sharing(s.section("sharing"), size, pool.name)
    s.done()
    if sharing.mode == SharingMode.MIG and driver != GpuDriver.INSTALL:
        # AKS partitions MIG GPUs (gpuInstanceProfile) as part of its own driver setup.
        raise ConfigError(s.key("driver"), driver, f"pool '{pool.name}': MIG pools need driver install")
    return GpuPoolConfig(pool=pool, size=size, driver=driver, sharing=sharing)


def _sharing(s: Section, size: GpuSize, pool: str) -> SharingConfig:
    d = SharingConfig()
    mode = s.choice("mode", SharingMode, d.mode)
    replicas = s.get("replicas", int, 2 if mode.has_replicas else d.replicas)
    profile = s.optional_str("migProfile")
    s.done()
    if mode.has_replicas and replicas < 2:
        raise ConfigError(s.key("replicas"), replicas, f"pool '{pool}': {mode} needs replicas >= 2")
    if not mode.has_replicas and replicas != 1:
        raise ConfigError(s.key("replicas"), replicas,
                          f"pool '{pool}': replicas only apply to time-slicing or mps, not {mode}")
    if mode in (SharingMode.MIG, SharingMode.MPS) and size.grid:
        raise ConfigError(s.key("mode"), mode, f"pool '{pool}': {size.gpu_model} ({size.name}) does not support {mode}")
    if mode == SharingMode.MIG:
        if not size.mig:
            raise ConfigError(s.key("mode"), mode,
                              f"pool '{pool}': MIG needs a MIG-capable size (A100, H100), not {size.gpu_model} "
                              f"({size.name})")
        if profile not in MIG_PROFILES:
            raise ConfigError(s.key("migProfile"), profile, f"pool '{pool}': allowed: {', '.join(MIG_PROFILES)}")
    elif profile is not None:
        raise ConfigError(s.key("migProfile"), profile,
                          f"pool '{pool}': a MIG profile needs mode mig; MIG and {mode} do not mix on one pool")
    return SharingConfig(mode=mode, replicas=replicas, mig_profile=profile)


def _cpu_pool(s: Section) -> PoolConfig:
    pool = _pool(s, CPU_POOL_DEFAULTS)
    s.done()
    _refuse_gpu_size(s, pool.vm_size, "cpuPools")
    return pool


def _refuse_gpu_size(s: Section, vm_size: str, where: str) -> None:
    if vm_size.startswith(_GPU_FAMILIES):
        raise ConfigError(s.key("vmSize"), vm_size, f"GPU sizes belong in gpuPools, not {where}")


def _cluster(s: Section) -> ClusterConfig:
    d = ClusterConfig()
    version = s.optional_str("kubernetesVersion")
    if version is not None and not re.fullmatch(r"1\.\d{2}(\.\d+)?", version):
        raise ConfigError(s.key("kubernetesVersion"), version, "must be a version such as 1.33 or 1.33.2")
    tier = s.choice("skuTier", SkuTier, d.sku_tier)
    private = s.get("private", bool, d.private)
    ranges = s.strings("authorizedIpRanges", list(d.authorized_ip_ranges))
    for i, r in enumerate(ranges):
        key = f"{s.key('authorizedIpRanges')}[{i}]"
        try:
            net = ipaddress.ip_network(r, strict=True)
        except ValueError:
            raise ConfigError(key, r, "must be a CIDR such as 203.0.113.7/32") from None
        if net.prefixlen == 0:
            raise ConfigError(key, r, "must not open the API server to every address; list your egress CIDRs")
    if private and ranges:
        raise ConfigError(s.key("authorizedIpRanges"), list(ranges),
                          "must be empty when cluster.private is true (a private API server has no public ranges)")
    open_api = s.get("openApiServer", bool, d.open_api_server)
    if open_api and (private or ranges):
        raise ConfigError(s.key("openApiServer"), open_api,
                          "contradicts cluster.private or cluster.authorizedIpRanges; set only one of the three")
    local = s.get("localAccounts", bool, d.local_accounts)
    groups = s.strings("adminGroupObjectIds", list(d.admin_group_object_ids))
    for i, g in enumerate(groups):
        if not re.fullmatch(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}", g):
            raise ConfigError(f"{s.key('adminGroupObjectIds')}[{i}]", g, "must be an Entra ID object id (GUID)")
    grant = s.get("grantDeployerAdmin", bool, d.grant_deployer_admin)
    deployer_type = s.choice("deployerPrincipalType", PrincipalType, d.deployer_principal_type)
    policy = s.choice("networkPolicy", NetworkPolicy, d.network_policy)
    channel = s.choice("upgradeChannel", UpgradeChannel, d.upgrade_channel)
    os_channel = s.choice("nodeOsUpgradeChannel", NodeOsUpgradeChannel, d.node_os_upgrade_channel)
    if channel == UpgradeChannel.NODE_IMAGE and os_channel != NodeOsUpgradeChannel.NODE_IMAGE:
        # auto-upgrade-node-os-image: the node OS channel cannot be changed while the cluster channel is node-image.
        raise ConfigError(s.key("nodeOsUpgradeChannel"), os_channel,
                          "must be NodeImage while cluster.upgradeChannel is node-image (AKS forces it)")
    managed_blob = s.get("managedBlobCsiDriver", bool, d.managed_blob_csi_driver)
    login = s.get("loginMode", str, d.login_mode)
    if login == "devicecode":
        raise ConfigError(s.key("loginMode"), login,
                          f"devicecode is interactive and hangs pulumi up in CI; allowed: {', '.join(LoginMode)}")
    login = s.choice("loginMode", LoginMode, d.login_mode)
    sp = s.section("systemPool")
    system = _pool(sp, d.system_pool)
    sp.done()
    if system.spot:
        raise ConfigError(sp.key("priority"), "spot", "the system pool must be regular (AKS refuses spot system pools)")
    if system.min_count < 1:
        raise ConfigError(sp.key("minCount"), system.min_count, "the system pool needs at least 1 node")
    _refuse_gpu_size(sp, system.vm_size, "cluster.systemPool")
    autoscaler = _autoscaler(s.section("autoscaler"))
    s.done()
    return ClusterConfig(
        kubernetes_version=version, sku_tier=tier, private=private, authorized_ip_ranges=ranges,
        open_api_server=open_api, local_accounts=local, admin_group_object_ids=groups, grant_deployer_admin=grant,
        deployer_principal_type=deployer_type, network_policy=policy, upgrade_channel=channel,
        node_os_upgrade_channel=os_channel, managed_blob_csi_driver=managed_blob, login_mode=login,
        system_pool=system, autoscaler=autoscaler,
    )


def _autoscaler(s: Section) -> AutoscalerConfig:
    d = AutoscalerConfig()
    durations = {}
    for key, attr, unit, text in _AUTOSCALER_DURATIONS:
        value = s.get(key, str, getattr(d, attr))
        if not unit.fullmatch(value):
            raise ConfigError(s.key(key), value, f"AKS takes whole {text}")
        durations[attr] = value
    expander = s.choice("expander", Expander, d.expander)
    skip_local = s.get("skipNodesWithLocalStorage", bool, d.skip_nodes_with_local_storage)
    s.done()
    return AutoscalerConfig(**durations, expander=expander, skip_nodes_with_local_storage=skip_local)


def _registry(s: Section) -> RegistryConfig:
    d = RegistryConfig()
    enabled = s.get("enabled", bool, d.enabled)
    name = s.optional_str("name")
    if name is not None and (err := naming.acr_name_error(name)):
        raise ConfigError(s.key("name"), name, err)
    sku = s.choice("sku", RegistrySku, d.sku)
    private = s.get("private", bool, d.private)
    s.done()
    if private and sku != RegistrySku.PREMIUM:
        raise ConfigError(s.key("sku"), sku, "registry.private needs Premium (private endpoints are Premium-only)")
    return RegistryConfig(enabled=enabled, name=name, sku=sku, private=private)


def _storage(s: Section, default_private: bool) -> StorageConfig:
    d = StorageConfig()
    accounts = s.items("accounts", _storage_account, [])
    private = s.get("private", bool, default_private)
    auth = s.choice("auth", StorageAuth, d.auth)
    days = s.get("sasExpiryDays", int, d.sas_expiry_days)
    s.done()
    if not 1 <= days <= 365:
        raise ConfigError(s.key("sasExpiryDays"), days, "must be between 1 and 365")
    roles = [a.role for a in accounts]
    for i, role in enumerate(roles):
        if role in roles[:i]:
            raise ConfigError(f"{s.key('accounts')}[{i}].role", role, "each storage account needs its own role")
    names = [a.name for a in accounts]
    for i, name in enumerate(names):
        if name is not None and name in names[:i]:
            raise ConfigError(f"{s.key('accounts')}[{i}].name", name, "each storage account needs its own name")
    # Every container becomes a claim of the same name in the scenario's namespace: names must not repeat.
    seen: dict[str, str] = {}
    for i, account in enumerate(accounts):
        for j, container in enumerate(account.containers):
            where = f"{s.key('accounts')}[{i}].containers[{j}]"
            if container in seen:
                raise ConfigError(where, container, f"container names must be unique in the stack; {seen[container]} "
                                  "already uses it (each becomes a volume claim of that name)")
            seen[container] = where
    return StorageConfig(accounts=accounts, private=private, auth=auth, sas_expiry_days=days)


def _storage_account(s: Section) -> StorageAccountConfig:
    d = StorageAccountConfig()
    role = s.get("role", str, d.role)
    if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", role):
        raise ConfigError(s.key("role"), role, "must be 1-8 lowercase letters and digits starting with a letter")
    if role == "build":
        raise ConfigError(s.key("role"), role, "is reserved for the account that holds image build contexts")
    containers = s.strings("containers", [role])
    if not containers:
        raise ConfigError(s.key("containers"), [], "needs at least one container")
    for i, c in enumerate(containers):
        if err := naming.blob_container_name_error(c):
            raise ConfigError(f"{s.key('containers')}[{i}]", c, err)
    name = s.optional_str("name")
    if name is not None and (err := naming.storage_account_name_error(name)):
        raise ConfigError(s.key("name"), name, err)
    protect = s.get("protect", bool, d.protect)
    s.done()
    return StorageAccountConfig(role=role, containers=containers, name=name, protect=protect)


def _addons(s: Section, default_blob_csi: bool) -> AddonsConfig:
    d = AddonsConfig()
    addons = AddonsConfig(
        nfd=s.get("nfd", bool, d.nfd),
        gpu_operator=s.get("gpuOperator", bool, d.gpu_operator),
        blob_csi=s.get("blobCsi", bool, default_blob_csi),
        smoke_test=s.get("smokeTest", bool, d.smoke_test),
        keda=s.get("keda", bool, d.keda),
        kueue=s.get("kueue", bool, d.kueue),
    )
    s.done()
    return addons


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _monitoring(s: Section) -> MonitoringConfig:
    d = MonitoringConfig()
    email = s.optional_str("alertEmail")
    if email is not None and not _EMAIL.fullmatch(email):
        raise ConfigError(s.key("alertEmail"), email, "must be one e-mail address such as ml-team@example.com")
    idle = s.get("idleGpuMinutes", int, d.idle_gpu_minutes)
    if not 5 <= idle <= 1440:
        raise ConfigError(s.key("idleGpuMinutes"), idle, "must be between 5 and 1440 (a day)")
    monitoring = MonitoringConfig(
        enabled=s.get("enabled", bool, d.enabled), grafana=s.get("grafana", bool, d.grafana), alert_email=email,
        idle_gpu_minutes=idle, autoscaler_logs=s.get("autoscalerLogs", bool, d.autoscaler_logs),
    )
    s.done()
    if not monitoring.enabled and (monitoring.grafana or monitoring.alert_email):
        key = s.key("grafana") if monitoring.grafana else s.key("alertEmail")
        raise ConfigError(key, monitoring.grafana or monitoring.alert_email,
                          "needs monitoring.enabled (Grafana and alerts read the managed Prometheus workspace)")
    return monitoring


def _build(s: Section) -> BuildConfig:
    mode = s.choice("mode", BuildMode, BuildConfig().mode)
    s.done()
    return BuildConfig(mode=mode)


def _function(s: Section, gpu_pools: tuple[GpuPoolConfig, ...], network: NetworkConfig) -> FunctionConfig:
    d = FunctionConfig()
    pool = s.optional_str("pool")
    names = [g.name for g in gpu_pools]
    if pool is not None and pool not in names:
        raise ConfigError(s.key("pool"), pool, f"must name a GPU pool of this stack: {', '.join(names) or 'none'}")
    exposure = s.choice("exposure", Exposure, d.exposure)
    ranges = s.strings("allowedSourceRanges", list(d.allowed_source_ranges))
    for i, cidr in enumerate(ranges):
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            raise ConfigError(f"{s.key('allowedSourceRanges')}[{i}]", cidr,
                              "must be a CIDR such as 203.0.113.0/24") from None
        if network.prefixlen == 0:
            raise ConfigError(f"{s.key('allowedSourceRanges')}[{i}]", cidr,
                              "would open the function to the whole internet; name the ranges that may call it")
    if exposure == Exposure.PUBLIC and not ranges:
        raise ConfigError(s.key("allowedSourceRanges"), [],
                          "must list the CIDRs that may call a public function (exposure: public); or use "
                          "exposure: internal and kubectl port-forward")
    if not ranges:
        # Internal: the VNet, explicitly, so no LoadBalancer is ever declared without its sources.
        ranges = [network.address_space]
    max_context = s.get("maxContextChars", int, d.max_context_chars)
    if not 100 <= max_context <= 200_000:
        raise ConfigError(s.key("maxContextChars"), max_context, "must be between 100 and 200000")
    target = s.get("targetGpuUtilisation", int, d.target_gpu_utilisation)
    if not 10 <= target <= 100:
        raise ConfigError(s.key("targetGpuUtilisation"), target, "must be a percentage between 10 and 100")
    s.done()
    return FunctionConfig(pool=pool, exposure=exposure, allowed_source_ranges=ranges, max_context_chars=max_context,
                          target_gpu_utilisation=target)


_IMAGE_REF = re.compile(r"^[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$")
_WORKLOAD_COUNTS = (("inferenceServices", "inference_services", 16), ("resimJobs", "resim_jobs", 1000),
                    ("gpuTestJobs", "gpu_test_jobs", 100), ("trainingSteps", "training_steps", 1_000_000),
                    ("parallelTrainingRuns", "parallel_training_runs", 50))
"""(key, field, upper bound): the bounds keep a typo from asking for thousands of GPU pods."""


def _workloads(s: Section) -> WorkloadsConfig:
    d = WorkloadsConfig()
    counts = {}
    for key, attr, top in _WORKLOAD_COUNTS:
        value = s.get(key, int, getattr(d, attr))
        if not 1 <= value <= top:
            raise ConfigError(s.key(key), value, f"must be between 1 and {top}")
        counts[attr] = value
    notebook = s.get("notebook", bool, d.notebook)
    image = s.optional_str("largeModelImage")
    if image is not None and (not _IMAGE_REF.match(image) or image.endswith(":latest")):
        raise ConfigError(s.key("largeModelImage"), image,
                          "must be REGISTRY/REPOSITORY:TAG or @sha256:DIGEST, with a tag other than latest")
    s.done()
    return WorkloadsConfig(**counts, notebook=notebook, large_model_image=image)


def _check_driver_owner(top: Section, gpu: tuple[GpuPoolConfig, ...], addons: AddonsConfig) -> None:
    """Exactly one driver owner per GPU node: AKS (driver install) or the GPU operator (driver none)."""
    for i, g in enumerate(gpu):
        if g.driver == GpuDriver.NONE and not addons.gpu_operator:
            raise ConfigError(f"{top.key('gpuPools')}[{i}].driver", g.driver,
                              f"pool '{g.name}': nothing installs the GPU driver while addons.gpuOperator is "
                              "false; use driver install or enable the operator")
    if addons.smoke_test and not addons.gpu_operator:
        raise ConfigError(f"{top.key('addons')}.smokeTest", True,
                          "the smoke test needs the GPU operator's device plugin (addons.gpuOperator)")


def _check_build_reaches_registry(top: Section, registry: RegistryConfig, build: BuildConfig) -> None:
    """A quick ACR Task run builds on ACR's shared public agents: it cannot push into a registry whose public
    access is off, and the trusted-services bypass does not cover it (manage-network-bypass-policy-for-tasks)."""
    if registry.enabled and registry.private and build.mode == BuildMode.ACR:
        raise ConfigError(f"{top.key('build')}.mode", build.mode,
                          "an ACR Task run cannot push into a private registry (registry.private); use build.mode "
                          "local from a machine in the VNet, which reaches the registry's private endpoint")


def _check_keda_reads_metrics(top: Section, addons: AddonsConfig, monitoring: MonitoringConfig) -> None:
    if addons.keda and not monitoring.enabled:
        raise ConfigError(f"{top.key('addons')}.keda", True,
                          "KEDA scales on GPU utilisation from managed Prometheus; enable monitoring or set "
                          "addons.keda false")


def _check_api_server_decision(top: Section, cluster: ClusterConfig) -> None:
    """Checked last, so a stack file with other mistakes hears about those first: who may reach the API server
    is a decision each stack makes, never a default (security baseline: private or authorized ranges)."""
    if not (cluster.private or cluster.authorized_ip_ranges or cluster.open_api_server):
        raise ConfigError(f"{top.key('cluster')}.authorizedIpRanges", [],
                          "leaves the public API server open to every address; list your egress CIDRs, set "
                          "cluster.private: true, or accept an open (Entra ID-guarded) server with "
                          "cluster.openApiServer: true")


def _check_blob_driver(top: Section, cluster: ClusterConfig, storage: StorageConfig, addons: AddonsConfig) -> None:
    if addons.blob_csi and cluster.managed_blob_csi_driver:
        raise ConfigError(f"{top.key('cluster')}.managedBlobCsiDriver", True,
                          "addons.blobCsi already installs the Blob CSI driver; enable one of them, not both")
    if storage.accounts and not (addons.blob_csi or cluster.managed_blob_csi_driver):
        raise ConfigError(f"{top.key('addons')}.blobCsi", False,
                          "storage.accounts are mounted as blob volumes; enable addons.blobCsi or "
                          "cluster.managedBlobCsiDriver")


def _check_unique_pool_names(top: Section, system: PoolConfig, gpu: tuple[GpuPoolConfig, ...],
                             cpu: tuple[PoolConfig, ...]) -> None:
    seen = {system.name: f"{top.key('cluster')}.systemPool"}
    for key, pools in (("gpuPools", [g.pool for g in gpu]), ("cpuPools", cpu)):
        for i, p in enumerate(pools):
            where = f"{top.key(key)}[{i}].name"
            if p.name in seen:
                raise ConfigError(where, p.name, f"pool names must be unique; {seen[p.name]} already uses it")
            seen[p.name] = where
