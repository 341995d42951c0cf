"""llm-serving's workloads on the platform and its stack outputs."""

from __future__ import annotations

import pulumi

from components.autoscaling.gpu_deployment import GpuScaling
from components.images.imported import DOCKER_HUB_TOKEN_ENV, SourceLogin
from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.llm_serving import settings as llm
from stacks.llm_serving.settings import MODELS_ROLE, SERVER, LlmSettings, Runtime, Weights
from stacks.llm_serving.workloads import LlmServing, LlmServingArgs, VllmServer

LLM_BASE_URL, LLM_MODEL, LLM_PORT_FORWARD = "llmBaseUrl", "llmModel", "llmPortForward"
LLM_CHAT_EXAMPLE, RUN_LLM_LOAD_TEST, UPLOAD_WEIGHTS = "llmChatExample", "runLlmLoadTest", "uploadWeights"
"""Output names: where the endpoint is and what it serves, how to reach and try it, the load test, and (blob
weights) the upload."""


def server_image(cfg: StackConfig, st: LlmSettings, platform: Platform) -> pulumi.Input[str]:
    """The vLLM image by digest: a configured digest as is; a tag copied into the stack's registry and pulled
    from there by the digest the registry records."""
    reference = llm.image_reference(st, llm.checked_server_pool(cfg, st))
    if "@sha256:" in reference:
        return reference
    login = SourceLogin(st.docker_hub_username, DOCKER_HUB_TOKEN_ENV) if st.docker_hub_username else None
    return platform.imported_image("vllm-image", reference, login)


WEIGHTS_REPOSITORY = "llm-weights"
"""The weights images' repository in the stack's registry; each model and commit is its own tag."""


def weights_image(st: LlmSettings, platform: Platform) -> pulumi.Input[str]:
    """The model's files at ``revision`` as an image in the stack's registry (docker/weights), by digest."""
    return platform.built_image("image-weights", "docker/weights", WEIGHTS_REPOSITORY,
                                {"MODEL": st.model, "REVISION": st.revision or ""})


def vllm_server(cfg: StackConfig, st: LlmSettings, weights: pulumi.Input[str] | None = None) -> VllmServer:
    """The stack's ``llm`` section as vLLM's flags; ``weights``: the weights image, for ``weights: image``."""
    hub, blob = st.weights == Weights.HUB, st.weights == Weights.BLOB
    return VllmServer(
        served_model_name=llm.served_name(st), max_model_len=st.max_model_len,
        gpu_memory_utilization=st.gpu_memory_utilization, dtype=llm.dtype_flag(st, llm.checked_server_pool(cfg, st)),
        waiting_per_replica=st.waiting_per_replica, hub_model=st.model if hub else None,
        revision=st.revision if hub else None, blob_folder=llm.weights_folder(st) if blob else None,
        weights_image=weights, weights_gib=0 if blob else llm.weights_disk_gib(st))


def deploy(cfg: StackConfig, st: LlmSettings, platform: Platform) -> Outputs:
    pool = llm.checked_server_pool(cfg, st)
    vllm = st.runtime == Runtime.VLLM
    weights = weights_image(st, platform) if vllm and st.weights == Weights.IMAGE else None
    image = server_image(cfg, st, platform) if vllm else None
    if image is not None:
        # KAITO's pods run images its operator picks: nothing to pull ahead there.
        platform.pull_ahead(pool, {"vllm": image, **({"weights": weights} if weights is not None else {})})
    serving = LlmServing("llm", LlmServingArgs(
        pool=platform.gpu_pool(pool),
        server=vllm_server(cfg, st, weights) if vllm else st.kaito_preset,
        workspace=platform.needed_workspace,
        jobs_image=platform.image("jobs"),
        image=image,
        weights=platform.volumes.get(SERVER),
        # A replica takes a whole node: one fewer replica than nodes leaves room to start the new one first.
        scaling=GpuScaling(1, llm.max_replicas(cfg, st), st.waiting_per_replica, platform.metrics,
                           surge=llm.max_replicas(cfg, st) < pool.max_count) if vllm else None,
        scrape=cfg.monitoring.enabled,
        wait_for=platform.gpu_operator,
    ), opts=platform.opts)
    values: dict[str, object] = {
        LLM_BASE_URL: serving.base_url,
        LLM_MODEL: serving.served_model,
        LLM_PORT_FORWARD: serving.port_forward,
        LLM_CHAT_EXAMPLE: serving.chat_example,
        RUN_LLM_LOAD_TEST: serving.load_test_command,
    }
    if llm.blob_weights(st):
        folder = llm.weights_folder(st)
        values[UPLOAD_WEIGHTS] = (f"hf download {st.model} --local-dir ./{folder} && "
                                  + platform.blob_command(MODELS_ROLE, upload=True, local=f"./{folder}", path=folder))
    return values
