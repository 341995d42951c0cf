"""The schema of a stack's configuration: every key's type, default and documentation, in one place.

Each field's docstring documents the config key of the same name in camelCase (``ttl_hours`` is
``ttlHours``); ``docs/configuration.md`` is generated from them (``python -m offline docs``). Field metadata
marks the exceptions: a differently named key (``key``), a value the loader derives rather than reads
(``derived``), a default that depends on other keys (``default_text``). Closed sets are ``StrEnum``s, so a
component never re-checks a value the type already rules out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from stackconfig import expiry
from stackconfig.expiry import Lifetime
from stackconfig.gpu_sizes import GPU_SIZES, GpuSize
from stackconfig.naming import Naming

PROJECT = "aksgpu"
"""The Pulumi project name, and the namespace of every config key."""
HOLDS_DATA = "holds-data"
"""Tag: ``false`` on storage the program can recreate at will (build contexts), which the pull-request guard
lets a preview replace; data accounts carry no such tag."""
SECURITY_EXCEPTION = "security-exception"
"""Tag naming the one deliberate departure from the security baseline a resource makes (a ``SecurityException``
value); the policy pack accepts exactly these, and docs/security.md justifies each."""


def key(name: str) -> dict[str, Any]:
    """Metadata: the config key differs from the camelCase field name."""
    return {"key": name}


DERIVED = {"derived": True}
"""Metadata: the loader computes the field; it is not a config key."""


def default_text(text: str) -> dict[str, Any]:
    """Metadata: the default depends on other keys; ``text`` says how."""
    return {"default_text": text}


# Closed sets ------------------------------------------------------------------------------------------------

class Priority(StrEnum):
    REGULAR = "regular"
    SPOT = "spot"


class GpuDriver(StrEnum):
    NONE = "none"
    """AKS skips its GPU driver; the NVIDIA GPU operator installs driver and container toolkit."""
    INSTALL = "install"
    """AKS installs the driver (GRID sizes such as A10, MIG pools); the operator must not."""


class SharingMode(StrEnum):
    NONE = "none"
    TIME_SLICING = "time-slicing"
    MPS = "mps"
    MIG = "mig"

    @property
    def has_replicas(self) -> bool:
        """Time-slicing and MPS advertise one GPU as ``replicas`` schedulable shares."""
        return self in (SharingMode.TIME_SLICING, SharingMode.MPS)


class SkuTier(StrEnum):
    FREE = "Free"
    STANDARD = "Standard"
    PREMIUM = "Premium"


class NetworkPolicy(StrEnum):
    """``azure`` (Azure Network Policy Manager) is not offered: its Linux support ends 30 Sep 2028."""

    CILIUM = "cilium"
    CALICO = "calico"


class UpgradeChannel(StrEnum):
    PATCH = "patch"
    STABLE = "stable"
    RAPID = "rapid"
    NODE_IMAGE = "node-image"


class NodeOsUpgradeChannel(StrEnum):
    NODE_IMAGE = "NodeImage"
    SECURITY_PATCH = "SecurityPatch"
    UNMANAGED = "Unmanaged"


class PrincipalType(StrEnum):
    USER = "User"
    SERVICE_PRINCIPAL = "ServicePrincipal"
    GROUP = "Group"


class LoginMode(StrEnum):
    """kubelogin's non-interactive modes; ``devicecode`` waits for a browser and is never offered."""

    AZURECLI = "azurecli"
    SPN = "spn"
    WORKLOAD_IDENTITY = "workloadidentity"
    MSI = "msi"


class Expander(StrEnum):
    LEAST_WASTE = "least-waste"
    RANDOM = "random"
    MOST_PODS = "most-pods"
    PRIORITY = "priority"


class RegistrySku(StrEnum):
    BASIC = "Basic"
    STANDARD = "Standard"
    PREMIUM = "Premium"


class StorageAuth(StrEnum):
    IDENTITY = "identity"
    SAS = "sas"


class BuildMode(StrEnum):
    ACR = "acr"
    LOCAL = "local"


class Exposure(StrEnum):
    INTERNAL = "internal"
    PUBLIC = "public"


class SecurityException(StrEnum):
    """Values of the ``security-exception`` tag."""

    OPEN_API_SERVER = "open-api-server"
    """A public API server without authorized IP ranges (Entra ID still required): ``cluster.openApiServer``."""
    SHARED_KEY_BUILD_CONTEXT = "shared-key-build-context"
    """The build-context account keeps shared keys and public access: ACR Tasks fetch contexts by SAS URL."""
    BASELINE_OPERATOR_PODS = "baseline-operator-pods"
    """A workload namespace at the baseline Pod Security level, not restricted: KAITO 0.6.0's inference pods (which
    its controller writes) set no security context, so restricted admission would refuse them."""


