"""The one pipeline every stack runs: config → checks → Azure layer → images → GPU software → workspace → JobSet
and Kueue → volumes → the scenario's workloads → stack outputs. It runs whatever scenarios the composition root
hands it (``__main__.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi_azure_native import authorization

from components.autoscaling.kueue import Kueue, KueueArgs
from components.images.built import GPU_TOOLS_IMAGE
from components.training.jobset import JobSetController, JobSetControllerArgs
from components.vocabulary import SharingMode
from program import outputs
from program.config.errors import ConfigError
from program.config.keys import SECRET
from program.config.loader import load_config
from program.config.schema import StackConfig
from program.layers.azure import azure_outputs, build_azure_layer
from program.layers.gpu_software import build_gpu_software
from program.layers.images import build_images
from program.layers.namespace import build_volumes, build_workspace
from program.scenario import Platform, Scenario
from program.sdk import namespace_values, other_values

Registry = Mapping[str, Scenario]
"""Scenario name → scenario: what ``aksgpu:scenario`` may name."""


def load_stack_config(raw: Mapping[str, Any], project: str, stack: str, scenarios: Registry,
                      others: Mapping[str, Any] | None = None) -> StackConfig:
    """Parse ``raw`` (keys without ``project:``) with its scenario's section, needs and rules, and ``others`` (the
    stack's keys outside the namespace); raises ``ConfigError`` naming every problem."""
    return load_config(raw, project, stack, scenarios=scenarios, others=others)


def read_stack_config(scenarios: Registry) -> StackConfig:
    project, stack = pulumi.get_project(), pulumi.get_stack()
    return load_stack_config(namespace_values(project), project, stack, scenarios, other_values(project, SECRET))


def platform_images(cfg: StackConfig) -> dict[str, str]:
    """Images the platform itself runs: the GPU tools image, for the GPU node gate's check and an MPS pool's CUDA
    client check."""
    mps = any(p.sharing.mode == SharingMode.MPS for p in cfg.gpu_pools)
    gate = cfg.addons.gpu_node_gate and bool(cfg.gpu_pools)
    return dict([GPU_TOOLS_IMAGE]) if (mps or gate) and cfg.addons.gpu_operator else {}


def deploy(cfg: StackConfig, scenarios: Registry, preflight: bool = True) -> StackConfig:
    """Declare the stack's resources and export its outputs; the config as deployed (with its subscription).

    ``preflight`` asks the API server, before any Kubernetes call, whether it answers (private clusters) and whether
    the deployer's access has taken effect; the offline render, which has no cluster, turns it off.
    """
    # The subscription seeds the globally unique names: every deployment's own, stable for its life.
    deployer = authorization.get_client_config()
    cfg = cfg.for_deployment(deployer.subscription_id)
    scenario = scenarios[cfg.scenario]
    needs = scenario.needs_of(cfg, cfg.settings)
    azure = build_azure_layer(cfg, needs, deployer, preflight=preflight)
    images = build_images(cfg, azure, {**needs.images, **platform_images(cfg)})
    software = build_gpu_software(cfg, azure, images, add_on_device_plugin=needs.ai_toolchain_operator)
    workspace = build_workspace(azure, needs) if needs.namespace else None
    job_sets = None
    if needs.job_sets:
        job_sets = JobSetController("jobset", JobSetControllerArgs(), opts=azure.kubernetes_opts)
    queue = None
    if needs.job_queue and cfg.addons.kueue and workspace is not None:
        queue = Kueue("kueue", KueueArgs(pools=list(azure.gpu_pools.values()), workspaces=[workspace],
                                         job_sets=job_sets, rdma=cfg.addons.network_operator),
                      opts=azure.kubernetes_opts)
    # JobSet runs are owned by their claim, and every run's Workload holds Kueue's finalizer until Kueue lets it go.
    volumes = build_volumes(cfg, azure, software, needs, workspace,
                            runs_released_by=[queue] if queue and job_sets else []) if workspace else {}
    platform = Platform(cfg=cfg, needs=needs, azure=azure, software=software, images=images, workspace=workspace,
                        volumes=volumes, job_queue=queue.queue if queue else None, job_sets=job_sets)
    values = {**azure_outputs(cfg, azure),
              **{outputs.image(repository): image.image_ref for repository, image in images.items()},
              **scenario.deploy(cfg, cfg.settings, platform)}
    for name, value in values.items():
        pulumi.export(name, value)
    return cfg


def run(scenarios: Registry) -> None:
    """``pulumi up``: one config read, then the pipeline. Config errors are one line each, without a traceback."""
    try:
        cfg = read_stack_config(scenarios)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    deploy(cfg, scenarios)
