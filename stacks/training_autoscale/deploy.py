"""training-autoscale's workloads on the platform and its stack outputs."""

from __future__ import annotations

from program.config.errors import validated
from program.config.schema import StackConfig
from program.outputs import AUTOSCALER_LOGS, Outputs
from program.scenario import Platform
from stacks.training_autoscale.settings import CHECKPOINTS, PREDICT, TRAIN, ScaledTrainingSettings, scaling_pool
from stacks.training_autoscale.workloads import CHECKPOINT_FOLDER, TrainingArgs, TrainingWorkload

TRAINING_LOGS, SUBMIT_TRAINING_RUNS = "trainingLogs", "submitTrainingRuns"
WATCH_GPU_NODES, WATCH_TRAINING_RUNS, WATCH_QUEUE = "watchGpuNodes", "watchTrainingRuns", "watchQueue"
PREDICT_PORT_FORWARD, PREDICT_EXAMPLE = "predictPortForward", "predictExample"
DOWNLOAD_CHECKPOINTS = "downloadCheckpoints"
"""Output names: commands to follow training, start runs, watch the pool and queue react, ask for predictions and
download the trained checkpoints."""


def deploy(cfg: StackConfig, st: ScaledTrainingSettings, platform: Platform) -> Outputs:
    pool = validated(scaling_pool(cfg), "aksgpu:gpuPools")
    platform.pull_ahead(pool, {"jobs": platform.image("jobs")})
    training = TrainingWorkload("training", TrainingArgs(
        gpu_pool=platform.gpu_pool(pool),
        jobs_image=platform.image("jobs"),
        workspace=platform.needed_workspace,
        steps=st.steps,
        checkpoint_container=cfg.storage_account(CHECKPOINTS).container_names[0],
        train_volumes=platform.volumes[TRAIN],
        predict_pool=platform.cpu_pool(cfg.cpu_pools[0].name),
        predict_volumes=platform.volumes[PREDICT],
        parallel_runs=st.parallel_runs,
        queue=platform.job_queue,
    ), opts=platform.opts)
    namespace = platform.needed_workspace.name
    values: dict[str, object] = {SUBMIT_TRAINING_RUNS: training.submit_runs_command,
              # Seed 004's demo, made visible: GPU nodes appear for the pending runs and go once they finish.
              WATCH_GPU_NODES: f"kubectl get nodes -l kubernetes.azure.com/agentpool={pool.name} -w",
              WATCH_TRAINING_RUNS: f"kubectl -n {namespace} get jobs,pods -l app.kubernetes.io/name=train -w"}
    if platform.job_queue is not None:
        values[WATCH_QUEUE] = f"kubectl -n {namespace} get workloads.kueue.x-k8s.io -w"
    if platform.autoscaler_logs is not None:
        values[AUTOSCALER_LOGS] = platform.autoscaler_logs.query_command
    return {**values,
            TRAINING_LOGS: training.logs_command,
            PREDICT_PORT_FORWARD: training.predict_port_forward,
            PREDICT_EXAMPLE: training.predict_example,
            DOWNLOAD_CHECKPOINTS: platform.blob_command(CHECKPOINTS, upload=False, local="./checkpoints",
                                                        path=CHECKPOINT_FOLDER)}