# Sections ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NetworkConfig:
    address_space: str = "10.20.0.0/16"
    """VNet address space."""
    node_subnet: str = "10.20.0.0/20"
    """Subnet for AKS nodes, inside the VNet; with CNI overlay pods do not use it."""
    endpoint_subnet: str = "10.20.16.0/24"
    """Subnet for the private endpoints of the registry and storage, inside the VNet."""
    pod_cidr: str = "192.168.0.0/16"
    """Overlay pod range; must not overlap the VNet."""
    service_cidr: str = "172.16.0.0/16"
    """Kubernetes service range; must not overlap the VNet or pods."""
    dns_service_ip: str = "172.16.0.10"
    """Cluster DNS address inside the service range."""


@dataclass(frozen=True)
class AutoscalerConfig:
    """Cluster autoscaler profile; the defaults scale idle GPU nodes down after 10 minutes."""

    scan_interval: str = "10s"
    """How often the autoscaler looks for pending pods and idle nodes."""
    scale_down_unneeded_time: str = "10m"
    """How long a node must be unneeded before it is removed."""
    scale_down_delay_after_add: str = "10m"
    """How long after a scale-up the autoscaler waits before scaling down."""
    max_node_provision_time: str = "15m"
    """GPU nodes boot slowly (driver install through the operator); give them time before giving up."""
    expander: Expander = Expander.LEAST_WASTE
    """Which pool grows when several could take a pending pod."""
    skip_nodes_with_local_storage: bool = False
    """False so pods with emptyDir scratch space do not pin expensive GPU nodes."""

    @property
    def provision_minutes(self) -> int:
        """``max_node_provision_time`` in minutes (the loader accepts whole minutes only, such as ``15m``)."""
        return int(self.max_node_provision_time.rstrip("m"))


@dataclass(frozen=True)
class PoolConfig:
    """One AKS agent pool (system, CPU or GPU). Each kind has its own defaults (``*_POOL_DEFAULTS``)."""

    name: str
    """Agent pool name, ``^[a-z][a-z0-9]{0,11}$``; unique in the cluster."""
    vm_size: str
    """Azure VM size."""
    min_count: int
    """Autoscaler minimum; 0 lets a user pool scale to zero."""
    max_count: int
    """Autoscaler maximum (1-1000)."""
    count: int = field(default=0, metadata=default_text("minCount"))
    """Initial node count (min ≤ count ≤ max); the autoscaler owns it afterwards."""
    priority: Priority = Priority.REGULAR
    """``spot`` (evicted when Azure needs the capacity, a fraction of the price) or ``regular``."""
    spot_max_price: float = -1.0
    """Spot price cap in USD per hour; -1 pays up to the on-demand price and never evicts on price."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra node labels (not in AKS's own ``kubernetes.azure.com/`` namespace)."""
    os_disk_size_gb: int = 128
    """OS disk size (30-2048); GPU images and container layers are large."""
    zones: tuple[str, ...] = ()
    """Availability zones (1, 2, 3); empty lets Azure place nodes where capacity is."""

    @property
    def spot(self) -> bool:
        return self.priority == Priority.SPOT


SYSTEM_POOL_DEFAULTS = PoolConfig(name="system", vm_size="Standard_D4ds_v5", min_count=2, max_count=3, count=2)
"""``cluster.systemPool``: regular, never spot (AKS refuses spot system pools); two nodes of 4 vCPU, as AKS asks
of production system pools (use-system-pools), because NFD, the operator and the CSI controllers run there."""
CPU_POOL_DEFAULTS = PoolConfig(name="cpu", vm_size="Standard_D4ds_v5", min_count=0, max_count=3)
"""Each ``cpuPools[]`` entry."""
GPU_POOL_DEFAULTS = PoolConfig(name="gpu", vm_size="Standard_NC4as_T4_v3", min_count=0, max_count=1,
                               priority=Priority.SPOT)
"""Each ``gpuPools[]`` entry: spot, because the scenarios are demos and spot GPUs cost a fraction."""

MIG_INSTANCES_PER_GPU = {"MIG1g": 7, "MIG2g": 3, "MIG3g": 2, "MIG4g": 1, "MIG7g": 1}
"""GPU instances one A100/H100 splits into per AKS ``gpuInstanceProfile`` (AKS multi-instance GPU docs)."""


