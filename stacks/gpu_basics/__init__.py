"""Seed 002: the nvidia-smi smoke test and a GPU training Job on a spot T4 pool that scales from zero."""

from program.scenario import Scenario
from stacks.gpu_basics.deploy import deploy
from stacks.gpu_basics.probes import probes
from stacks.gpu_basics.settings import MOVED, NEEDS, TrainingSettings

SCENARIO = Scenario(
    name="gpu-basics",
    summary="A T4 spot pool that scales from zero, the nvidia-smi Job and a GPU training Job",
    seed="002 nvidia-smi, a GPU training Job",
    settings=TrainingSettings,
    needs=NEEDS,
    moved=MOVED,
    deploy=deploy,
    probes=probes,
)
