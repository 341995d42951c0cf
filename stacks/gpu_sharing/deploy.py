"""gpu-sharing's workloads on the platform and its stack outputs."""

from __future__ import annotations

from program.config.errors import validated
from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.gpu_sharing.settings import InferenceSettings, shared_pool
from stacks.gpu_sharing.workloads import NOTEBOOK_IMAGE, SharedGpuInference, SharedInferenceArgs

INFERENCE_SERVICES, RUN_LOAD_TEST = "inferenceServices", "runLoadTest"
NOTEBOOK_TOKEN, NOTEBOOK_PORT_FORWARD = "notebookToken", "notebookPortForward"
"""Output names: the services' URLs, the load test's submit command, and the notebook's token and way in."""


def deploy(cfg: StackConfig, st: InferenceSettings, platform: Platform) -> Outputs:
    pool = validated(shared_pool(cfg), "aksgpu:gpuPools")
    notebook = {"notebook": NOTEBOOK_IMAGE} if st.notebook else {}
    platform.pull_ahead(pool, {"function": platform.image("function"), **notebook})
    sharing = SharedGpuInference("sharing", SharedInferenceArgs(
        pool=platform.gpu_pool(pool),
        # Each service scales on its GPU share's utilisation within the shares the pool offers at its maximum,
        # leaving one to the notebook.
        scaling=platform.gpu_scaling(pool, st.target_gpu_utilisation, reserved=int(st.notebook),
                                     sharers=st.services),
        function_image=platform.image("function"),
        jobs_image=platform.image("jobs"),
        services=st.services,
        notebook=st.notebook,
        max_context_chars=st.max_context_chars,
        wait_for=platform.gpu_operator,
    ), opts=platform.opts)
    values: dict[str, object] = {INFERENCE_SERVICES: sharing.service_urls, RUN_LOAD_TEST: sharing.load_test_command}
    if sharing.notebook_token is not None:
        values[NOTEBOOK_TOKEN] = sharing.notebook_token
        values[NOTEBOOK_PORT_FORWARD] = sharing.notebook_command
    return values