@dataclass(frozen=True)
class SharingConfig:
    mode: SharingMode = SharingMode.NONE
    """How pods share one GPU: ``none``, ``time-slicing``, ``mps`` or ``mig``."""
    replicas: int = field(default=1, metadata=default_text("2 for time-slicing and mps, else 1"))
    """Pods that may share one GPU (time-slicing, mps); at least 2 when sharing."""
    mig_profile: str | None = None
    """MIG instance profile (``MIG1g`` ... ``MIG7g``) for ``mig``; fixed when the pool is created."""


@dataclass(frozen=True)
class GpuPoolConfig:
    pool: PoolConfig = field(metadata={"flatten": True})
    """The agent pool settings (their keys sit beside ``driver`` and ``sharing``)."""
    size: GpuSize = field(metadata=DERIVED)
    """The VM size's catalogue entry (GPU model, count, memory)."""
    driver: GpuDriver = GpuDriver.NONE
    """``none``: AKS skips its GPU driver and the NVIDIA GPU operator installs it.
    ``install``: AKS installs it and the operator must not (GRID sizes such as A10, MIG pools)."""
    sharing: SharingConfig = SharingConfig()
    """How pods share one GPU."""

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def schedulable_gpus_per_node(self) -> int:
        """``nvidia.com/gpu`` a node advertises: GPUs × replicas (time-slicing, MPS) or × MIG instances."""
        if self.sharing.mode.has_replicas:
            return self.size.gpus * self.sharing.replicas
        if self.sharing.mode == SharingMode.MIG and self.sharing.mig_profile:
            return self.size.gpus * MIG_INSTANCES_PER_GPU[self.sharing.mig_profile]
        return self.size.gpus


DEFAULT_GPU_POOL = GpuPoolConfig(pool=GPU_POOL_DEFAULTS, size=GPU_SIZES[GPU_POOL_DEFAULTS.vm_size])
"""What ``gpuPools`` holds when a stack does not set it: one entry with every default."""


@dataclass(frozen=True)
class ClusterConfig:
    kubernetes_version: str | None = field(default=None, metadata=default_text("AKS's default"))
    """Kubernetes minor or patch version, such as ``1.33``."""
    sku_tier: SkuTier = SkuTier.FREE
    """``Free`` (no SLA, fine for demos), ``Standard`` (uptime SLA) or ``Premium``."""
    private: bool = False
    """Private API server: ``pulumi up`` must then run where it resolves the private endpoint."""
    authorized_ip_ranges: tuple[str, ...] = ()
    """CIDRs allowed to reach a public API server (the egress of everyone and everything that runs kubectl or
    ``pulumi up``). A public API server needs them, or ``openApiServer``."""
    open_api_server: bool = False
    """Accept a public API server open to every address (Entra ID still required), for deployers without fixed
    egress IPs such as GitHub-hosted runners; the cluster is tagged ``security-exception: open-api-server``."""
    local_accounts: bool = False
    """Keep AKS local (admin certificate) accounts; off means Entra ID only and no admin kubeconfig."""
    admin_group_object_ids: tuple[str, ...] = ()
    """Entra ID groups made cluster admins."""
    grant_deployer_admin: bool = True
    """Give the identity running ``pulumi up`` what the stack needs it to have: AKS RBAC Cluster Admin (to install
    workloads) and the blob data roles of the commands the stack outputs."""
    deployer_principal_type: PrincipalType = PrincipalType.USER
    """``User`` for a person, ``ServicePrincipal`` for CI; Azure refuses an assignment whose type is wrong."""
    network_policy: NetworkPolicy = NetworkPolicy.CILIUM
    """Network policy engine: ``cilium`` (Azure CNI powered by Cilium) or ``calico``."""
    upgrade_channel: UpgradeChannel = UpgradeChannel.PATCH
    """Automatic Kubernetes upgrades (``node-image`` is legacy and forces ``nodeOsUpgradeChannel: NodeImage``)."""
    node_os_upgrade_channel: NodeOsUpgradeChannel = NodeOsUpgradeChannel.NODE_IMAGE
    """Node OS updates."""
    managed_blob_csi_driver: bool = False
    """Turn on the AKS-managed Blob CSI driver instead of the Helm-installed one (never both)."""
    login_mode: LoginMode = LoginMode.AZURECLI
    """How kubelogin gets tokens for the program's Kubernetes provider."""
    system_pool: PoolConfig = SYSTEM_POOL_DEFAULTS
    """The regular (never spot) system pool."""
    autoscaler: AutoscalerConfig = AutoscalerConfig()
    """Cluster autoscaler profile."""


