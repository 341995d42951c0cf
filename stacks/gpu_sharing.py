"""Seed 001: several GPU workloads sharing one GPU through the device plugin instead of NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

from components.workloads.shared_inference import SharedGpuInference, SharedInferenceArgs
from program import outputs
from program.scenario import Outputs, Platform, Scenario
from stackconfig.reader import ConfigError
from stackconfig.schema import PROJECT, GpuPoolConfig, SharingMode, StackConfig

MIN_SHARES = 3
"""Two inference services and a notebook each take one share of the GPU."""


def shared_pool(cfg: StackConfig) -> GpuPoolConfig | None:
    """The first pool whose nodes offer several shares of a GPU: time-slicing or MPS replicas, or MIG instances."""
    return next((g for g in cfg.gpu_pools if g.sharing.mode != SharingMode.NONE
                 and g.schedulable_gpus_per_node >= MIN_SHARES), None)


def check(cfg: StackConfig) -> None:
    pool = shared_pool(cfg)
    if pool is None:
        have = {g.name: f"{g.sharing.mode} x{g.schedulable_gpus_per_node}" for g in cfg.gpu_pools}
        raise ConfigError(f"{PROJECT}:gpuPools", have,
                          f"scenario gpu-sharing needs a pool whose nodes offer {MIN_SHARES} or more GPU shares "
                          "(sharing.mode time-slicing or mps with replicas, or mig with a migProfile)")
    wanted = cfg.workloads.inference_services + int(cfg.workloads.notebook)
    shares = pool.schedulable_gpus_per_node * pool.pool.max_count
    if wanted > shares:
        raise ConfigError(f"{PROJECT}:workloads.inferenceServices", cfg.workloads.inference_services,
                          f"{wanted} pods (services + notebook) each take one GPU share, but pool "
                          f"'{pool.name}' offers {shares}; raise sharing.replicas or lower the count")


def deploy(cfg: StackConfig, platform: Platform) -> Outputs:
    pool = shared_pool(cfg)
    sharing = SharedGpuInference("sharing", SharedInferenceArgs(
        pool=platform.gpu_pool(pool),
        # Each service scales on its GPU share's utilisation within the shares the pool offers at its maximum,
        # leaving one to the notebook.
        scaling=platform.gpu_scaling(pool, cfg.function.target_gpu_utilisation, reserved=int(cfg.workloads.notebook),
                                     sharers=cfg.workloads.inference_services),
        function_image=platform.image("function"),
        jobs_image=platform.image("jobs"),
        services=cfg.workloads.inference_services,
        notebook=cfg.workloads.notebook,
        max_context_chars=cfg.function.max_context_chars,
        wait_for=platform.gpu_operator,
    ), opts=platform.opts)
    values = {outputs.INFERENCE_SERVICES: sharing.service_urls, outputs.RUN_LOAD_TEST: sharing.load_test_command}
    if sharing.notebook_token is not None:
        values[outputs.NOTEBOOK_TOKEN] = sharing.notebook_token
        values[outputs.NOTEBOOK_PORT_FORWARD] = sharing.notebook_command
    return values


SCENARIO = Scenario(
    name="gpu-sharing",
    summary="One GPU shared (time-slicing, MPS or MIG, as the stack's pool says): inference services scaled by "
            "KEDA and a Jupyter notebook each take a share, with a load-test template",
    seed="001 several workloads on one GPU",
    images={"function": "docker/function", "jobs": "docker/jobs"},
    check=check,
    deploy=deploy,
)
