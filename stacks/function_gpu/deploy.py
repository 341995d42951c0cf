"""function-gpu's workloads on the platform and its stack outputs."""

from __future__ import annotations

from program.config.errors import validated
from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.function_gpu.settings import Exposure, FunctionSettings, function_pool, source_ranges
from stacks.function_gpu.workloads import GpuFunction, GpuFunctionArgs

BASE_URL, STATUS_URL, PORT_FORWARD = "functionBaseUrl", "functionStatusUrl", "functionPortForward"
"""Output names: the function's URL and status route, and a port-forward that reaches it from anywhere."""


def deploy(cfg: StackConfig, st: FunctionSettings, platform: Platform) -> Outputs:
    pool = validated(function_pool(cfg, st), "aksgpu:function.pool")
    platform.pull_ahead(pool, {"function": platform.image("function")})
    function = GpuFunction("function", GpuFunctionArgs(
        pool=platform.gpu_pool(pool),
        scaling=platform.gpu_scaling(pool, st.target_gpu_utilisation),
        image=platform.image("function"),
        internal=st.exposure == Exposure.INTERNAL,
        allowed_source_ranges=source_ranges(cfg, st),
        max_context_chars=st.max_context_chars,
        wait_for=platform.gpu_operator,
    ), opts=platform.opts)
    return {BASE_URL: function.base_url, STATUS_URL: function.status_url, PORT_FORWARD: function.port_forward}
