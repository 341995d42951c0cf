"""The stack's configuration: read once, validated whole, before any resource is declared.

Each dataclass field's docstring is the key's documentation; defaults here are the single source of truth and
``Pulumi.yaml`` repeats the scalar ones (a test keeps the two equal).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Mapping

from components import expiry, naming
from components.gpu_sizes import GpuSize, lookup_gpu_size
from components.settings import (
    BUILD_MODES, EXPOSURES, MIG_INSTANCES_PER_GPU, AddonsConfig, AutoscalerConfig, BuildConfig, ClusterConfig,
    FunctionConfig, GpuPoolConfig, NetworkConfig, PoolConfig, RegistryConfig, SharingConfig, StorageAccountConfig,
    StorageConfig, WorkloadsConfig,
)
from stacks.config_reader import ConfigError, Section

PROJECT = "aksgpu"
SCENARIOS = ("function-gpu", "gpu-sharing", "gpu-basics", "av-resim", "training-autoscale")
LOGIN_MODES = ("azurecli", "spn", "workloadidentity", "msi")
SHARING_MODES = ("none", "time-slicing", "mps", "mig")
MIG_PROFILES = tuple(MIG_INSTANCES_PER_GPU)
# Labels AKS owns or refuses on node pools.
_RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/", "k8s.io/")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    scenario: str
    """Which seed scenario this stack runs."""
    environment: str
    """Environment name for tags; defaults to the stack name."""
    owner: str
    """Who to ask about this stack (tag)."""
    lifetime: str
    """``demo`` (destroyed after ``ttl_hours``) or ``long-lived`` (never destroyed by the expiry workflow)."""
    ttl_hours: int
    """Hours a demo stack lives after its latest ``pulumi up`` (rounded up to midnight UTC)."""
    location: str
    """Azure region."""
    naming: naming.Naming
    """Physical names, from ``nameRoot`` (default: the stack name)."""
    network: NetworkConfig
    cluster: ClusterConfig
    gpu_pools: tuple[GpuPoolConfig, ...]
    cpu_pools: tuple[PoolConfig, ...]
    registry: RegistryConfig
    storage: StorageConfig
    addons: AddonsConfig
    build: BuildConfig
    function: FunctionConfig
    workloads: WorkloadsConfig

    @property
    def tags(self) -> dict[str, str]:
        """Tags on every Azure resource."""
        return {
            "scenario": self.scenario,
            "environment": self.environment,
            "owner": self.owner,
            "managed-by": "pulumi",
            "pulumi-project": self.project,
            "pulumi-stack": self.stack,
            expiry.LIFETIME: self.lifetime,
        }

    def resource_group_tags(self, now: dt.datetime) -> dict[str, str]:
        """The stack's tags plus, for a demo stack, when the expiry workflow may destroy it."""
        if self.lifetime == expiry.LONG_LIVED:
            return self.tags
        return {**self.tags, expiry.EXPIRES_AT: expiry.expires_at(now, self.ttl_hours)}

    def gpu_pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.pool.name == name)


DEFAULT_TTL_HOURS = 24
MAX_TTL_HOURS = 720
DEFAULT_GPU_POOLS: list[dict[str, Any]] = [{"name": "gpu", "vmSize": "Standard_NC4as_T4_v3"}]


