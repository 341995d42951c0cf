"""What a scenario is to the platform: a record the one pipeline (``program.pipeline``) runs.

A scenario says once what it needs (``Needs``: images, storage, a namespace, a job queue, alerts, add-ons), has its
own config section and rules, and declares its workloads on the ``Platform`` the pipeline built for it. The platform
never imports a scenario: the composition root (``__main__.py``) hands it the registry (``stacks.REGISTRY``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.autoscaling.gpu_deployment import GpuScaling
from components.autoscaling.keda import MetricsAccess
from components.autoscaling.kueue import JobQueue
from components.azure.node_pools import CpuNodePool
from components.azure.node_provisioning import GpuPoolComponent
from components.azure.storage import blob_batch_command
from components.images.built import GPU_TOOLS_IMAGE, ContainerImage
from components.images.imported import ImportedImage, ImportedImageArgs, SourceLogin
from components.images.pull_ahead import ImagePullAhead, ImagePullAheadArgs
from components.kubernetes.workspace import Workspace
from components.monitoring.autoscaler_logs import AutoscalerLogs
from components.training.jobset import JobSetController
from components.volumes.blob_volume import WorkloadVolumes
from program.config.errors import ConfigError
from program.config.keys import KEY_PREFIX
from program.config.model import ConfigModel
from program.config.schema import GpuPool, StackConfig
from program.layers.azure import AzureLayer
from program.layers.gpu_software import GpuSoftware
from program.layers.images import built_image
from program.needs import Needs
from program.outputs import Outputs, explained_failure
from program.probes import Probes, SpotDrill


@dataclass(frozen=True)
class Platform:
    """Everything a scenario's workloads stand on."""

    cfg: StackConfig
    needs: Needs
    azure: AzureLayer
    """Network, cluster, pools, registry, storage and the Kubernetes provider."""
    software: GpuSoftware
    """NFD, the GPU operator, the Blob CSI driver, the smoke test, metrics."""
    images: Mapping[str, ContainerImage]
    """The scenario's images by repository."""
    workspace: Workspace | None
    """The scenario's namespace, when it needs one."""
    volumes: Mapping[str, WorkloadVolumes] = field(default_factory=dict)
    """Each data workload's identity and blob volumes (``Needs.data_access``)."""
    job_queue: JobQueue | None = None
    """Where the scenario's GPU Jobs queue (Kueue); None: Jobs start at once."""
    job_sets: JobSetController | None = None
    """The JobSet controller (``Needs.job_sets``): its runs are created after it."""

    @property
    def needed_workspace(self) -> Workspace:
        """The scenario's namespace, for a scenario whose ``Needs`` ask for one (the pipeline made it)."""
        if self.workspace is None:
            raise AssertionError("the scenario's Needs ask for no namespace: it has no workspace")
        return self.workspace

    @property
    def opts(self) -> pulumi.ResourceOptions:
        """Options for every in-cluster component: the stack's one Kubernetes provider."""
        return self.azure.kubernetes_opts

    def gpu_pool(self, pool: GpuPool) -> GpuPoolComponent:
        """The node pool component of a GPU pool from config."""
        return self.azure.gpu_pools[pool.name]

    def cpu_pool(self, name: str) -> CpuNodePool:
        return self.azure.cpu_pools[name]

    def image(self, repository: str) -> pulumi.Output[str]:
        """What pods pull for ``repository``: the pushed digest."""
        return self.images[repository].image_ref

    def built_image(self, name: str, folder: str, repository: str,
                    build_args: Mapping[str, str] | None = None) -> pulumi.Output[str]:
        """An image of the scenario's own beyond ``Needs.images``: ``folder`` built with ``build_args`` into the
        stack's registry; what pods pull (by digest, once the kubelet may pull)."""
        return built_image(self.cfg, self.azure, name, folder, repository, build_args).image_ref

    def imported_image(self, name: str, source: str, login: SourceLogin | None = None) -> pulumi.Output[str]:
        """A public image (``registry/repository:tag``) copied into the stack's registry; what pods pull (by
        digest, once the kubelet may pull)."""
        return ImportedImage(name, ImportedImageArgs(source, self.azure.registry_access, login)).image_ref

    @property
    def autoscaler_logs(self) -> AutoscalerLogs | None:
        """The cluster autoscaler's logs in Log Analytics (``monitoring.autoscalerLogs``)."""
        return self.azure.autoscaler_logs

    def pull_ahead(self, pool: GpuPool, images: Mapping[str, pulumi.Input[str]]) -> ImagePullAhead | None:
        """Every new node of ``pool`` pulls ``images`` (short name → reference) as it joins, before its GPU is
        ready; None with ``addons.imagePullAhead`` off or on a NAP pool."""
        if not self.cfg.addons.image_pull_ahead or pool.nap:
            return None
        tools = GPU_TOOLS_IMAGE[0]
        if self.software.node_gate is not None and tools in self.images:
            # The gate's check runs the tools image on every new node before anything else can.
            images = {**images, tools: images.get(tools, self.image(tools))}
        return ImagePullAhead(f"pull-ahead-{pool.name}", ImagePullAheadArgs(self.gpu_pool(pool), dict(images)),
                              opts=self.opts)

    @property
    def metrics(self) -> MetricsAccess | None:
        """How KEDA reads metrics, when the stack has managed Prometheus and the KEDA add-on."""
        return self.software.metrics_access

    def gpu_scaling(self, pool: GpuPool, target: int, reserved: int = 0, sharers: int = 1) -> GpuScaling:
        """Replica bounds for a GPU Deployment on ``pool`` (one GPU or GPU share per pod): at rest as many as the
        pool's minimum nodes hold (at least 1), at most as many as its maximum holds. ``reserved`` shares go to
        others (a notebook), and ``sharers`` Deployments split the rest."""
        least, most = pool.replica_bounds(reserved, sharers)
        spare = pool.schedulable_gpus_per_node * pool.max_count - reserved - most * sharers
        return GpuScaling(least, most, target, self.metrics, surge=spare >= sharers)

    @property
    def gpu_operator(self) -> list[pulumi.Resource]:
        """What GPU workloads wait for: ``nvidia.com/gpu`` exists only once the operator's device plugin runs, and
        the GPU node gate holds a new node before its GPUs are advertised."""
        gate = [self.software.node_gate.deployment] if self.software.node_gate else []
        return [self.software.operator.release, *gate] if self.software.operator else []

    def blob_command(self, role: str, upload: bool, local: str, path: str | None = None,
                     container: str | None = None) -> str:
        """The ``az storage blob`` command that uploads ``local`` to (or downloads it from) ``container`` (the first
        of the ``role`` account's by default), as the deployer (Entra ID, no keys)."""
        account = self.cfg.storage_account(role)
        command = blob_batch_command(self.cfg.storage_account_name(account), container or account.container_names[0],
                                     upload, local, path)
        needs = []
        if not self.cfg.cluster.grant_deployer_admin:
            role_name = "Contributor" if self.needs.deployer_blob_access.get(role) else "Reader"
            needs.append(f"Storage Blob Data {role_name} on the account (cluster.grantDeployerAdmin is off)")
        if self.cfg.storage.private:
            needs.append("a machine in the VNet of the stack or in one peered and linked to it "
                         "(network.runnerVnetId): the account has no public endpoint")
        return explained_failure(command, f"this needs {' and '.join(needs)}") if needs else command


