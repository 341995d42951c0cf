"""Seed 002: the nvidia-smi smoke test and a GPU training Job on a spot T4 pool that scales from zero."""

from __future__ import annotations

from components.workloads.training import TrainingArgs, TrainingWorkload
from program import outputs
from program.scenario import Outputs, Platform, Scenario
from stackconfig.schema import StackConfig


def deploy(cfg: StackConfig, platform: Platform) -> Outputs:
    training = TrainingWorkload("training", TrainingArgs(
        gpu_pool=platform.gpu_pool(cfg.gpu_pools[0]),
        jobs_image=platform.image("jobs"),
        workspace=platform.workspace.workspace,
        steps=cfg.workloads.training_steps,
    ), opts=platform.opts)
    return {outputs.TRAINING_LOGS: training.logs_command}


SCENARIO = Scenario(
    name="gpu-basics",
    summary="A T4 spot pool that scales from zero, the nvidia-smi Job and a GPU training Job",
    seed="002 nvidia-smi, a GPU training Job",
    images={"jobs": "docker/jobs"},
    namespace="gpu-basics",
    deploy=deploy,
)