def load_config(raw: Mapping[str, Any], project: str, stack: str) -> StackConfig:
    """Parse and validate the project's config namespace (keys without the ``aksgpu:`` prefix)."""
    top = Section(dict(raw), f"{project}:")
    scenario = top.choice("scenario", SCENARIOS, "gpu-basics")
    environment = top.get("environment", str, "") or stack
    owner = top.get("owner", str, "unassigned")
    lifetime = top.choice("lifetime", expiry.LIFETIMES, expiry.DEMO)
    ttl_hours = top.get("ttlHours", int, DEFAULT_TTL_HOURS)
    if not 1 <= ttl_hours <= MAX_TTL_HOURS:
        raise ConfigError(top.key("ttlHours"), ttl_hours, f"must be between 1 and {MAX_TTL_HOURS} (30 days); "
                          "set lifetime: long-lived for a stack that should not expire")
    location = top.get("location", str, "eastus")
    if not re.fullmatch(r"[a-z][a-z0-9]+", location):
        raise ConfigError(top.key("location"), location, "must be an Azure region name such as eastus")
    root = top.get("nameRoot", str, "") or naming.root_from_stack(stack)
    if err := naming.name_root_error(root):
        raise ConfigError(top.key("nameRoot"), root, err)

    network = _network(top.section("network"))
    cluster = _cluster(top.section("cluster"))
    gpu_pools = top.items("gpuPools", _gpu_pool, DEFAULT_GPU_POOLS)
    cpu_pools = top.items("cpuPools", _cpu_pool, [])
    registry = _registry(top.section("registry"))
    storage = _storage(top.section("storage"), default_private=cluster.private)
    addons = _addons(top.section("addons"), default_blob_csi=bool(storage.accounts))
    build = _build(top.section("build"))
    function = _function(top.section("function"), gpu_pools)
    workloads = _workloads(top.section("workloads"))
    top.done()

    _check_unique_pool_names(top, cluster.system_pool, gpu_pools, cpu_pools)
    _check_driver_owner(top, gpu_pools, addons)
    _check_blob_driver(top, cluster, storage, addons)
    return StackConfig(
        project=project, stack=stack, scenario=scenario, environment=environment, owner=owner,
        lifetime=lifetime, ttl_hours=ttl_hours,
        location=location, naming=naming.Naming(root, unique_seed=f"{project}/{stack}"),
        network=network, cluster=cluster, gpu_pools=gpu_pools, cpu_pools=cpu_pools,
        registry=registry, storage=storage, addons=addons, build=build, function=function, workloads=workloads,
    )


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
    try:
        dns_ip = ipaddress.ip_address(dns)
    except ValueError:
        raise ConfigError(s.key("dnsServiceIp"), dns, "must be an IPv4 address") from None
    if dns_ip not in services or dns_ip in (services.network_address, services.network_address + 1):
        raise ConfigError(s.key("dnsServiceIp"), dns,
                          f"must be inside network.serviceCidr {services}, not its first two addresses")
    return NetworkConfig(address_space=str(vnet), node_subnet=str(nodes), endpoint_subnet=str(endpoints),
                         pod_cidr=str(pods), service_cidr=str(services), dns_service_ip=dns)


def _pool(s: Section, default_name: str, default_size: str, default_min: int, default_max: int,
          default_priority: str = "regular") -> PoolConfig:
    name = s.get("name", str, default_name)
    if err := naming.agent_pool_name_error(name):
        raise ConfigError(s.key("name"), name, err)
    vm_size = s.get("vmSize", str, default_size)
    min_count = s.get("minCount", int, default_min)
    max_count = s.get("maxCount", int, default_max)
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
    spot = s.choice("priority", ("regular", "spot"), default_priority) == "spot"
    price = s.get("spotMaxPrice", float, -1.0)
    if not spot and "spotMaxPrice" in s.raw:
        raise ConfigError(s.key("spotMaxPrice"), price, f"pool '{name}': only applies with priority spot")
    if price != -1 and (price <= 0 or round(price, 5) != price):
        raise ConfigError(s.key("spotMaxPrice"), price, "must be -1 or a price > 0 with at most 5 decimals")
    labels = s.string_map("labels")
    for k, v in labels.items():
        if not _LABEL_KEY.match(k) or k.startswith(_RESERVED_LABEL_PREFIXES):
            raise ConfigError(f"{s.key('labels')}.{k}", v,
                              "label key must be a Kubernetes label name outside kubernetes.azure.com/ and kubernetes.io/")
        if not _LABEL_VALUE.match(v):
            raise ConfigError(f"{s.key('labels')}.{k}", v, "label value must be <= 63 letters, digits, '-', '_', '.'")
    disk = s.get("osDiskSizeGb", int, 128)
    if not 30 <= disk <= 2048:
        raise ConfigError(s.key("osDiskSizeGb"), disk, "must be between 30 and 2048")
    zones = s.strings("zones", [])
    for i, z in enumerate(zones):
        if z not in ("1", "2", "3"):
            raise ConfigError(f"{s.key('zones')}[{i}]", z, "allowed: 1, 2, 3")
    return PoolConfig(name=name, vm_size=vm_size, min_count=min_count, max_count=max_count, count=count, spot=spot,
                      spot_max_price=price, labels=labels, os_disk_size_gb=disk, zones=zones)


