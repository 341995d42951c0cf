"""What a scenario is: a record the one pipeline (``program.pipeline``) runs, and the platform it stands on.

A scenario declares what it needs (images, storage roles, a namespace) and its own config rules; the
pipeline checks the common requirements, builds the Azure layer, the GPU software, the workspace and the
images, then calls the scenario's ``deploy``, which declares its workloads and returns its stack outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pulumi

from components.autoscaling.keda import MetricsAccess
from components.autoscaling.kueue import JobQueue
from components.azure.node_pools import GpuNodePool
from components.build.image import ContainerImage
from components.monitoring.alert_rules import AlertRule
from components.workloads.gpu_deployment import GpuScaling
from program.azure_layer import AzureLayer
from program.cluster_software import GpuSoftware
from program.outputs import Outputs
from program.workspace import DataAccess, ScenarioWorkspace
from stackconfig.reader import ConfigError
from stackconfig.schema import PROJECT, GpuPoolConfig, SecurityException, StackConfig


@dataclass(frozen=True)
class Platform:
    """Everything a scenario's workloads stand on."""

    azure: AzureLayer
    """Network, cluster, pools, registry, storage and the Kubernetes provider."""
    software: GpuSoftware
    """NFD, the GPU operator, the Blob CSI driver, the smoke test."""
    images: Mapping[str, ContainerImage]
    """The scenario's images by repository."""
    workspace: ScenarioWorkspace | None
    """The scenario's namespace and its workloads' identities and blob volumes, when it declares a namespace."""
    job_queue: JobQueue | None = None
    """Where the scenario's Job fan-outs queue (Kueue); None: Jobs start at once."""

    @property
    def opts(self) -> pulumi.ResourceOptions:
        """Options for every in-cluster component: the stack's one Kubernetes provider."""
        return self.azure.kubernetes_opts

    def gpu_pool(self, pool: GpuPoolConfig) -> GpuNodePool:
        """The node pool component of a GPU pool from config."""
        return self.azure.gpu_pools[pool.name]

    def image(self, repository: str) -> pulumi.Output[str]:
        """What pods pull for ``repository``: the pushed digest."""
        return self.images[repository].image_ref

    @property
    def metrics(self) -> MetricsAccess | None:
        """How KEDA reads GPU utilisation, when the stack has managed Prometheus and the KEDA add-on."""
        return self.software.metrics_access

    def gpu_scaling(self, pool: GpuPoolConfig, target_percent: int, reserved: int = 0,
                    sharers: int = 1) -> GpuScaling:
        """Replica bounds for a GPU Deployment on ``pool`` (one GPU or GPU share per pod): at rest as many as the
        pool's minimum nodes hold (at least 1), at most as many as its maximum holds. ``reserved`` shares go to
        others (a notebook), and ``sharers`` Deployments split the rest."""
        per_node = pool.schedulable_gpus_per_node
        most = max(1, (per_node * pool.pool.max_count - reserved) // sharers)
        least = min(most, max(1, (per_node * pool.pool.min_count - reserved) // sharers))
        return GpuScaling(least, most, target_percent, self.metrics)

    @property
    def gpu_operator(self) -> list[pulumi.Resource]:
        """What GPU workloads wait for: ``nvidia.com/gpu`` exists only once the operator's device plugin runs."""
        return [self.software.operator.release] if self.software.operator else []


def no_checks(cfg: StackConfig) -> None:
    """A scenario without rules of its own beyond the common requirements."""


def no_data_access(cfg: StackConfig) -> DataAccess:
    """A scenario whose workloads use no storage."""
    return {}


def no_alert_rules(cfg: StackConfig) -> Sequence[AlertRule]:
    """A scenario whose workloads need no alerts beyond the GPU ones."""
    return ()


def never(cfg: StackConfig) -> bool:
    return False


def restricted(cfg: StackConfig) -> SecurityException | None:
    """The workspace namespace enforces the restricted Pod Security Standard."""
    return None


@dataclass(frozen=True)
class Scenario:
    name: str
    """The name in the registry (``stacks.REGISTRY``) and in ``aksgpu:scenario``."""
    summary: str
    """One line: what a stack of this scenario deploys (README and docs)."""
    seed: str
    """The guide it rebuilds, e.g. ``000 PyTorch Azure Function on a GPU``; ``-`` for new ones."""
    deploy: Callable[[StackConfig, Platform], Outputs]
    """Declares the scenario's workloads on the platform and returns its stack outputs."""
    images: Mapping[str, str] = field(default_factory=dict)
    """Repository → folder under ``docker/``, built into the stack's registry."""
    storage_roles: tuple[str, ...] = ()
    """Storage account roles the stack must configure (``storage.accounts[].role``)."""
    namespace: str | None = None
    """The workspace namespace; ``None``: no workspace."""
    data_access: Callable[[StackConfig], DataAccess] = no_data_access
    """Which workloads of a stack touch which storage roles, and whether they write: each gets its own identity
    and volumes in the workspace."""
    deployer_blob_access: Mapping[str, bool] = field(default_factory=dict)
    """Storage role → write (True) or read access for whoever runs ``pulumi up``, for the blob commands the stack
    outputs (granted with ``cluster.grantDeployerAdmin``)."""
    check: Callable[[StackConfig], None] = no_checks
    """The scenario's own whole-config rules; each raises ``ConfigError``."""
    job_fan_outs: bool = False
    """Its workloads submit many GPU Jobs at once: Kueue (``addons.kueue``) queues them in its namespace."""
    alert_rules: Callable[[StackConfig], Sequence[AlertRule]] = no_alert_rules
    """Alert rules on its workloads' own metrics, added to the stack's rule group (with ``monitoring.enabled``)."""
    ai_toolchain_operator: Callable[[StackConfig], bool] = never
    """Whether its cluster runs the AKS AI toolchain operator add-on (KAITO)."""
    namespace_exception: Callable[[StackConfig], SecurityException | None] = restricted
    """A stated departure from restricted Pod Security for the workspace namespace (pods an operator writes)."""

    def check_requirements(self, cfg: StackConfig) -> None:
        """What every scenario needs, then the scenario's own rules (one line per failure)."""
        if not cfg.gpu_pools:
            raise ConfigError(f"{PROJECT}:gpuPools", [], f"scenario {self.name} needs at least one GPU pool")
        if self.images and not cfg.registry.enabled:
            raise ConfigError(f"{PROJECT}:registry.enabled", False,
                              f"scenario {self.name} builds images into the stack's registry; set it true")
        if not cfg.addons.gpu_operator:
            raise ConfigError(f"{PROJECT}:addons.gpuOperator", False,
                              f"scenario {self.name} requests nvidia.com/gpu, which the operator's device plugin "
                              "advertises; set it true")
        have = [a.role for a in cfg.storage.accounts]
        if any(role not in have for role in self.storage_roles):
            raise ConfigError(f"{PROJECT}:storage.accounts", have,
                              f"scenario {self.name} needs storage accounts with roles {', '.join(self.storage_roles)}")
        self.check(cfg)
