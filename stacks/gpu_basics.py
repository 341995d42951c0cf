"""Seed 002: the nvidia-smi smoke test and a GPU training Job on a spot T4 pool that scales from zero."""

from __future__ import annotations

import pulumi

from components.training_workloads import TrainingArgs, TrainingWorkload
from components.workspace import Workspace
from stacks import outputs
from stacks.azure_layer import build_azure_layer
from stacks.config import StackConfig
from stacks.gpu_layer import build_gpu_software, k8s_opts
from stacks.images import build_images
from stacks.requirements import require_gpu_operator, require_gpu_pool, require_registry

NAMESPACE = "gpu-basics"


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    require_gpu_operator(cfg)


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    build_gpu_software(cfg, layer)
    images = build_images(cfg, layer, {"jobs": "docker/jobs"})
    workspace = Workspace("workspace", NAMESPACE, opts=k8s_opts(layer))
    training = TrainingWorkload("training", TrainingArgs(
        gpu_pool=layer.gpu_pools[cfg.gpu_pools[0].pool.name],
        jobs_image=images["jobs"].image_ref,
        workspace=workspace,
        steps=cfg.workloads.training_steps,
    ), opts=k8s_opts(layer))
    pulumi.export(outputs.JOBS_IMAGE, images["jobs"].image_ref)
    for key, command in training.commands.items():
        pulumi.export(key, command)