def _gpu_pool(s: Section) -> GpuPoolConfig:
    # GPU pools default to spot: the seeds are demos, and spot GPUs cost a fraction of on-demand ones.
    pool = _pool(s, "gpu", "Standard_NC4as_T4_v3", 0, 1, default_priority="spot")
    try:
        size = lookup_gpu_size(pool.vm_size)
    except ValueError as e:
        raise ConfigError(s.key("vmSize"), pool.vm_size, str(e)) from None
    driver = s.choice("driver", ("none", "install"), "none")
    if size.grid and driver == "none":
        raise ConfigError(s.key("driver"), driver,
                          f"{size.name} needs the GRID driver that only AKS installs; use driver install")
    sharing = _sharing(s.section("sharing"), size, pool.name)
    s.done()
    if sharing.mode == "mig" and driver != "install":
        # AKS partitions MIG GPUs (gpuInstanceProfile) as part of its own driver setup.
        raise ConfigError(s.key("driver"), driver, f"pool '{pool.name}': MIG pools need driver install")
    return GpuPoolConfig(pool=pool, size=size, driver=driver, sharing=sharing)


def _sharing(s: Section, size: GpuSize, pool: str) -> SharingConfig:
    mode = s.choice("mode", SHARING_MODES, "none")
    replicas = s.get("replicas", int, 1 if mode in ("none", "mig") else 2)
    profile = s.optional_str("migProfile")
    s.done()
    if mode in ("time-slicing", "mps") and replicas < 2:
        raise ConfigError(s.key("replicas"), replicas, f"pool '{pool}': {mode} needs replicas >= 2")
    if mode in ("none", "mig") and replicas != 1:
        raise ConfigError(s.key("replicas"), replicas,
                          f"pool '{pool}': replicas only apply to time-slicing or mps, not {mode}")
    if mode in ("mig", "mps") and size.grid:
        raise ConfigError(s.key("mode"), mode, f"pool '{pool}': {size.gpu_model} ({size.name}) does not support {mode}")
    if mode == "mig":
        if not size.mig:
            raise ConfigError(s.key("mode"), mode,
                              f"pool '{pool}': MIG needs an A100 or H100 size, not {size.gpu_model} ({size.name})")
        if profile not in MIG_PROFILES:
            raise ConfigError(s.key("migProfile"), profile, f"pool '{pool}': allowed: {', '.join(MIG_PROFILES)}")
    elif profile is not None:
        raise ConfigError(s.key("migProfile"), profile,
                          f"pool '{pool}': a MIG profile needs mode mig; MIG and {mode} do not mix on one pool")
    return SharingConfig(mode=mode, replicas=replicas, mig_profile=profile)


def _cpu_pool(s: Section) -> PoolConfig:
    pool = _pool(s, "cpu", "Standard_D4ds_v5", 0, 3)
    s.done()
    _refuse_gpu_size(s, pool.vm_size, "cpuPools")
    return pool


def _refuse_gpu_size(s: Section, vm_size: str, where: str) -> None:
    if vm_size.startswith(("Standard_NC", "Standard_ND", "Standard_NV")):
        raise ConfigError(s.key("vmSize"), vm_size, f"GPU sizes belong in gpuPools, not {where}")


