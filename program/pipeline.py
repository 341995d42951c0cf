"""The one pipeline every stack runs: config → checks → Azure layer → GPU software → workspace → images →
the scenario's workloads → stack outputs."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

import stacks
from components.autoscaling.kueue import Kueue, KueueArgs
from program import outputs
from program.azure_layer import azure_outputs, build_azure_layer
from program.cluster_software import build_gpu_software
from program.images import build_images
from program.scenario import Platform
from program.workspace import build_workspace
from stackconfig.loader import load_config
from stackconfig.reader import ConfigError
from stackconfig.schema import StackConfig


def namespace_values(project: str) -> dict[str, Any]:
    """Every config value of the project's namespace (without the ``project:`` prefix).

    ``pulumi.Config`` reads one known key at a time; refusing unknown keys needs them all, so this reads the
    SDK's config store (the CLI fills it either through ``PULUMI_CONFIG`` or ``set_all_config``; pinned SDK).
    """
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{project}:"
    return {k[len(prefix):]: v for k, v in merged.items() if k.startswith(prefix)}


def load_stack_config(raw: dict[str, Any], project: str, stack: str) -> StackConfig:
    """Parse ``raw`` and apply its scenario's requirements; raises ``ConfigError``."""
    cfg = load_config(raw, project, stack, scenarios=stacks.REGISTRY)
    stacks.load(cfg.scenario).check_requirements(cfg)
    return cfg


def read_stack_config() -> StackConfig:
    project, stack = pulumi.get_project(), pulumi.get_stack()
    return load_stack_config(namespace_values(project), project, stack)


def deploy(cfg: StackConfig, preflight: bool = True) -> None:
    """Declare the stack's resources and export its outputs.

    ``preflight`` asks the API server, before any Kubernetes call, whether it answers (private clusters) and whether
    the deployer's access has taken effect; the offline render, which has no cluster, turns it off.
    """
    scenario = stacks.load(cfg.scenario)
    azure = build_azure_layer(cfg, scenario.deployer_blob_access, preflight=preflight,
                              alert_rules=scenario.alert_rules(cfg),
                              ai_toolchain_operator=scenario.ai_toolchain_operator(cfg))
    software = build_gpu_software(cfg, azure)
    workspace = None
    if scenario.namespace is not None:
        workspace = build_workspace(cfg, azure, software, scenario.namespace, scenario.data_access(cfg),
                                    scenario.namespace_exception(cfg))
    images = build_images(cfg, azure, scenario.images)
    queue = None
    if scenario.job_fan_outs and cfg.addons.kueue and workspace is not None:
        queue = Kueue("kueue", KueueArgs(
            pools=[(g, azure.gpu_pools[g.name]) for g in cfg.gpu_pools], namespaces=[workspace.workspace.name],
            namespace_outputs={workspace.workspace.name: workspace.workspace.namespace}), opts=azure.kubernetes_opts)
    platform = Platform(azure=azure, software=software, images=images, workspace=workspace,
                        job_queue=queue.queue if queue else None)
    values = {**azure_outputs(cfg, azure),
              **{outputs.image(repository): image.image_ref for repository, image in images.items()},
              **scenario.deploy(cfg, platform)}
    for name, value in values.items():
        pulumi.export(name, value)


def main() -> None:
    """``pulumi up``: one config read, then the pipeline. A config error is one line, without a traceback."""
    try:
        cfg = read_stack_config()
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    deploy(cfg)
