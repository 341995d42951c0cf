"""The ``inference`` section of a gpu-sharing stack: how many services share the GPU, the notebook, how they
scale. The pool they share is the stack's first GPU pool offering several shares of a GPU."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from pydantic import Field

from components.vocabulary import SharingMode
from program.config.errors import ConfigError
from program.config.model import ConfigModel
from program.config.schema import GpuPool, StackConfig
from program.needs import Needs
from stacks.function_gpu.settings import MaxContextChars, TargetUtilisation

MIN_SHARES = 3
"""Two inference services and a notebook each take one share of the GPU."""


class InferenceSettings(ConfigModel):
    section: ClassVar[str] = "inference"

    services: int = Field(3, ge=1, le=16)
    """Independent inference Deployments on the shared GPU, each with its own Service."""
    notebook: bool = True
    """A Jupyter notebook that takes one more share of the GPU."""
    target_gpu_utilisation: TargetUtilisation = 60
    max_context_chars: MaxContextChars = 20_000


MOVED = {"workloads.inferenceServices": "services", "workloads.notebook": "notebook",
         "function.targetGpuUtilisation": "targetGpuUtilisation", "function.maxContextChars": "maxContextChars"}


def shared_pool(cfg: StackConfig) -> GpuPool | None:
    """The first pool whose nodes offer several shares of a GPU: time-slicing or MPS replicas, or MIG instances."""
    return cfg.pick_gpu_pool(where=lambda g: g.sharing.mode != SharingMode.NONE
                             and g.schedulable_gpus_per_node >= MIN_SHARES)


def check(cfg: StackConfig, st: InferenceSettings) -> Iterator[ConfigError]:
    pool = shared_pool(cfg)
    if pool is None:
        have = {g.name: f"{g.sharing.mode} x{g.schedulable_gpus_per_node}" for g in cfg.gpu_pools}
        yield ConfigError("aksgpu:gpuPools", have,
                          f"scenario gpu-sharing needs a pool whose nodes offer {MIN_SHARES} or more GPU shares "
                          "(sharing.mode time-slicing or mps with replicas, or mig with a migProfile)")
        return
    wanted = st.services + int(st.notebook)
    shares = pool.schedulable_gpus_per_node * pool.max_count
    if wanted > shares:
        yield ConfigError("aksgpu:inference.services", st.services,
                          f"{wanted} pods (services + notebook) each take one GPU share, but pool '{pool.name}' "
                          f"offers {shares}; raise sharing.replicas or lower the count")


def needs(cfg: StackConfig, st: InferenceSettings) -> Needs:
    pool = shared_pool(cfg)
    low, high = pool.replica_bounds(reserved=int(st.notebook), sharers=st.services) if pool else (1, 1)
    # MIG1g on one A100: 7 instances, 1 for the notebook, 2 for each of 3 services whatever the load.
    return Needs(images={"function": "docker/function", "jobs": "docker/jobs"}, autoscaled=high > low)
