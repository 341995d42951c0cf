"""Seed 000: a PyTorch Azure Function on a GPU node pool, its image built into the stack's ACR."""

from program.scenario import Scenario
from stacks.function_gpu.deploy import deploy
from stacks.function_gpu.probes import PROBES
from stacks.function_gpu.settings import FunctionSettings, check, needs

SCENARIO = Scenario(
    name="function-gpu",
    summary="A PyTorch Azure Function (Functions v4) on a T4 spot pool, its image built in the stack's ACR, "
            "scaled by KEDA on its GPUs' utilisation behind a LoadBalancer (internal by default)",
    seed="000 PyTorch Azure Function on a GPU",
    settings=FunctionSettings,
    needs=needs,
    check=check,
    deploy=deploy,
    probes=PROBES,
)
