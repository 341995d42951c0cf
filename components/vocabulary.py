"""The closed sets and fixed facts config and components share: enums, tag names, MIG geometry.

Components take these value types in their arguments; they never take a config section (``schema.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from components.gpu.sizes import GpuSize

HOLDS_DATA = "holds-data"
"""Tag: ``false`` on storage the program can recreate at will, which the pull-request guard lets a preview
replace or delete. Data accounts never carry it; the build-context accounts of versions before 2026-11 did, so
the preview that drops them passes."""
SECURITY_EXCEPTION = "security-exception"
"""Tag naming the one deliberate departure from the security baseline a resource makes (a ``SecurityException``
value); the policy pack accepts exactly these, and docs/security.md justifies each."""

PRIVATE_DNS_ZONES: dict[str, str] = {
    "registry": "privatelink.azurecr.io",
    "blob": "privatelink.blob.core.windows.net",
}
"""Private Link sub-resource (group id) → the DNS zone Azure documents for it (learn.microsoft.com/azure/private-link/
private-endpoint-dns: Azure Container Registry ``registry``, Storage ``blob``)."""

MIG_INSTANCES_PER_GPU = {"MIG1g": 7, "MIG2g": 3, "MIG3g": 2, "MIG4g": 1, "MIG7g": 1}
"""GPU instances one A100/H100 splits into per AKS ``gpuInstanceProfile`` (AKS multi-instance GPU docs)."""


class Priority(StrEnum):
    REGULAR = "regular"
    SPOT = "spot"


class Provisioning(StrEnum):
    AUTOSCALER = "autoscaler"
    """An AKS agent pool of one VM size that the cluster autoscaler grows and shrinks."""
    NAP = "nap"
    """AKS node auto-provisioning (Karpenter): a NodePool that creates nodes of any of its sizes, spot first, for
    pending pods, and removes them when empty."""


class GpuDriver(StrEnum):
    INSTALL = "install"
    """AKS installs the driver while the node boots (its node image carries it); the operator runs only the device
    plugin, GPU feature discovery and the DCGM exporter. The only way for GRID sizes (A10: AKS installs the GRID
    driver, which NVIDIA does not publish as a container) and MIG pools (AKS partitions the GPUs from
    ``gpuInstanceProfile`` with its own driver)."""
    PRECOMPILED = "precompiled"
    """AKS skips its driver (``gpuProfile.driver: None``) and the GPU operator owns it, as the design card draws it:
    NVIDIA's precompiled driver image for the node's kernel (no compile), which NVIDIA builds for Ubuntu 24.04's
    Azure kernel; a node whose kernel NVIDIA has not built yet falls back to compiling (the GPU node gate moves it
    to the compiled driver) instead of staying without GPUs."""
    NONE = "none"
    """AKS skips its driver; the GPU operator compiles it on every new node (minutes) and installs the toolkit."""

    @property
    def operator_owned(self) -> bool:
        """The GPU operator installs this pool's driver (AKS's ``gpuProfile.driver`` is None)."""
        return self != GpuDriver.INSTALL


GPU_NODE_OS = "Ubuntu"
"""Every GPU pool's node OS (AKS ``osSKU``): Ubuntu 24.04 with its 6.8 Azure kernel on the Kubernetes minors of
``GPU_NODE_OS_KUBERNETES`` (AKS upgrade-os-version: ``Ubuntu`` is 22.04 up to 1.34 and 24.04 from 1.35), which
NVIDIA builds its precompiled drivers for (NVIDIA/gpu-driver-container .github/precompiled-matrix-config.json).
Every pool follows the cluster's minor, so a cluster runs one Ubuntu, which the GPU operator needs (it reads the OS
of one GPU node for the whole cluster, controllers/state_manager.go getGPUNodeOSInfo). ``Ubuntu2404`` would name
24.04 outright, but the ARM API pulumi-azure-native 3.29 sends for agent pools (2025-09-01) has no such value; it
came in 2025-10-01."""
GPU_NODE_OS_KUBERNETES = ((1, 35), (1, 38))
"""The Kubernetes minors where AKS's ``Ubuntu`` is 24.04: from 1.35 (upgrade-os-version), to 1.38, the last that
AKS supports 24.04 on (upgrade-os-version: Ubuntu 24.04 "supported in Kubernetes 1.32 to 1.38")."""

DRIVER_LABEL = "aksgpu.io/driver"
"""Node label naming the GPU operator's driver for an operator-driver node, each NVIDIADriver selecting its own value:
``precompiled`` on a ``precompiled`` pool's nodes, ``compiled`` on a ``none`` pool's and on a precompiled node whose
kernel NVIDIA has not built (the GPU node gate relabels it). Both values are selected explicitly, as the operator
moves a node between drivers only on a change of a label its drivers select on (GPU operator v26.7.0
controllers/nodelabeling_controller.go)."""
PRECOMPILED_LABEL, COMPILED = "precompiled", "compiled"


def driver_label(driver: GpuDriver) -> dict[str, str]:
    """The driver label a pool's nodes start with: none where AKS installs the driver."""
    if not driver.operator_owned:
        return {}
    return {DRIVER_LABEL: PRECOMPILED_LABEL if driver == GpuDriver.PRECOMPILED else COMPILED}


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


