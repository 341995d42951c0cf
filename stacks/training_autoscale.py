"""Seed 004: GPU training that scales from zero, checkpoints in blob storage, predictions on a CPU pool."""

from __future__ import annotations

from components.workloads.training import TrainingArgs, TrainingWorkload
from program import outputs
from program.scenario import Outputs, Platform, Scenario
from stackconfig.reader import ConfigError
from stackconfig.schema import PROJECT, GpuPoolConfig, StackConfig, StorageAuth

CHECKPOINTS = "ckpt"
"""Storage role of the checkpoint account."""
TRAIN, PREDICT = "train", "predict"
"""Workloads that touch data: training writes checkpoints, the prediction service only reads them."""


def scaling_pool(cfg: StackConfig) -> GpuPoolConfig | None:
    """The GPU pool training runs on: the first that scales from zero."""
    return next((g for g in cfg.gpu_pools if g.pool.min_count == 0), None)


def check(cfg: StackConfig) -> None:
    if scaling_pool(cfg) is None:
        raise ConfigError(f"{PROJECT}:gpuPools", {g.name: g.pool.min_count for g in cfg.gpu_pools},
                          "scenario training-autoscale needs a GPU pool that scales from 0 (minCount 0)")
    if not cfg.cpu_pools:
        raise ConfigError(f"{PROJECT}:cpuPools", [], "scenario training-autoscale serves predictions on a CPU pool")
    if cfg.storage.auth == StorageAuth.SAS:
        # The Blob CSI driver reads a SAS once, at mount; the predict Deployment keeps its mount for good, so its
        # reads would start failing when the token expires (a renewed Secret never reaches a mounted volume).
        raise ConfigError(f"{PROJECT}:storage.auth", cfg.storage.auth,
                          "the always-on predict service would lose its checkpoints when the SAS expires; use identity")


def deploy(cfg: StackConfig, platform: Platform) -> Outputs:
    checkpoints = next(a for a in cfg.storage.accounts if a.role == CHECKPOINTS).containers[0]
    training = TrainingWorkload("training", TrainingArgs(
        gpu_pool=platform.gpu_pool(scaling_pool(cfg)),
        jobs_image=platform.image("jobs"),
        workspace=platform.workspace.workspace,
        steps=cfg.workloads.training_steps,
        checkpoint_container=checkpoints,
        train_volumes=platform.workspace.data[TRAIN],
        predict_pool=platform.azure.cpu_pools[cfg.cpu_pools[0].name],
        predict_volumes=platform.workspace.data[PREDICT],
        parallel_runs=cfg.workloads.parallel_training_runs,
        queue=platform.job_queue,
    ), opts=platform.opts)
    pool = scaling_pool(cfg).name
    namespace = platform.workspace.workspace.name
    values = {outputs.SUBMIT_TRAINING_RUNS: training.submit_runs_command,
              # Seed 004's demo, made visible: GPU nodes appear for the pending runs and go once they finish.
              outputs.WATCH_GPU_NODES: f"kubectl get nodes -l kubernetes.azure.com/agentpool={pool} -w",
              outputs.WATCH_TRAINING_RUNS: f"kubectl -n {namespace} get jobs,pods -l app.kubernetes.io/name=train -w"}
    if platform.job_queue is not None:
        values[outputs.WATCH_QUEUE] = f"kubectl -n {namespace} get workloads.kueue.x-k8s.io -w"
    if platform.azure.autoscaler_logs is not None:
        values[outputs.AUTOSCALER_LOGS] = platform.azure.autoscaler_logs.query_command
    return {**values,
            outputs.TRAINING_LOGS: training.logs_command,
            outputs.PREDICT_PORT_FORWARD: training.predict_port_forward,
            outputs.PREDICT_EXAMPLE: training.predict_example}


SCENARIO = Scenario(
    name="training-autoscale",
    summary="Resumable GPU training on a pool that scales from zero and back, parallel runs queued by Kueue, "
            "checkpoints in blob storage, a prediction service on a CPU pool",
    seed="004 training with GPU autoscaling",
    images={"jobs": "docker/jobs"},
    storage_roles=(CHECKPOINTS,),
    namespace="training",
    data_access=lambda cfg: {TRAIN: {CHECKPOINTS: True}, PREDICT: {CHECKPOINTS: False}},
    job_fan_outs=True,
    check=check,
    deploy=deploy,
)