def _cluster(s: Section) -> ClusterConfig:
    d = ClusterConfig()
    version = s.optional_str("kubernetesVersion")
    if version is not None and not re.fullmatch(r"1\.\d{2}(\.\d+)?", version):
        raise ConfigError(s.key("kubernetesVersion"), version, "must be a version such as 1.33 or 1.33.2")
    tier = s.choice("skuTier", ("Free", "Standard", "Premium"), d.sku_tier)
    private = s.get("private", bool, d.private)
    ranges = s.strings("authorizedIpRanges", [])
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
    local = s.get("localAccounts", bool, d.local_accounts)
    groups = s.strings("adminGroupObjectIds", [])
    for i, g in enumerate(groups):
        if not re.fullmatch(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}", g):
            raise ConfigError(f"{s.key('adminGroupObjectIds')}[{i}]", g, "must be an Entra ID object id (GUID)")
    grant = s.get("grantDeployerAdmin", bool, d.grant_deployer_admin)
    deployer_type = s.choice("deployerPrincipalType", ("User", "ServicePrincipal", "Group"),
                             d.deployer_principal_type)
    policy = s.choice("networkPolicy", ("cilium", "calico", "azure"), d.network_policy)
    channel = s.choice("upgradeChannel", ("patch", "stable", "rapid", "node-image"), d.upgrade_channel)
    os_channel = s.choice("nodeOsUpgradeChannel", ("NodeImage", "SecurityPatch", "Unmanaged"),
                          d.node_os_upgrade_channel)
    managed_blob = s.get("managedBlobCsiDriver", bool, d.managed_blob_csi_driver)
    login = s.get("loginMode", str, d.login_mode)
    if login == "devicecode":
        raise ConfigError(s.key("loginMode"), login,
                          f"devicecode is interactive and hangs pulumi up in CI; allowed: {', '.join(LOGIN_MODES)}")
    if login not in LOGIN_MODES:
        raise ConfigError(s.key("loginMode"), login, f"allowed: {', '.join(LOGIN_MODES)}")
    sp = s.section("systemPool")
    system = _pool(sp, "system", d.system_pool.vm_size, 1, 3)
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
        local_accounts=local, admin_group_object_ids=groups, grant_deployer_admin=grant,
        deployer_principal_type=deployer_type, network_policy=policy, upgrade_channel=channel,
        node_os_upgrade_channel=os_channel, managed_blob_csi_driver=managed_blob, login_mode=login,
        system_pool=system, autoscaler=autoscaler,
    )


def _autoscaler(s: Section) -> AutoscalerConfig:
    d = AutoscalerConfig()
    durations = {}
    for key, attr in (("scanInterval", "scan_interval"), ("scaleDownUnneededTime", "scale_down_unneeded_time"),
                      ("scaleDownDelayAfterAdd", "scale_down_delay_after_add"),
                      ("maxNodeProvisionTime", "max_node_provision_time")):
        value = s.get(key, str, getattr(d, attr))
        if not re.fullmatch(r"\d+[smh]", value):
            raise ConfigError(s.key(key), value, "must be a duration such as 30s, 10m or 1h")
        durations[attr] = value
    expander = s.choice("expander", ("least-waste", "random", "most-pods", "priority"), d.expander)
    skip_local = s.get("skipNodesWithLocalStorage", bool, d.skip_nodes_with_local_storage)
    s.done()
    return AutoscalerConfig(**durations, expander=expander, skip_nodes_with_local_storage=skip_local)


def _registry(s: Section) -> RegistryConfig:
    d = RegistryConfig()
    enabled = s.get("enabled", bool, d.enabled)
    name = s.optional_str("name")
    if name is not None and (err := naming.acr_name_error(name)):
        raise ConfigError(s.key("name"), name, err)
    sku = s.choice("sku", ("Basic", "Standard", "Premium"), d.sku)
    private = s.get("private", bool, d.private)
    s.done()
    if private and sku != "Premium":
        raise ConfigError(s.key("sku"), sku, "registry.private needs Premium (private endpoints are Premium-only)")
    return RegistryConfig(enabled=enabled, name=name, sku=sku, private=private)