def no_rules(cfg: StackConfig, settings: Any) -> Iterable[ConfigError]:
    """A scenario without rules of its own beyond what its needs require."""
    return ()


@dataclass(frozen=True)
class Scenario:
    name: str
    """The name in the registry (``stacks.REGISTRY``) and in ``aksgpu:scenario``."""
    summary: str
    """One line: what a stack of this scenario deploys (README and docs)."""
    seed: str
    """The guide it rebuilds, e.g. ``000 PyTorch Azure Function on a GPU``; ``-`` for new ones."""
    deploy: Callable[[StackConfig, Any, Platform], Outputs]
    """Declares the scenario's workloads on the platform (given its settings) and returns its stack outputs."""
    probes: Probes | Callable[[StackConfig, Any], Probes]
    """What a deployed stack of it must do to pass its end-to-end run (``program/probes.py``): a value, or a function
    of the config and its settings. Every scenario declares its own (``stacks/<name>/probes.py``)."""
    needs: Needs | Callable[[StackConfig, Any], Needs] = Needs()
    """What it asks of the platform: a value, or a function of the config and its settings."""
    settings: type[ConfigModel] | None = None
    """Its own config section (``aksgpu:<settings.section>``); None: it has none."""
    check: Callable[[StackConfig, Any], Iterable[ConfigError]] = no_rules
    """Its own rules across the whole config; each problem one ``ConfigError``."""
    drill: SpotDrill | Callable[[StackConfig, Any], SpotDrill | None] | None = None
    """The training run the e2e run's spot drill evicts, where the scenario has one; None: no drill."""
    moved: Mapping[str, str] = field(default_factory=dict)
    """Keys that moved into its section: old path (``workloads.resimJobs``) → key in the section (``jobs``), so a
    stack file with the old key hears where it went."""

    def needs_of(self, cfg: StackConfig, settings: Any) -> Needs:
        return self.needs(cfg, settings) if callable(self.needs) else self.needs

    def probes_of(self, cfg: StackConfig, settings: Any) -> Probes:
        return self.probes(cfg, settings) if callable(self.probes) else self.probes

    def drill_of(self, cfg: StackConfig, settings: Any) -> SpotDrill | None:
        return self.drill(cfg, settings) if callable(self.drill) else self.drill

    def problems(self, cfg: StackConfig, settings: Any) -> list[ConfigError]:
        """What every scenario requires of the platform given its needs, then its own rules."""
        needs, found = self.needs_of(cfg, settings), []
        if not cfg.gpu_pools:
            found.append(ConfigError(f"{KEY_PREFIX}gpuPools", [], f"scenario {self.name} needs at least one GPU pool"))
        if needs.images and not cfg.registry.enabled:
            found.append(ConfigError(f"{KEY_PREFIX}registry.enabled", False,
                                     f"scenario {self.name} builds images into the stack's registry; set it true"))
        if not cfg.addons.gpu_operator:
            found.append(ConfigError(f"{KEY_PREFIX}addons.gpuOperator", False,
                                     f"scenario {self.name} requests nvidia.com/gpu, which the operator's device "
                                     "plugin advertises; set it true"))
        have = [a.role for a in cfg.storage.accounts]
        if any(role not in have for role in needs.storage_roles):
            found.append(ConfigError(f"{KEY_PREFIX}storage.accounts", have,
                                     f"scenario {self.name} needs storage accounts with "
                                     f"roles {', '.join(needs.storage_roles)}"))
        if found:
            return found  # its own rules assume what it needs
        return list(self.check(cfg, settings))