@dataclass(frozen=True)
class RegistryConfig:
    enabled: bool = True
    """Create an Azure Container Registry attached to the cluster."""
    name: str | None = field(default=None, metadata=default_text("derived from the naming root"))
    """Registry name (globally unique, 5-50 letters and digits)."""
    sku: RegistrySku = RegistrySku.STANDARD
    """``Basic``, ``Standard`` or ``Premium`` (private mode needs Premium)."""
    private: bool = False
    """Public network access off; reached through a private endpoint in the VNet."""


@dataclass(frozen=True)
class StorageAccountConfig:
    role: str = "data"
    """What the account holds, e.g. ``input``: 1-8 lowercase letters and digits, part of its derived name."""
    containers: tuple[str, ...] = field(default=(), metadata=default_text("one named after the role"))
    """Blob containers to create; each becomes a blob volume of the same name in the scenario's namespace."""
    name: str | None = field(default=None, metadata=default_text("derived from the naming root and role"))
    """Account name (3-24 lowercase letters and digits, globally unique)."""
    protect: bool = False
    """Refuse ``pulumi destroy`` of this account (a demo must not delete someone's results)."""


@dataclass(frozen=True)
class StorageConfig:
    accounts: tuple[StorageAccountConfig, ...] = ()
    """Storage accounts, one per role."""
    private: bool = field(default=False, metadata=default_text("cluster.private"))
    """Public network access off; blob private endpoints in the VNet."""
    auth: StorageAuth = StorageAuth.IDENTITY
    """``identity``: a managed identity with Storage Blob Data Contributor, shared keys off.
    ``sas``: a container SAS token in a Kubernetes Secret (seed 003's way)."""
    sas_expiry_days: int = 7
    """SAS lifetime in days (1-365) in ``sas`` mode."""


@dataclass(frozen=True)
class AddonsConfig:
    nfd: bool = True
    """Node Feature Discovery as its own release (as seed 003); off lets the GPU operator bundle its own."""
    gpu_operator: bool = True
    """NVIDIA GPU operator: driver (for ``driver: none`` pools), toolkit, device plugin, GFD, DCGM exporter."""
    blob_csi: bool = field(default=False, metadata=default_text("true when storage.accounts exist"))
    """Helm-installed Azure Blob CSI driver."""
    smoke_test: bool = False
    """An nvidia-smi Job per GPU pool that proves GPUs are schedulable after ``pulumi up``."""
    keda: bool = True
    """The AKS KEDA add-on: the function and the inference services scale on their GPU utilisation read from
    managed Prometheus (needs ``monitoring.enabled``)."""
    kueue: bool = True
    """Kueue queues the Job fan-outs of av-resim and training-autoscale within their GPU pools' capacity."""


@dataclass(frozen=True)
class MonitoringConfig:
    enabled: bool = True
    """Azure Monitor managed Prometheus: the GPU operator's DCGM metrics and the cluster's, and GPU alert rules
    (off for the cheapest development stacks)."""
    grafana: bool = False
    """An Azure Managed Grafana reading the workspace, to import ``dashboards/gpu.json`` into."""
    alert_email: str | None = None
    """Who the alerts e-mail (an action group); unset: alerts only show in Azure Monitor."""
    idle_gpu_minutes: int = 30
    """A GPU that stays at 0 % utilisation this long raises the idle-GPU (cost) alert (5-1440)."""
    autoscaler_logs: bool = False
    """Send the cluster autoscaler's logs to a Log Analytics workspace (control-plane diagnostic settings)."""


@dataclass(frozen=True)
class BuildConfig:
    mode: BuildMode = BuildMode.ACR
    """``acr``: an ACR Task run builds in Azure (no Docker needed where ``pulumi up`` runs).
    ``local``: the Docker engine where ``pulumi up`` runs builds and pushes (``az acr login`` first)."""


@dataclass(frozen=True)
class FunctionConfig:
    pool: str | None = field(default=None, metadata=default_text("the first GPU pool"))
    """GPU pool the function's Deployment runs on (one GPU per replica)."""
    exposure: Exposure = Exposure.INTERNAL
    """``internal``: a LoadBalancer IP in the VNet only (reach it from the VNet or with ``kubectl port-forward``);
    ``public``: a public IP as in seed 000, open only to ``allowedSourceRanges``."""
    allowed_source_ranges: tuple[str, ...] = field(
        default=(), metadata=default_text("internal: network.addressSpace; public: none, so required"))
    """CIDRs that may reach the LoadBalancer (``loadBalancerSourceRanges``). Add peered or VPN ranges for an
    internal function called from outside its VNet."""
    max_context_chars: int = 20_000
    """Longest context ``/api/answer`` accepts (100-200000; longer gets a 400)."""
    target_gpu_utilisation: int = 60
    """With KEDA: each replica's GPU utilisation (%) to aim for; above it, more replicas and GPU nodes (10-100)."""


