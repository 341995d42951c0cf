"""Multi-node training on InfiniBand: NCCL all-reduce check and torchrun training as JobSets, admitted whole by
Kueue, checkpoints in blob storage (seed 003's Network Operator and 2-GPU job, seed 004's parallel training)."""

from program.scenario import Scenario
from stacks.distributed_training.deploy import deploy
from stacks.distributed_training.probes import probes
from stacks.distributed_training.settings import DistributedSettings, check, needs

SCENARIO = Scenario(
    name="distributed-training",
    summary="One training run across InfiniBand GPU nodes: the Network Operator (RDMA), an NCCL all-reduce check, "
            "torchrun under JobSet admitted whole by Kueue, checkpoints in blob storage",
    seed="003 (Network Operator, 2-GPU job), 004 training",
    settings=DistributedSettings,
    needs=needs,
    check=check,
    deploy=deploy,
    probes=probes,
)
