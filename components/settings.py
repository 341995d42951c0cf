"""Settings the components accept, parsed from config by ``stacks.config``.

Plain data, no Pulumi: the field docstrings document the config keys of the same names (camelCase there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from components.gpu_sizes import GpuSize


@dataclass(frozen=True)
class NetworkConfig:
    address_space: str = "10.20.0.0/16"
    """VNet address space (``network.addressSpace``)."""
    node_subnet: str = "10.20.0.0/20"
    """Subnet for AKS nodes; with CNI overlay pods do not use it (``network.nodeSubnet``)."""
    endpoint_subnet: str = "10.20.16.0/24"
    """Subnet for private endpoints of the registry and storage (``network.endpointSubnet``)."""
    pod_cidr: str = "192.168.0.0/16"
    """Overlay pod range; must not overlap the VNet (``network.podCidr``)."""
    service_cidr: str = "172.16.0.0/16"
    """Kubernetes service range; must not overlap the VNet or pods (``network.serviceCidr``)."""
    dns_service_ip: str = "172.16.0.10"
    """Cluster DNS address inside the service range (``network.dnsServiceIp``)."""


@dataclass(frozen=True)
class AutoscalerConfig:
    """Cluster autoscaler profile; the defaults scale idle GPU nodes down after 10 minutes."""

    scan_interval: str = "10s"
    scale_down_unneeded_time: str = "10m"
    """How long a node must be unneeded before it is removed."""
    scale_down_delay_after_add: str = "10m"
    max_node_provision_time: str = "15m"
    """GPU nodes boot slowly (driver install through the operator); give them time before giving up."""
    expander: str = "least-waste"
    skip_nodes_with_local_storage: bool = False
    """False so pods with emptyDir scratch space do not pin expensive GPU nodes."""


@dataclass(frozen=True)
class PoolConfig:
    """One AKS agent pool (system, CPU or GPU)."""

    name: str
    """Agent pool name, ``^[a-z][a-z0-9]{0,11}$``."""
    vm_size: str
    """Azure VM size."""
    min_count: int
    """Autoscaler minimum; 0 lets a user pool scale to zero."""
    max_count: int
    """Autoscaler maximum."""
    count: int
    """Initial node count (min ≤ count ≤ max); the autoscaler owns it afterwards."""
    spot: bool = False
    """Spot priority (evicted when Azure needs the capacity); on-demand when False."""
    spot_max_price: float = -1.0
    """Spot price cap in USD per hour; -1 means pay up to the on-demand price and never evict on price."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra node labels."""
    os_disk_size_gb: int = 128
    """OS disk size; GPU images and container layers are large."""
    zones: tuple[str, ...] = ()
    """Availability zones; empty lets Azure place nodes where capacity is."""


MIG_INSTANCES_PER_GPU = {"MIG1g": 7, "MIG2g": 3, "MIG3g": 2, "MIG4g": 1, "MIG7g": 1}
"""GPU instances one A100/H100 splits into per AKS ``gpuInstanceProfile`` (AKS multi-instance GPU docs)."""


@dataclass(frozen=True)
class SharingConfig:
    mode: str = "none"
    """``none``, ``time-slicing``, ``mps`` or ``mig``."""
    replicas: int = 1
    """Pods that may share one GPU (time-slicing, mps); at least 2 when sharing."""
    mig_profile: str | None = None
    """MIG instance profile (``MIG1g`` ... ``MIG7g``) for ``mig``; fixed when the pool is created."""


@dataclass(frozen=True)
class GpuPoolConfig:
    pool: PoolConfig
    """The agent pool settings."""
    size: GpuSize
    """The VM size's catalogue entry (GPU model, count, memory)."""
    driver: str = "none"
    """``none``: AKS skips its GPU driver and the NVIDIA GPU operator installs driver and toolkit.
    ``install``: AKS installs the driver and the operator must not (needed for GRID sizes such as A10)."""
    sharing: SharingConfig = SharingConfig()
    """How pods share one GPU."""

    @property
    def schedulable_gpus_per_node(self) -> int:
        """``nvidia.com/gpu`` a node advertises: GPUs × replicas (time-slicing, MPS) or × MIG instances."""
        if self.sharing.mode in ("time-slicing", "mps"):
            return self.size.gpus * self.sharing.replicas
        if self.sharing.mode == "mig" and self.sharing.mig_profile:
            return self.size.gpus * MIG_INSTANCES_PER_GPU[self.sharing.mig_profile]
        return self.size.gpus


