"""Seed 004: GPU training that scales from zero, checkpoints in blob storage, predictions on a CPU pool."""

from program.scenario import Scenario
from stacks.training_autoscale.deploy import deploy
from stacks.training_autoscale.probes import drill, probes
from stacks.training_autoscale.settings import MOVED, NEEDS, ScaledTrainingSettings, check

SCENARIO = Scenario(
    name="training-autoscale",
    summary="Resumable GPU training on a pool that scales from zero and back, parallel runs queued by Kueue, "
            "checkpoints in blob storage, a prediction service on a CPU pool",
    seed="004 training with GPU autoscaling",
    settings=ScaledTrainingSettings,
    needs=NEEDS,
    check=check,
    moved=MOVED,
    deploy=deploy,
    probes=probes,
    drill=drill,
)