class DayOfWeek(StrEnum):
    MONDAY = "Monday"
    TUESDAY = "Tuesday"
    WEDNESDAY = "Wednesday"
    THURSDAY = "Thursday"
    FRIDAY = "Friday"
    SATURDAY = "Saturday"
    SUNDAY = "Sunday"


@dataclass(frozen=True)
class MaintenanceWindow:
    """When AKS may upgrade the cluster and its nodes' images (planned maintenance), weekly."""

    day: DayOfWeek
    """Day of the week."""
    start_time: str
    """Start, ``HH:MM``, in ``utc_offset``."""
    duration_hours: int
    """Length (AKS asks for at least 4 hours)."""
    utc_offset: str
    """``+HH:MM`` or ``-HH:MM``."""


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


class SecurityException(StrEnum):
    """Values of the ``security-exception`` tag."""

    OPEN_API_SERVER = "open-api-server"
    """A public API server without authorized IP ranges (Entra ID still required): ``cluster.openApiServer``."""
    BASELINE_OPERATOR_PODS = "baseline-operator-pods"
    """A workload namespace at the baseline Pod Security level, not restricted: KAITO 0.6.0's inference pods (which
    its controller writes) set no security context, so restricted admission would refuse them."""
    RDMA_MEMORY_LOCK = "rdma-memory-lock"
    """A workload namespace at the privileged Pod Security level, for InfiniBand pods only: NCCL's verbs transport
    registers (locks) memory, which the 64 KiB ``ulimit -l`` of a container refuses unless the process holds
    CAP_IPC_LOCK (Azure/aks-rdma-infiniband website/docs/configurations/01-network-operator.md). Neither restricted
    nor baseline admits that capability, and a non-root process never has an added capability in its effective set
    (kubernetes/kubernetes#56374), so those pods run as UID 0 with every capability dropped but IPC_LOCK, no
    privilege escalation and the runtime's seccomp profile; nothing else in the namespace departs from restricted."""


@dataclass(frozen=True)
class GpuNodes:
    """What one GPU pool's nodes offer and who sets them up: the size's GPUs, the driver owner, the sharing. The
    GPU software and the workloads read this from the pool (``GpuNodePool.gpu``), never from config."""

    pool: str
    """Agent pool name (the device-plugin sharing key and the node label)."""
    size: GpuSize
    """The VM size's catalogue entry."""
    driver: GpuDriver = GpuDriver.INSTALL
    sharing: SharingMode = SharingMode.NONE
    replicas: int = 1
    """Shares per GPU under time-slicing or MPS."""
    mig_profile: str | None = None

    @property
    def per_node(self) -> int:
        """``nvidia.com/gpu`` a node advertises: GPUs × replicas (time-slicing, MPS) or × MIG instances."""
        if self.sharing.has_replicas:
            return self.size.gpus * self.replicas
        if self.sharing == SharingMode.MIG and self.mig_profile:
            return self.size.gpus * MIG_INSTANCES_PER_GPU[self.mig_profile]
        return self.size.gpus