@dataclass(frozen=True)
class WorkloadsConfig:
    inference_services: int = 3
    """gpu-sharing: independent inference Deployments on the shared GPU (1-16)."""
    notebook: bool = True
    """gpu-sharing: a Jupyter notebook that takes one more share of the GPU."""
    resim_jobs: int = 20
    """av-resim: parallel re-simulation shards, pods of the gpu-io Indexed Job (1-1000)."""
    gpu_test_jobs: int = 10
    """av-resim: parallel GPU load pods, the gpu-test Indexed Job (1-100)."""
    large_model_image: str | None = None
    """av-resim: your image (tag or digest, not ``latest``) for the 2-GPU job on the multi-GPU pool; unset: no
    template."""
    training_steps: int = 2000
    """gpu-basics and training-autoscale: optimisation steps of the training Job (1-1000000)."""
    parallel_training_runs: int = 3
    """training-autoscale: training runs the ``submitTrainingRuns`` output starts at once (1-50)."""


@dataclass(frozen=True)
class StackConfig:
    project: str = field(metadata=DERIVED)
    """The Pulumi project."""
    stack: str = field(metadata=DERIVED)
    """The Pulumi stack."""
    scenario: str = "gpu-basics"
    """Which scenario this stack runs: a name registered in ``stacks/__init__.py`` (docs/scenarios/)."""
    environment: str = field(default="", metadata=default_text("the stack name"))
    """Environment name for the ``environment`` tag."""
    owner: str = "unassigned"
    """Team or person to ask about this stack (the ``owner`` tag on every Azure resource)."""
    lifetime: Lifetime = Lifetime.DEMO
    """``demo``: the expiry workflow destroys the stack ``ttlHours`` after its latest ``pulumi up``;
    ``long-lived``: never."""
    ttl_hours: int = 24
    """Hours a demo stack lives after its latest ``pulumi up``, rounded up to midnight UTC (1-720); tagged
    ``expires-at`` on the resource group."""
    location: str = "eastus"
    """Azure region of every resource. Pick one with quota for the GPU sizes in ``gpuPools``."""
    name_root: str = field(default="", metadata=default_text("the stack name"))
    """Root of every Azure name (``rg-ROOT``, ``aks-ROOT``, ...): 2-20 lowercase letters, digits, hyphens."""
    ci_runner: str = field(default="", metadata=default_text("GitHub-hosted ubuntu-24.04"))
    """Label of the self-hosted GitHub Actions runner that previews, deploys and destroys this stack. A private
    cluster needs one in (or peered and DNS-linked to) its VNet: hosted runners cannot reach it, and the workflows
    skip a private stack without one."""
    network: NetworkConfig = NetworkConfig()
    """The VNet and the cluster's address ranges."""
    cluster: ClusterConfig = ClusterConfig()
    """The AKS cluster."""
    gpu_pools: tuple[GpuPoolConfig, ...] = (DEFAULT_GPU_POOL,)
    """GPU node pools, each its own agent pool."""
    cpu_pools: tuple[PoolConfig, ...] = field(default=(), metadata={"item_default": CPU_POOL_DEFAULTS})
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
    function: FunctionConfig = FunctionConfig()
    """The GPU function (function-gpu)."""
    workloads: WorkloadsConfig = WorkloadsConfig()
    """Knobs of the scenarios' workloads."""
    settings: Any = field(default=None, metadata=DERIVED)
    """The scenario's own section (``stackconfig/settings/<scenario>.py``), read by the loader; None when the
    scenario has none."""

    @property
    def naming(self) -> Naming:
        """Physical names, all derived from the naming root."""
        return Naming(self.name_root, unique_seed=f"{self.project}/{self.stack}")

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

    def gpu_pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    def storage_account_name(self, account: StorageAccountConfig) -> str:
        """The account's physical name: from config, or derived from the naming root and its role."""
        return account.name or self.naming.storage_account(account.role)

    @property
    def registry_name(self) -> str:
        return self.registry.name or self.naming.registry()

    @property
    def function_pool(self) -> GpuPoolConfig:
        """The GPU pool the function runs on."""
        return self.gpu_pool(self.function.pool) if self.function.pool else self.gpu_pools[0]
