"""distributed-training's runs on the platform and its stack outputs."""

from __future__ import annotations

from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.distributed_training.settings import (
    CHECKPOINTS,
    TRAIN,
    DistributedSettings,
    gpus_per_node,
    nccl_baseline,
    rdma,
    topology_file,
    training_pool,
)
from stacks.distributed_training.workloads import DistributedArgs, DistributedTraining, Thresholds

SUBMIT_ALLREDUCE, ALLREDUCE_RESULT = "submitAllreduceCheck", "allreduceResult"
SUBMIT_TRAINING, TRAINING_LOGS, WATCH_RUNS = "submitTraining", "trainingLogs", "watchRuns"
"""Output names: the all-reduce check and its verdict, a training run and its log, the runs and their queue."""


def deploy(cfg: StackConfig, st: DistributedSettings, platform: Platform) -> Outputs:
    pool = training_pool(cfg)
    platform.pull_ahead(pool, {"jobs": platform.image("jobs")})
    baseline = nccl_baseline(cfg, st)
    topology = topology_file(cfg)
    runs = DistributedTraining("distributed", DistributedArgs(
        pool=platform.gpu_pool(pool),
        jobs_image=platform.image("jobs"),
        workspace=platform.needed_workspace,
        nodes=st.nodes,
        gpus_per_node=gpus_per_node(cfg, st),
        steps=st.steps,
        batch_size=st.batch_size,
        rdma=rdma(cfg),
        thresholds=Thresholds(baseline.expected, baseline.warn_below, baseline.faulty_below) if baseline
        else Thresholds(),
        topology=topology.read_text() if topology else None,
        checkpoint_container=cfg.storage_account(CHECKPOINTS).container_names[0],
        train_volumes=platform.volumes[TRAIN],
        queue=platform.job_queue,
        # Runs made from the templates are Kueue's to admit: the templates wait for Kueue and go before it.
        after=(*([platform.job_sets.release] if platform.job_sets else []),
               *([platform.job_queue.ready] if platform.job_queue else [])),
    ), opts=platform.opts)
    namespace = platform.needed_workspace.name
    return {SUBMIT_ALLREDUCE: runs.submit_allreduce,
            ALLREDUCE_RESULT: runs.allreduce_result,
            SUBMIT_TRAINING: runs.submit_training,
            TRAINING_LOGS: runs.training_logs,
            WATCH_RUNS: f"kubectl -n {namespace} get jobsets,workloads.kueue.x-k8s.io,pods -o wide -w"}
