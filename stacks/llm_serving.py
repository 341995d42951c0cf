"""An OpenAI-compatible LLM endpoint on the GPU pool: vLLM scaled on its queue, or a KAITO preset; observed and
load-tested like the other scenarios (docs/scenarios/llm-serving.md)."""

from __future__ import annotations

import pulumi

from components.build.imported_image import ImportedImage, ImportedImageArgs
from components.monitoring.alert_rules import AlertRule
from components.workloads.gpu_deployment import GpuScaling
from components.workloads.llm_serving import LlmServing, LlmServingArgs
from program import outputs
from program.scenario import Outputs, Platform, Scenario
from program.workspace import DataAccess
from stackconfig.reader import ConfigError
from stackconfig.schema import PROJECT, SecurityException, StackConfig
from stackconfig.settings import llm_serving as llm
from stackconfig.settings.llm_serving import Runtime, Weights

MODELS = "models"
"""Storage role of the weights account (blob weights)."""
SERVER = "server"
"""The workload that reads the weights: its own identity and read-only volume."""


def blob_weights(cfg: StackConfig) -> bool:
    st = llm.of(cfg)
    return st.runtime == Runtime.VLLM and st.weights == Weights.BLOB


def check(cfg: StackConfig) -> None:
    accounts = [a for a in cfg.storage.accounts if a.role == MODELS]
    if blob_weights(cfg) and (len(accounts) != 1 or len(accounts[0].containers) != 1):
        raise ConfigError(f"{PROJECT}:storage.accounts", [a.role for a in cfg.storage.accounts],
                          f"llm.weights: blob needs one storage account of role {MODELS} with one container "
                          "(the weights); or set llm.weights: hub")


def data_access(cfg: StackConfig) -> DataAccess:
    return {SERVER: {MODELS: False}} if blob_weights(cfg) else {}


def alert_rules(cfg: StackConfig) -> list[AlertRule]:
    limit = llm.of(cfg).max_queue_seconds
    return [AlertRule(
        "LlmRequestsWaiting",
        "histogram_quantile(0.9, sum by (le, namespace) (rate(vllm:request_queue_time_seconds_bucket[5m]))) "
        f"> {limit}",
        10, 2,
        f"LLM requests wait more than {limit} s before the server starts them (90th percentile): the replicas "
        "are saturated and cannot grow (the pool's maxCount, GPU quota or spot capacity), or a replica is stuck.")]


def server_image(cfg: StackConfig, platform: Platform) -> pulumi.Input[str]:
    """The vLLM image by digest: a configured digest as is; a tag copied into the stack's registry and pulled
    from there by the digest the registry records."""
    st = llm.of(cfg)
    reference = llm.image_reference(st, cfg.gpu_pool(st.pool))
    if "@sha256:" in reference:
        return reference
    registry = platform.azure.registry
    return ImportedImage("vllm-image", ImportedImageArgs(
        source=reference, registry_name=registry.name, login_server=registry.login_server,
        pull_access=registry.kubelet_pull),
        opts=platform.opts).image_ref


def deploy(cfg: StackConfig, platform: Platform) -> Outputs:
    st = llm.of(cfg)
    pool = cfg.gpu_pool(st.pool)
    ws = platform.workspace
    vllm = st.runtime == Runtime.VLLM
    serving = LlmServing("llm", LlmServingArgs(
        pool=platform.gpu_pool(pool), pool_config=pool, settings=st, workspace=ws.workspace,
        jobs_image=platform.image("jobs"),
        image=server_image(cfg, platform) if vllm else None,
        weights=ws.data.get(SERVER),
        scaling=GpuScaling(1, st.max_replicas, st.waiting_per_replica, platform.metrics) if vllm else None,
        scrape=cfg.monitoring.enabled,
        wait_for=platform.gpu_operator,
    ), opts=platform.opts)
    values: dict[str, object] = {
        outputs.LLM_BASE_URL: serving.base_url,
        outputs.LLM_MODEL: serving.served_model,
        outputs.LLM_PORT_FORWARD: serving.port_forward,
        outputs.LLM_CHAT_EXAMPLE: serving.chat_example,
        outputs.RUN_LLM_LOAD_TEST: serving.load_test_command,
    }
    if blob_weights(cfg):
        account = next(a for a in cfg.storage.accounts if a.role == MODELS)
        folder = llm.weights_folder(st)
        values[outputs.UPLOAD_WEIGHTS] = (
            f"hf download {st.model} --local-dir ./{folder} && az storage blob upload-batch --auth-mode login "
            f"--account-name {cfg.storage_account_name(account)} --destination {account.containers[0]} "
            f"--destination-path {folder} --source ./{folder}")
    return values


SCENARIO = Scenario(
    name="llm-serving",
    summary="An OpenAI-compatible LLM endpoint on a GPU pool: vLLM scaled by KEDA on its request queue (weights "
            "from blob storage or a pinned hub revision), or a KAITO preset; internal only, with a load test",
    seed="- (none: what GPU users on AKS run today)",
    images={"jobs": "docker/jobs"},
    namespace="llm-serving",
    data_access=data_access,
    deployer_blob_access={MODELS: True},  # uploadWeights writes the weights
    check=check,
    deploy=deploy,
    alert_rules=alert_rules,
    ai_toolchain_operator=lambda cfg: llm.of(cfg).runtime == Runtime.KAITO,
    # KAITO 0.6.0 writes its inference pods without a security context: restricted admission would refuse them.
    namespace_exception=lambda cfg: SecurityException.BASELINE_OPERATOR_PODS
    if llm.of(cfg).runtime == Runtime.KAITO else None,
)
