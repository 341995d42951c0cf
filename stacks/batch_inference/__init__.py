"""A nightly GPU batch: request files and a model in blob storage, answers written back, on a spot pool that scales
from zero (README.md)."""

from program.scenario import Scenario
from stacks.batch_inference.deploy import deploy
from stacks.batch_inference.probes import probes
from stacks.batch_inference.settings import NEEDS, BatchSettings, check

SCENARIO = Scenario(
    name="batch-inference",
    summary="A nightly GPU batch run on a spot pool that scales from zero: request files and a model read from blob "
            "storage, answers written back with the run's own identity, queued by Kueue",
    seed="004 training with GPU autoscaling (its model, answered in bulk)",
    settings=BatchSettings,
    needs=NEEDS,
    check=check,
    deploy=deploy,
    probes=probes,
)
