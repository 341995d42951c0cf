"""The platform's config sections: every key of the ``aksgpu:`` namespace but the scenario's own section.

Each key is declared once, here: its type, default, bounds and a one-line docstring. A value that alone can be
wrong (a CIDR, a pool name) is checked by its type; rules across keys are in ``rules.py``. A default that
depends on other keys is ``None`` (``derived``), resolved by the loader.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PrivateAttr

from components.azure.regions import region_error
from components.gpu.sizes import GpuSize, lookup_gpu_size
from components.vocabulary import (
    MIG_INSTANCES_PER_GPU,
    PRIVATE_DNS_ZONES,
    BuildMode,
    DayOfWeek,
    Expander,
    GpuDriver,
    GpuNodes,
    LoginMode,
    MaintenanceWindow,
    NetworkPolicy,
    NodeOsUpgradeChannel,
    PrincipalType,
    Priority,
    Provisioning,
    RegistrySku,
    SharingMode,
    SkuTier,
    StorageAuth,
    UpgradeChannel,
)
from program.config import expiry, naming
from program.config.expiry import Lifetime
from program.config.keys import PROJECT
from program.config.model import ConfigModel, derived
from program.config.naming import Naming


def valid(error_of: Callable[[str], str | None]) -> AfterValidator:
    """A string check from a function that returns why a value is wrong, or None."""
    def check(value: str) -> str:
        if (error := error_of(value)) is not None:
            raise ValueError(error)
        return value
    return AfterValidator(check)


def matching(pattern: str, message: str) -> AfterValidator:
    """A string check: the whole value matches ``pattern``, or ``message`` says what is allowed."""
    return valid(lambda value: None if re.fullmatch(pattern, value) else message)


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        raise ValueError(f"must be a CIDR such as 10.20.0.0/16 ({e})") from None
    if not isinstance(net, ipaddress.IPv4Network):
        raise ValueError("must be an IPv4 CIDR")
    return value


def _ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError("must be an IPv4 address") from None
    return value


def _gpu_size(value: str) -> str:
    lookup_gpu_size(value)  # its ValueError says why the size is refused and what to use
    return value


def _spot_price(value: float) -> float:
    if value != -1 and (value <= 0 or round(value, 5) != value):
        raise ValueError("must be -1 or a price > 0 with at most 5 decimals")
    return value


_guid = matching(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}", "must be an Entra ID object id (GUID)")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty; leave the key out for the default")
    return value


def _no_devicecode(value: Any) -> Any:
    if value == "devicecode":
        raise ValueError(f"devicecode is interactive and hangs pulumi up in CI; allowed: {', '.join(LoginMode)}")
    return value


def _version_text(value: Any) -> Any:
    # YAML reads 1.33 as a number; a Kubernetes version is a string.
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


_version = matching(r"1\.\d{2}(\.\d+)?", "must be a version such as 1.33 or 1.33.2")


def _duration(unit: str, example: str) -> AfterValidator:
    def check(value: str) -> str:
        if not re.fullmatch(rf"[1-9]\d*{unit}", value):
            raise ValueError(f"AKS takes whole {'minutes' if unit == 'm' else 'seconds'}, such as {example}")
        return value
    return AfterValidator(check)


Cidr = Annotated[str, AfterValidator(_cidr)]
Minutes = Annotated[str, _duration("m", "10m")]
"""AKS's autoscaler profile takes its scale-down and provision times in whole minutes only, the scan interval in
seconds (ManagedClusterPropertiesAutoScalerProfile, API 2025-09-01)."""
PoolName = Annotated[str, valid(naming.agent_pool_name_error),
                     Field(description="Agent pool name, `^[a-z][a-z0-9]{0,11}$`; unique in the cluster.")]
VmSize = Annotated[str, Field(description="Azure VM size.")]
MinCount = Annotated[int, Field(ge=0, description="Autoscaler minimum; 0 lets a user pool scale to zero.")]
MaxCount = Annotated[int, Field(ge=1, le=1000, description="Autoscaler maximum.")]
Zone = Literal["1", "2", "3"]


class NetworkConfig(ConfigModel):
    address_space: Cidr = "10.20.0.0/16"
    """VNet address space."""
    node_subnet: Cidr = "10.20.0.0/20"
    """Subnet for AKS nodes, inside the VNet; with CNI overlay pods do not use it."""
    endpoint_subnet: Cidr = "10.20.16.0/24"
    """Subnet for the private endpoints of the registry and storage, inside the VNet."""
    pod_cidr: Cidr = "192.168.0.0/16"
    """Overlay pod range; must not overlap the VNet."""
    service_cidr: Cidr = "172.16.0.0/16"
    """Kubernetes service range; must not overlap the VNet or pods."""
    dns_service_ip: Annotated[str, AfterValidator(_ipv4)] = "172.16.0.10"
    """Cluster DNS address inside the service range."""
    runner_vnet_id: Annotated[str, valid(naming.vnet_id_error)] | None = None
    """Resource id of the VNet where `pulumi up` runs for a private stack (a self-hosted runner's). The stack peers
    it both ways and links its private DNS zones (registry, blob, the API server's) to it, all in state: the first
    `pulumi up` from there completes, and destroy removes them. Its address space must not overlap this VNet's, nor
    that of another stack file peered with the same runner VNet. A VNet in another subscription is peered through a
    provider for that subscription."""
    runner_address_spaces: tuple[Cidr, ...] = ()
    """The address space(s) of `runnerVnetId` (`az network vnet show --ids <runnerVnetId> --query
    addressSpace.addressPrefixes`): config refuses an `addressSpace` that overlaps them (Azure peers a VNet only with
    address spaces that do not overlap), and `offline new-stack` picks a copy's address space around them."""
    private_dns_zone_ids: dict[Literal["registry", "blob"],
                               Annotated[str, valid(naming.private_dns_zone_id_error)]] = Field(
        {}, json_schema_extra={"defaultText": "none: zones of the stack's own"})
    """Existing private DNS zones to resolve the private registry (`registry`: `privatelink.azurecr.io`) and storage
    (`blob`: `privatelink.blob.core.windows.net`) through, by resource id, instead of zones of the stack's own: a
    hub's central zones, or an earlier stack's. The stack links each to its VNet and its endpoints write their
    records there; it links none to `runnerVnetId`, which must resolve through it already (a VNet can be linked to
    one zone of a name). Microsoft's pattern for private endpoints shared across VNets: one zone per name, linked to
    every VNet that resolves it (private-endpoint-dns-integration). The deployer needs Private DNS Zone Contributor
    on each; one in another subscription is written through a provider for that subscription."""


_clock = matching(r"([01]\d|2[0-3]):[0-5]\d", "must be a time HH:MM, 00:00 to 23:59")


_utc_offset = matching(r"[+-](0\d|1[0-4]):(00|30|45)", "must be a UTC offset such as +00:00 or -05:00")


class MaintenanceWindowConfig(ConfigModel):
    """When AKS may upgrade Kubernetes and node images (the upgrade channels): each upgraded node is drained, so
    its GPU pods restart elsewhere (docs/observability.md: what an upgrade costs)."""

    day: DayOfWeek = DayOfWeek.SUNDAY
    """Day of the week."""
    start_time: Annotated[str, _clock] = "00:00"
    """Start, `HH:MM` in `utcOffset`."""
    duration_hours: int = Field(4, ge=4, le=24)
    """Length in hours; AKS asks for at least 4."""
    utc_offset: Annotated[str, _utc_offset] = "+00:00"
    """The window's time zone as an offset from UTC."""

    @property
    def window(self) -> MaintenanceWindow:
        return MaintenanceWindow(self.day, self.start_time, self.duration_hours, self.utc_offset)


class AutoscalerConfig(ConfigModel):
    """Cluster autoscaler profile; the defaults scale idle GPU nodes down after 10 minutes."""

    scan_interval: Annotated[str, _duration("s", "10s")] = "10s"
    """How often the autoscaler looks for pending pods and idle nodes."""
    scale_down_unneeded_time: Minutes = "10m"
    """How long a node must be unneeded before it is removed."""
    scale_down_delay_after_add: Minutes = "10m"
    """How long after a scale-up the autoscaler waits before scaling down."""
    max_node_provision_time: Minutes = "15m"
    """GPU nodes boot slowly (a driver the operator compiles takes minutes more); give them time before giving up."""
    expander: Expander = Expander.LEAST_WASTE
    """Which pool grows when several could take a pending pod."""
    skip_nodes_with_local_storage: bool = False
    """False so pods with emptyDir scratch space do not pin expensive GPU nodes."""

    @property
    def provision_minutes(self) -> int:
        """``max_node_provision_time`` in minutes."""
        return int(self.max_node_provision_time.rstrip("m"))


class Pool(ConfigModel):
    """What every AKS agent pool has (system, CPU or GPU); each kind has its own defaults."""

    name: PoolName
    vm_size: VmSize
    min_count: MinCount
    max_count: MaxCount
    count: int | None = derived("minCount")
    """Initial node count (min ≤ count ≤ max); the autoscaler owns it afterwards."""
    priority: Priority = Priority.REGULAR
    """`spot` (evicted when Azure needs the capacity, a fraction of the price) or `regular`."""
    spot_max_price: Annotated[float, AfterValidator(_spot_price)] = -1.0
    """Spot price cap in USD per hour; -1 pays up to the on-demand price and never evicts on price."""
    labels: dict[str, str] = {}
    """Extra node labels (not in AKS's own `kubernetes.azure.com/` namespace)."""
    os_disk_size_gb: int = Field(128, ge=30, le=2048)
    """OS disk size; GPU images and container layers are large."""
    zones: tuple[Zone, ...] = ()
    """Availability zones (1, 2, 3); empty lets Azure place nodes where capacity is."""

    @property
    def spot(self) -> bool:
        return self.priority == Priority.SPOT

    @property
    def initial_count(self) -> int:
        return self.min_count if self.count is None else self.count


class SystemPool(Pool):
    """`cluster.systemPool`: regular, never spot (AKS refuses spot system pools); two nodes of 4 vCPU, as AKS asks of
    production system pools (use-system-pools), because NFD, the operator and the CSI controllers run there."""

    name: PoolName = "system"
    vm_size: VmSize = "Standard_D4ds_v5"
    min_count: MinCount = 2
    max_count: MaxCount = 3


class CpuPool(Pool):
    """Each `cpuPools[]` entry."""

    name: PoolName = "cpu"
    vm_size: VmSize = "Standard_D4ds_v5"
    min_count: MinCount = 0
    max_count: MaxCount = 3


class SharingConfig(ConfigModel):
    mode: SharingMode = SharingMode.NONE
    """How pods share one GPU: `none`, `time-slicing`, `mps` or `mig`."""
    replicas: int | None = derived("2 for time-slicing and mps, else 1")
    """Pods that may share one GPU (time-slicing, mps); at least 2 when sharing."""
    mig_profile: Literal[tuple(MIG_INSTANCES_PER_GPU)] | None = None  # type: ignore[valid-type]
    """MIG instance profile (`MIG1g` ... `MIG7g`) for `mig`; fixed when the pool is created."""

    @property
    def shares(self) -> int:
        """Replicas, resolved: 2 for time-slicing and MPS unless set, 1 otherwise."""
        if self.replicas is not None:
            return self.replicas
        return 2 if self.mode.has_replicas else 1


class GpuPool(Pool):
    """Each `gpuPools[]` entry: spot, because the scenarios are demos and spot GPUs cost a fraction."""

    name: PoolName = "gpu"
    vm_size: Annotated[VmSize, AfterValidator(_gpu_size)] = "Standard_NC4as_T4_v3"
    min_count: MinCount = 0
    max_count: MaxCount = 1
    priority: Priority = Priority.SPOT
    driver: GpuDriver | None = derived("precompiled; install for GRID sizes (A10) and MIG pools")
    """Who installs the GPU driver (docs/gpu-software.md compares them). `precompiled`: the GPU operator, from
    NVIDIA's precompiled image for the node's kernel, compiling it where NVIDIA has not built that kernel yet.
    `none`: the GPU operator compiles it on each new node. `install`: AKS, from its node image (GRID sizes and MIG
    pools need it)."""
    sharing: SharingConfig = SharingConfig()
    """How pods share one GPU."""
    provisioning: Provisioning = Provisioning.AUTOSCALER
    """`autoscaler`: an AKS agent pool of `vmSize` the cluster autoscaler scales between `minCount` and `maxCount`.
    `nap`: node auto-provisioning (Karpenter) creates up to `maxCount` nodes of `vmSize` or an `alternativeVmSizes`
    size for pending GPU pods, spot first and then on-demand for a spot pool, and removes empty ones; `minCount`
    must be 0, and nothing else in the stack may autoscale (AKS runs NAP without the cluster autoscaler)."""
    alternative_vm_sizes: tuple[Annotated[VmSize, AfterValidator(_gpu_size)], ...] = ()
    """`nap` only: other sizes NAP may create when `vmSize` cannot be had, each with the same GPU model and count."""
    capacity_reservation_group: Annotated[str, valid(naming.capacity_reservation_group_id_error)] | None = None
    """Resource id of a capacity reservation group whose reserved VMs this regular (on-demand) pool takes, so its
    nodes are there when it scales (use-capacity-reservation-groups). The cluster then runs as a user-assigned
    identity with Contributor on the group's resource group, as AKS requires; the group, its reservations of this
    size in the pool's zones, and the quota they hold are yours to make, and the capacity preflight checks them."""

    @property
    def size(self) -> GpuSize:
        """The VM size's catalogue entry (GPU model, count, memory)."""
        return lookup_gpu_size(self.vm_size)

    @property
    def gpu_driver(self) -> GpuDriver:
        """``driver``, resolved: the GPU operator's precompiled driver, but AKS's where only AKS can (GRID, MIG)."""
        if self.driver is not None:
            return self.driver
        if self.size.grid or self.sharing.mode == SharingMode.MIG:
            return GpuDriver.INSTALL
        return GpuDriver.PRECOMPILED

    @property
    def nap(self) -> bool:
        return self.provisioning == Provisioning.NAP

    @property
    def vm_sizes(self) -> tuple[str, ...]:
        """Every size the pool's nodes may have: `vmSize` first."""
        return (self.vm_size, *self.alternative_vm_sizes)

    @property
    def gpu(self) -> GpuNodes:
        """What the pool's nodes offer, as the GPU software and workloads take it."""
        return GpuNodes(self.name, self.size, self.gpu_driver, self.sharing.mode, self.sharing.shares,
                        self.sharing.mig_profile)

    @property
    def schedulable_gpus_per_node(self) -> int:
        return self.gpu.per_node

    def replica_bounds(self, reserved: int = 0, sharers: int = 1) -> tuple[int, int]:
        """Replicas of one of ``sharers`` GPU Deployments (a GPU or share each) on this pool, ``reserved`` shares
        taken by others: at rest what the minimum nodes hold (at least 1), at most what the maximum holds."""
        per_node = self.schedulable_gpus_per_node
        most = max(1, (per_node * self.max_count - reserved) // sharers)
        return min(most, max(1, (per_node * self.min_count - reserved) // sharers)), most


class ClusterConfig(ConfigModel):
    kubernetes_version: Annotated[Annotated[str, _version] | None, BeforeValidator(_version_text)] = \
        derived("AKS's default")
    """Kubernetes minor or patch version, such as `1.33`."""
    sku_tier: SkuTier = SkuTier.FREE
    """`Free` (no SLA, fine for demos), `Standard` (uptime SLA) or `Premium`."""
    private: bool = False
    """Private API server: `pulumi up` must then run where it resolves the private endpoint."""
    authorized_ip_ranges: tuple[Cidr, ...] = ()
    """CIDRs allowed to reach a public API server (the egress of everyone and everything that runs kubectl or
    `pulumi up`). A public API server needs them, or `openApiServer`."""
    open_api_server: bool = False
    """Accept a public API server open to every address (Entra ID still required), for deployers without fixed
    egress IPs such as GitHub-hosted runners; the cluster is tagged `security-exception: open-api-server`."""
    local_accounts: bool = False
    """Keep AKS local (admin certificate) accounts; off means Entra ID only and no admin kubeconfig."""
    admin_group_object_ids: tuple[Annotated[str, _guid], ...] = ()
    """Entra ID groups made cluster admins."""
    grant_deployer_admin: bool = True
    """Give the identity running `pulumi up` what the stack needs it to have: AKS RBAC Cluster Admin (to install
    workloads) and the blob data roles of the commands the stack outputs."""
    deployer_principal_type: PrincipalType = PrincipalType.USER
    """`User` for a person, `ServicePrincipal` for CI; Azure refuses an assignment whose type is wrong."""
    deployer_object_id: Annotated[str, _guid] | None = None
    """The Entra ID object id of the identity that deploys the stack, which `grantDeployerAdmin` grants to; default:
    the identity running Pulumi. The workflows set the deploy app's, so a preview run as the preview app shows the
    grants as deployed."""
    network_policy: NetworkPolicy = NetworkPolicy.CILIUM
    """Network policy engine: `cilium` (Azure CNI powered by Cilium) or `calico`."""
    upgrade_channel: UpgradeChannel = UpgradeChannel.PATCH
    """Automatic Kubernetes upgrades (`node-image` is legacy and forces `nodeOsUpgradeChannel: NodeImage`)."""
    node_os_upgrade_channel: NodeOsUpgradeChannel = NodeOsUpgradeChannel.NODE_IMAGE
    """Node OS updates."""
    maintenance_window: MaintenanceWindowConfig = MaintenanceWindowConfig()
    """When both channels may upgrade: weekly, outside working hours by default."""
    managed_blob_csi_driver: bool = False
    """Turn on the AKS-managed Blob CSI driver instead of the Helm-installed one (never both)."""
    login_mode: Annotated[LoginMode, BeforeValidator(_no_devicecode)] = LoginMode.AZURECLI
    """How kubelogin gets tokens for the program's Kubernetes provider."""
    system_pool: SystemPool = SystemPool()
    """The regular (never spot) system pool."""
    autoscaler: AutoscalerConfig = AutoscalerConfig()
    """Cluster autoscaler profile."""


class RegistryConfig(ConfigModel):
    enabled: bool = True
    """Create an Azure Container Registry attached to the cluster."""
    name: Annotated[str, valid(naming.acr_name_error)] | None = derived("derived from the naming root")
    """Registry name (globally unique, 5-50 letters and digits)."""
    sku: RegistrySku = RegistrySku.STANDARD
    """`Basic`, `Standard` or `Premium` (private mode needs Premium)."""
    private: bool = False
    """Public network access off; reached through a private endpoint in the VNet."""


_role = matching(r"[a-z][a-z0-9]{0,7}", "must be 1-8 lowercase letters and digits starting with a letter")


class StorageAccountConfig(ConfigModel):
    role: Annotated[str, _role] = "data"
    """What the account holds, e.g. `input`: 1-8 lowercase letters and digits, part of its derived name."""
    containers: tuple[Annotated[str, valid(naming.blob_container_name_error)], ...] | None = derived(
        "one named after the role", min_length=1)
    """Blob containers to create; each becomes a blob volume of the same name in the scenario's namespace."""
    name: Annotated[str, valid(naming.storage_account_name_error)] | None = derived(
        "derived from the naming root and role")
    """Account name (3-24 lowercase letters and digits, globally unique)."""
    protect: bool = False
    """Refuse `pulumi destroy` of this account (a demo must not delete someone's results)."""

    @property
    def container_names(self) -> tuple[str, ...]:
        return self.containers if self.containers is not None else (self.role,)


class StorageConfig(ConfigModel):
    accounts: tuple[StorageAccountConfig, ...] = ()
    """Storage accounts, one per role."""
    private: bool | None = derived("cluster.private")
    """Public network access off; blob private endpoints in the VNet."""
    auth: StorageAuth = StorageAuth.IDENTITY
    """`identity`: a managed identity with Storage Blob Data Contributor, shared keys off. `sas`: a container SAS
    token in a Kubernetes Secret (seed 003's way)."""
    sas_expiry_days: int = Field(7, ge=1, le=365)
    """SAS lifetime in days in `sas` mode."""


class AddonsConfig(ConfigModel):
    nfd: bool = True
    """Node Feature Discovery as its own release (as seed 003); off lets the GPU operator bundle its own."""
    gpu_operator: bool = True
    """NVIDIA GPU operator: driver and toolkit (for `driver: precompiled` or `none` pools), device plugin, GFD and
    the DCGM exporter."""
    blob_csi: bool | None = derived("true when storage.accounts exist")
    """Helm-installed Azure Blob CSI driver."""
    smoke_test: bool = False
    """An nvidia-smi Job per GPU pool that proves GPUs are schedulable after `pulumi up`. An MPS pool gets its check
    anyway, as a non-root CUDA client of its MPS server."""
    gpu_node_repair: bool = True
    """A CronJob that cordons and drains a sick GPU node, one per pool at a time, so the autoscaler replaces it:
    AKS's Node Problem Detector's GPU conditions held 5 minutes (AKS-driver pools), a fatal XID, a failed row remap
    or a missing GPU in the DCGM exporter's figures (every pool), a failed GPU node gate check; a pool that cannot
    add a node gets the node marked and alerted, not cordoned. Off: the alerts only."""
    gpu_node_gate: bool = True
    """A new GPU node takes workloads only after a check of its GPUs passed (each GPU's matrix multiply rate and
    memory, InfiniBand ports up), run on it under a startup taint; a node that fails stays out and alerts. Its
    controller also moves a node to the compiled driver when NVIDIA has no precompiled one for its kernel. Needs
    the GPU operator and the registry (the check runs in the jobs image)."""
    image_pull_ahead: bool = True
    """Every new node of a GPU agent pool pulls its workloads' images as it joins, while its driver and device plugin
    start (a DaemonSet per image in namespace `pull-ahead-<pool>`); NAP pools never, their nodes pull one image at a
    time."""
    keda: bool = True
    """The AKS KEDA add-on: GPU workloads scale on metrics read from managed Prometheus (needs
    `monitoring.enabled`)."""
    kueue: bool = True
    """Kueue queues the GPU Jobs of scenarios that submit many at once, within their GPU pools' capacity."""
    network_operator: bool = False
    """NVIDIA's Network Operator on the InfiniBand GPU pools (ND sizes): the InfiniBand driver and the RDMA device
    plugin (`rdma/shared_ib`), and GPUDirect RDMA in the GPU operator; needs `nfd` and `gpuOperator`."""


_email = matching(r"[^@\s]+@[^@\s]+\.[^@\s]+", "must be one e-mail address such as ml-team@example.com")


class MonitoringConfig(ConfigModel):
    enabled: bool = True
    """Azure Monitor managed Prometheus: the GPU operator's DCGM metrics and the cluster's, and GPU alert rules
    (off for the cheapest development stacks)."""
    grafana: bool = False
    """An Azure Managed Grafana reading the workspace, to import `dashboards/gpu.json` into."""
    alert_email: Annotated[str, _email] | None = None
    """Who the alerts e-mail (an action group); unset: alerts only show in Azure Monitor."""
    idle_gpu_minutes: int = Field(30, ge=5, le=1440)
    """A GPU that stays at 0 % utilisation this long raises the idle-GPU (cost) alert."""
    autoscaler_logs: bool = False
    """Send the cluster autoscaler's logs to a Log Analytics workspace (control-plane diagnostic settings)."""


class BuildConfig(ConfigModel):
    mode: BuildMode = BuildMode.LOCAL
    """`local`: pulumi-docker builds with the Docker engine where `pulumi up` runs (GitHub-hosted runners have one) and
    pushes with an Entra token the deploy fetches. `acr`: `az acr build` runs an ACR Task that builds in Azure, for a
    machine without Docker; ACR Tasks are paused on Azure free credits and cannot push into a private registry."""


_region = valid(region_error)


def _name_root(value: str) -> str:
    if value and (error := naming.name_root_error(value)):
        raise ValueError(error)
    return value


_runner = matching(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,99})?",
                   "must be one runner label: letters, digits, '.', '_', '-'")


class StackConfig(ConfigModel):
    """The ``aksgpu:`` namespace of a stack file. The scenario's own section is ``settings``, read by the loader
    with the scenario's model; project and stack come from Pulumi."""

    scenario: str = "gpu-basics"
    """Which scenario this stack runs: a name registered in `stacks/__init__.py`."""
    environment: str = Field("", json_schema_extra={"defaultText": "the stack name"})
    """Environment name for the `environment` tag."""
    owner: Annotated[str, AfterValidator(_not_blank)] = "unassigned"
    """Team or person to ask about this stack (the `owner` tag on every Azure resource)."""
    lifetime: Lifetime = Lifetime.DEMO
    """`demo`: the expiry workflow destroys the stack `ttlHours` after its latest `pulumi up`; `long-lived`: never."""
    ttl_hours: int = Field(24, ge=1, le=expiry.MAX_TTL_HOURS)
    """Hours a demo stack lives after its latest `pulumi up`, rounded up to midnight UTC; tagged `expires-at` on the
    resource group. Longer lives: `lifetime: long-lived`."""
    location: Annotated[str, _region] = "eastus"
    """Azure region of every resource, by its name in Azure's API (`eastus`, not `East US`). Pick one with quota for
    the GPU sizes in `gpuPools`."""
    name_root: Annotated[str, AfterValidator(_name_root)] = Field(
        "", json_schema_extra={"defaultText": "the stack name"})
    """Root of every Azure name (`rg-ROOT`, `aks-ROOT`, ...): 2-20 lowercase letters, digits, hyphens."""
    ci_runner: Annotated[str, _runner] = Field(
        "", json_schema_extra={"defaultText": "GitHub-hosted ubuntu-24.04"})
    """Label of the self-hosted GitHub Actions runner that previews, deploys and destroys this stack. A private
    cluster needs one in (or peered and DNS-linked to) its VNet: hosted runners cannot reach it, and the workflows
    skip a private stack without one."""
    network: NetworkConfig = NetworkConfig()
    """The VNet and the cluster's address ranges."""
    cluster: ClusterConfig = ClusterConfig()
    """The AKS cluster."""
    gpu_pools: tuple[GpuPool, ...] = (GpuPool(),)
    """GPU node pools, each its own agent pool."""
    cpu_pools: tuple[CpuPool, ...] = ()
    """Extra CPU user pools."""
    registry: RegistryConfig = RegistryConfig()
    """The stack's container registry."""
    storage: StorageConfig = StorageConfig()
    """Blob storage accounts mounted as volumes."""
    addons: AddonsConfig = AddonsConfig()
    """In-cluster software and AKS add-ons."""
    monitoring: MonitoringConfig = MonitoringConfig()
    """GPU metrics, alerts and the autoscaler's logs in Azure Monitor."""
    build: BuildConfig = BuildConfig()
    """How images under docker/ are built."""

    _project: str = PrivateAttr(PROJECT)
    _stack: str = PrivateAttr("stack")
    _settings: Any = PrivateAttr(None)
    _subscription: str = PrivateAttr("")

    @property
    def project(self) -> str:
        return self._project

    @property
    def stack(self) -> str:
        return self._stack

    @property
    def settings(self) -> Any:
        """The scenario's own section (its model), or None for a scenario without one."""
        return self._settings

    @property
    def subscription(self) -> str:
        """The Azure subscription the stack deploys into (``for_deployment``); empty before the program asks."""
        return self._subscription

    def for_deployment(self, subscription_id: str) -> StackConfig:
        """This config as deployed into ``subscription_id``: its globally unique names are seeded with it."""
        deployed = self.model_copy()
        deployed._subscription = subscription_id
        return deployed

    @property
    def naming(self) -> Naming:
        """Physical names, all derived from the naming root; global ones also from the deployment's subscription."""
        return Naming(self.name_root, unique_seed=f"{self.subscription}/{self.project}/{self.stack}")

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
        if self.lifetime == Lifetime.LONG_LIVED:
            return self.tags
        return {**self.tags, expiry.EXPIRES_AT: expiry.expires_at(now, self.ttl_hours)}

    @property
    def private_endpoints_or_api_server(self) -> bool:
        """Something of the stack is reachable only from its VNet or one linked to it."""
        return self.cluster.private or (self.registry.enabled and self.registry.private) or \
            bool(self.storage.accounts and self.storage.private)

    @property
    def private_services(self) -> list[str]:
        """Private Link services the stack's VNet must resolve (``registry``, ``blob``)."""
        services = []
        if self.registry.enabled and self.registry.private:
            services.append("registry")
        if self.storage.accounts and self.storage.private:
            services.append("blob")
        return services

    @property
    def runner_zones(self) -> list[str]:
        """The private DNS zones of the stack's own that it links to ``network.runnerVnetId`` (none without one):
        its private services' not named in ``network.privateDnsZoneIds``."""
        if self.network.runner_vnet_id is None:
            return []
        return [PRIVATE_DNS_ZONES[s] for s in self.private_services if s not in self.network.private_dns_zone_ids]

    @property
    def node_auto_provisioning(self) -> bool:
        """A GPU pool is provisioned by NAP: the cluster runs Karpenter and no pool autoscales."""
        return any(g.nap for g in self.gpu_pools)

    def gpu_pool(self, name: str) -> GpuPool:
        return next(p for p in self.gpu_pools if p.name == name)

    def pick_gpu_pool(self, name: str | None = None,
                      where: Callable[[GpuPool], bool] = lambda pool: True) -> GpuPool | None:
        """The GPU pool a scenario's workload goes to: the one its config names, else the first that ``where``
        accepts (None when none does; ``rules.unknown_gpu_pool`` reports a name that is not a pool)."""
        if name is not None:
            return next((p for p in self.gpu_pools if p.name == name), None)
        return next((p for p in self.gpu_pools if where(p)), None)

    def storage_account_name(self, account: StorageAccountConfig) -> str:
        """The account's physical name: from config, or derived from the naming root and its role."""
        return account.name or self.naming.storage_account(account.role)

    def storage_account(self, role: str) -> StorageAccountConfig:
        return next(a for a in self.storage.accounts if a.role == role)

    @property
    def registry_name(self) -> str:
        return self.registry.name or self.naming.registry()


SYSTEM_POOL_DEFAULTS, CPU_POOL_DEFAULTS, GPU_POOL_DEFAULTS = SystemPool(), CpuPool(), GpuPool()
