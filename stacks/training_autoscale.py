"""Seed 004: GPU training that scales from zero, checkpoints in blob storage, predictions on a CPU pool."""

from __future__ import annotations

import pulumi

from components.training_workloads import TrainingArgs, TrainingWorkload
from stacks import outputs
from stacks.azure_layer import build_azure_layer
from stacks.config import PROJECT, StackConfig
from stacks.config_reader import ConfigError
from stacks.gpu_layer import build_gpu_software, build_workspace, k8s_opts
from stacks.images import build_images
from stacks.requirements import require_gpu_operator, require_gpu_pool, require_registry, require_storage_roles

NAMESPACE = "training"
CHECKPOINT_ROLE = "ckpt"


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    require_gpu_operator(cfg)
    require_storage_roles(cfg, CHECKPOINT_ROLE)
    if not any(g.pool.min_count == 0 for g in cfg.gpu_pools):
        raise ConfigError(f"{PROJECT}:gpuPools[0].minCount", cfg.gpu_pools[0].pool.min_count,
                          "scenario training-autoscale needs a GPU pool that scales from 0")
    if not cfg.cpu_pools:
        raise ConfigError(f"{PROJECT}:cpuPools", [], "scenario training-autoscale serves predictions on a CPU pool")


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    software = build_gpu_software(cfg, layer)
    workspace = build_workspace(cfg, layer, software, namespace=NAMESPACE, inputs=())
    images = build_images(cfg, layer, {"jobs": "docker/jobs"})
    checkpoints = next(a for a in cfg.storage.accounts if a.role == CHECKPOINT_ROLE).containers[0]
    scaling_pool = next(g for g in cfg.gpu_pools if g.pool.min_count == 0)
    training = TrainingWorkload("training", TrainingArgs(
        gpu_pool=layer.gpu_pools[scaling_pool.pool.name],
        jobs_image=images["jobs"].image_ref,
        workspace=workspace.workspace,
        steps=cfg.workloads.training_steps,
        checkpoint_claim=checkpoints,
        predict_pool=layer.cpu_pools[cfg.cpu_pools[0].name],
    ), opts=k8s_opts(layer))
    pulumi.export(outputs.JOBS_IMAGE, images["jobs"].image_ref)
    for key, command in training.commands.items():
        pulumi.export(key, command)