def _storage(s: Section, default_private: bool) -> StorageConfig:
    accounts = s.items("accounts", _storage_account, [])
    private = s.get("private", bool, default_private)
    auth = s.choice("auth", ("identity", "sas"), "identity")
    days = s.get("sasExpiryDays", int, 7)
    s.done()
    if not 1 <= days <= 365:
        raise ConfigError(s.key("sasExpiryDays"), days, "must be between 1 and 365")
    roles = [a.role for a in accounts]
    for i, role in enumerate(roles):
        if role in roles[:i]:
            raise ConfigError(f"{s.key('accounts')}[{i}].role", role, "each storage account needs its own role")
    return StorageConfig(accounts=accounts, private=private, auth=auth, sas_expiry_days=days)


def _storage_account(s: Section) -> StorageAccountConfig:
    role = s.get("role", str, "data")
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
    protect = s.get("protect", bool, False)
    s.done()
    return StorageAccountConfig(role=role, containers=containers, name=name, protect=protect)


def _addons(s: Section, default_blob_csi: bool) -> AddonsConfig:
    d = AddonsConfig()
    addons = AddonsConfig(
        nfd=s.get("nfd", bool, d.nfd),
        gpu_operator=s.get("gpuOperator", bool, d.gpu_operator),
        blob_csi=s.get("blobCsi", bool, default_blob_csi),
        smoke_test=s.get("smokeTest", bool, d.smoke_test),
    )
    s.done()
    return addons


def _build(s: Section) -> BuildConfig:
    mode = s.choice("mode", BUILD_MODES, BuildConfig().mode)
    s.done()
    return BuildConfig(mode=mode)


def _function(s: Section, gpu_pools: tuple[GpuPoolConfig, ...]) -> FunctionConfig:
    d = FunctionConfig()
    pool = s.optional_str("pool")
    names = [g.pool.name for g in gpu_pools]
    if pool is not None and pool not in names:
        raise ConfigError(s.key("pool"), pool, f"must name a GPU pool of this stack: {', '.join(names) or 'none'}")
    exposure = s.choice("exposure", EXPOSURES, d.exposure)
    ranges = s.strings("allowedSourceRanges", [])
    for i, cidr in enumerate(ranges):
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            raise ConfigError(f"{s.key('allowedSourceRanges')}[{i}]", cidr, "must be a CIDR such as 203.0.113.0/24")
        if network.prefixlen == 0:
            raise ConfigError(f"{s.key('allowedSourceRanges')}[{i}]", cidr,
                              "would allow the whole internet; leave the list empty for that, or name your ranges")
    max_context = s.get("maxContextChars", int, d.max_context_chars)
    if not 100 <= max_context <= 200_000:
        raise ConfigError(s.key("maxContextChars"), max_context, "must be between 100 and 200000")
    s.done()
    return FunctionConfig(pool=pool, exposure=exposure, allowed_source_ranges=ranges, max_context_chars=max_context)


_IMAGE_REF = re.compile(r"^[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$")


def _workloads(s: Section) -> WorkloadsConfig:
    d = WorkloadsConfig()
    counts = {}
    for key, attr, top in (("inferenceServices", "inference_services", 16), ("resimJobs", "resim_jobs", 1000),
                           ("gpuTestJobs", "gpu_test_jobs", 100), ("trainingSteps", "training_steps", 1_000_000)):
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
        if g.driver == "none" and not addons.gpu_operator:
            raise ConfigError(f"{top.key('gpuPools')}[{i}].driver", g.driver,
                              f"pool '{g.pool.name}': nothing installs the GPU driver while addons.gpuOperator is "
                              "false; use driver install or enable the operator")
    if addons.smoke_test and not addons.gpu_operator:
        raise ConfigError(f"{top.key('addons')}.smokeTest", True,
                          "the smoke test needs the GPU operator's device plugin (addons.gpuOperator)")


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
