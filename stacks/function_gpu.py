"""Seed 000: a PyTorch Azure Function on a GPU node pool, its image built into the stack's ACR."""

from __future__ import annotations

from components.workloads.function import GpuFunction, GpuFunctionArgs
from program import outputs
from program.scenario import Outputs, Platform, Scenario
from stackconfig.schema import StackConfig


def deploy(cfg: StackConfig, platform: Platform) -> Outputs:
    function = GpuFunction("function", GpuFunctionArgs(
        pool=platform.gpu_pool(cfg.function_pool),
        scaling=platform.gpu_scaling(cfg.function_pool, cfg.function.target_gpu_utilisation),
        image=platform.image("function"),
        exposure=cfg.function.exposure,
        allowed_source_ranges=cfg.function.allowed_source_ranges,
        max_context_chars=cfg.function.max_context_chars,
        wait_for=platform.gpu_operator,
    ), opts=platform.opts)
    return {outputs.FUNCTION_BASE_URL: function.base_url, outputs.FUNCTION_STATUS_URL: function.status_url,
            outputs.FUNCTION_PORT_FORWARD: function.port_forward}


SCENARIO = Scenario(
    name="function-gpu",
    summary="A PyTorch Azure Function (Functions v4) on a T4 spot pool, its image built in the stack's ACR, "
            "scaled by KEDA on its GPUs' utilisation behind a LoadBalancer (internal by default)",
    seed="000 PyTorch Azure Function on a GPU",
    images={"function": "docker/function"},
    deploy=deploy,
)