@dataclass(frozen=True)
class ClusterConfig:
    kubernetes_version: str | None = None
    """Kubernetes minor or patch version; unset takes AKS's default (``cluster.kubernetesVersion``)."""
    sku_tier: str = "Free"
    """``Free`` (no SLA, fine for demos), ``Standard`` (uptime SLA) or ``Premium``."""
    private: bool = False
    """Private API server: ``pulumi up`` must then run where it resolves the private endpoint."""
    authorized_ip_ranges: tuple[str, ...] = ()
    """CIDRs allowed to reach a public API server; empty leaves it reachable, guarded by Entra ID."""
    local_accounts: bool = False
    """Keep AKS local (admin certificate) accounts; off means Entra ID only and no admin kubeconfig."""
    admin_group_object_ids: tuple[str, ...] = ()
    """Entra ID groups made cluster admins."""
    grant_deployer_admin: bool = True
    """Give the identity running ``pulumi up`` the AKS RBAC Cluster Admin role so it can install workloads."""
    deployer_principal_type: str = "User"
    """``User`` for a person, ``ServicePrincipal`` for CI; Azure refuses an assignment whose type is wrong."""
    network_policy: str = "cilium"
    """Network policy engine: ``cilium`` (Azure CNI powered by Cilium), ``calico`` or ``azure``."""
    upgrade_channel: str = "patch"
    """Automatic Kubernetes upgrades: ``patch``, ``stable``, ``rapid`` or ``node-image``."""
    node_os_upgrade_channel: str = "NodeImage"
    """Node OS updates: ``NodeImage``, ``SecurityPatch`` or ``Unmanaged``."""
    managed_blob_csi_driver: bool = False
    """Turn on the AKS-managed Blob CSI driver instead of the Helm-installed one (never both)."""
    login_mode: str = "azurecli"
    """How kubelogin gets tokens for the program's Kubernetes provider: azurecli, spn, workloadidentity, msi."""
    system_pool: PoolConfig = PoolConfig("system", "Standard_D4ds_v5", min_count=1, max_count=3, count=1)
    """The non-spot system pool (``cluster.systemPool``)."""
    autoscaler: AutoscalerConfig = AutoscalerConfig()
    """Cluster autoscaler profile (``cluster.autoscaler``)."""


@dataclass(frozen=True)
class RegistryConfig:
    enabled: bool = True
    """Create an Azure Container Registry attached to the cluster."""
    name: str | None = None
    """Registry name (globally unique, 5-50 letters and digits); unset derives one from the naming root."""
    sku: str = "Standard"
    """``Basic``, ``Standard`` or ``Premium`` (private mode needs Premium)."""
    private: bool = False
    """Public network access off; reached through a private endpoint in the VNet."""


@dataclass(frozen=True)
class StorageAccountConfig:
    role: str
    """What the account holds, e.g. ``input``; part of its derived name."""
    containers: tuple[str, ...]
    """Blob containers to create."""
    name: str | None = None
    """Account name (3-24 lowercase letters and digits); unset derives one."""
    protect: bool = False
    """Refuse ``pulumi destroy`` of this account (a demo must not delete someone's results)."""


@dataclass(frozen=True)
class StorageConfig:
    accounts: tuple[StorageAccountConfig, ...] = ()
    """Storage accounts (``storage.accounts``)."""
    private: bool = False
    """Public network access off; blob private endpoints in the VNet."""
    auth: str = "identity"
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
    blob_csi: bool = False
    """Helm-installed Azure Blob CSI driver; default on when storage accounts exist."""
    smoke_test: bool = False
    """An nvidia-smi Job per GPU pool that proves GPUs are schedulable after ``pulumi up``."""


BUILD_MODES = ("acr", "local")
EXPOSURES = ("public", "internal")


@dataclass(frozen=True)
class BuildConfig:
    mode: str = "acr"
    """``acr``: an ACR Task run builds in Azure (no Docker needed where ``pulumi up`` runs).
    ``local``: the Docker engine where ``pulumi up`` runs builds and pushes (``az acr login`` first)."""


@dataclass(frozen=True)
class FunctionConfig:
    pool: str | None = None
    """GPU pool the function's DaemonSet runs on; unset: the first GPU pool."""
    exposure: str = "public"
    """``public``: a public LoadBalancer IP as in seed 000; ``internal``: an IP in the VNet only."""
    allowed_source_ranges: tuple[str, ...] = ()
    """CIDRs that may reach the LoadBalancer (``loadBalancerSourceRanges``); empty allows all."""
    max_context_chars: int = 20_000
    """Longest context ``/api/answer`` accepts (longer gets a 400)."""


@dataclass(frozen=True)
class WorkloadsConfig:
    inference_services: int = 3
    """gpu-sharing: independent inference Deployments on the shared GPU."""
    notebook: bool = True
    """gpu-sharing: a Jupyter notebook that takes one more share of the GPU."""
    resim_jobs: int = 20
    """av-resim: parallel re-simulation shards (pods of the gpu-io Indexed Job)."""
    gpu_test_jobs: int = 10
    """av-resim: parallel GPU load pods (the gpu-test Indexed Job)."""
    large_model_image: str | None = None
    """av-resim: your image for the 2-GPU job on the multi-GPU pool (the seed's Metaseq); unset: no template."""
    training_steps: int = 2000
    """gpu-basics and training-autoscale: optimisation steps of the training Job."""
