"""Seed 001: several GPU workloads sharing one GPU through the device plugin instead of NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

import pulumi

from components.settings import GpuPoolConfig
from components.shared_inference import SharedGpuInference, SharedInferenceArgs
from stacks import outputs
from stacks.azure_layer import build_azure_layer
from stacks.config import PROJECT, StackConfig
from stacks.config_reader import ConfigError
from stacks.gpu_layer import build_gpu_software, k8s_opts
from stacks.images import build_images
from stacks.requirements import require_gpu_operator, require_gpu_pool, require_registry

MIN_SHARED_REPLICAS = 3
"""Two inference services and a notebook each take one share of the GPU."""


def shared_pool(cfg: StackConfig) -> GpuPoolConfig | None:
    return next((g for g in cfg.gpu_pools if g.sharing.mode in ("time-slicing", "mps")
                 and g.sharing.replicas >= MIN_SHARED_REPLICAS), None)


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    require_gpu_operator(cfg)
    pool = shared_pool(cfg)
    if pool is None:
        raise ConfigError(f"{PROJECT}:gpuPools[0].sharing", cfg.gpu_pools[0].sharing.mode,
                          f"scenario gpu-sharing needs a pool with sharing time-slicing or mps and replicas >= "
                          f"{MIN_SHARED_REPLICAS}")
    wanted = cfg.workloads.inference_services + int(cfg.workloads.notebook)
    shares = pool.schedulable_gpus_per_node * pool.pool.max_count
    if wanted > shares:
        raise ConfigError(f"{PROJECT}:workloads.inferenceServices", cfg.workloads.inference_services,
                          f"{wanted} pods (services + notebook) each take one GPU share, but pool "
                          f"'{pool.pool.name}' offers {shares}; raise sharing.replicas or lower the count")


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    software = build_gpu_software(cfg, layer)
    images = build_images(cfg, layer, {"function": "docker/function", "jobs": "docker/jobs"})
    pool = shared_pool(cfg)
    sharing = SharedGpuInference("sharing", SharedInferenceArgs(
        pool=layer.gpu_pools[pool.pool.name],
        function_image=images["function"].image_ref,
        jobs_image=images["jobs"].image_ref,
        services=cfg.workloads.inference_services,
        notebook=cfg.workloads.notebook,
        wait_for=[software.operator.release],
    ), opts=k8s_opts(layer))
    pulumi.export(outputs.FUNCTION_IMAGE, images["function"].image_ref)
    pulumi.export(outputs.JOBS_IMAGE, images["jobs"].image_ref)
    pulumi.export(outputs.INFERENCE_SERVICES, sharing.service_urls)
    pulumi.export(outputs.RUN_LOAD_TEST, sharing.load_test_command)
    if sharing.notebook_token is not None:
        pulumi.export(outputs.NOTEBOOK_TOKEN, sharing.notebook_token)
        pulumi.export(outputs.NOTEBOOK_PORT_FORWARD, sharing.notebook_command)
