"""Seed 001: several GPU workloads sharing one GPU through the device plugin instead of NVIDIA_VISIBLE_DEVICES."""

from program.scenario import Scenario
from stacks.gpu_sharing.deploy import deploy
from stacks.gpu_sharing.probes import probes
from stacks.gpu_sharing.settings import MOVED, InferenceSettings, check, needs

SCENARIO = Scenario(
    name="gpu-sharing",
    summary="One GPU shared (time-slicing, MPS or MIG, as the stack's pool says): inference services (scaled by "
            "KEDA where the pool has room) and a Jupyter notebook each take a share, with a load-test template",
    seed="001 several workloads on one GPU",
    settings=InferenceSettings,
    needs=needs,
    check=check,
    moved=MOVED,
    deploy=deploy,
    probes=probes,
)
