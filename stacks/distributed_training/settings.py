"""The ``distributed`` section of a distributed-training stack, and the scenario's rules: one training run across
several GPU nodes (InfiniBand ND sizes, RDMA through the Network Operator), checkpoints in blob storage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from pydantic import Field

from components.vocabulary import StorageAuth
from program.config.errors import ConfigError
from program.config.keys import KEY_PREFIX
from program.config.model import ConfigModel, derived
from program.config.schema import GpuPool, StackConfig
from program.needs import Needs

CHECKPOINTS = "ckpt"
"""Storage role of the checkpoint account."""
TRAIN = "train"
"""The workload that writes checkpoints (its identity and volume)."""
SECTION = f"{KEY_PREFIX}distributed."
"""Where this scenario's keys live in a stack file."""

EXPECTED_BUSBW: dict[str, tuple[float, str]] = {
    "standardNDSH100v5Family": (180.0, "Azure/aks-rdma-infiniband@700dabb tests/expected-output.md: an NCCL "
                                "all-reduce of 8 GiB across 2 ND96isr H100 v5 nodes below 180 GB/s bus bandwidth "
                                "'indicates that there is a problem with the setup'"),
}
"""Bus bandwidth a healthy all-reduce across nodes reaches, by quota family, with its source. A family not here
gets its figures reported without a verdict (``expectBusbw`` sets one)."""


class DistributedSettings(ConfigModel):
    section: ClassVar[str] = "distributed"

    nodes: int = Field(2, ge=1, le=64)
    """Nodes of one run: a pod per node, all started together (JobSet), admitted whole (Kueue)."""
    gpus_per_node: int | None = derived("every GPU of the pool's size")
    """Processes (one per GPU) each node's pod runs."""
    steps: int = Field(2000, ge=1, le=1_000_000)
    """Optimisation steps of a run."""
    batch_size: int = Field(4096, ge=1, le=10_000_000)
    """Global batch of each step, split evenly over every process of the run (nodes × gpusPerNode)."""
    expect_busbw: float | None = derived("EXPECTED_BUSBW of the pool's size, where recorded")
    """GB/s of bus bandwidth the all-reduce check must reach (75 % of it passes); unset: reported only."""


def training_pool(cfg: StackConfig) -> GpuPool:
    """The pool runs take: the first GPU pool."""
    return cfg.gpu_pools[0]


def gpus_per_node(cfg: StackConfig, st: DistributedSettings) -> int:
    return st.gpus_per_node or training_pool(cfg).size.gpus


def rdma(cfg: StackConfig) -> bool:
    """Runs reach the other nodes over InfiniBand RDMA: an InfiniBand size with the Network Operator serving it."""
    return training_pool(cfg).size.infiniband and cfg.addons.network_operator


def expected_busbw(cfg: StackConfig, st: DistributedSettings) -> tuple[float | None, str]:
    if st.expect_busbw is not None:
        return st.expect_busbw, "distributed.expectBusbw"
    return EXPECTED_BUSBW.get(training_pool(cfg).size.family, (None, "no figure recorded for this size"))


def check(cfg: StackConfig, st: DistributedSettings) -> Iterator[ConfigError]:
    if not cfg.gpu_pools:
        return  # the platform's own rule names the missing pool
    pool = training_pool(cfg)
    size, gpus = pool.size, gpus_per_node(cfg, st)
    if gpus > size.gpus:
        yield ConfigError(f"{SECTION}gpusPerNode", gpus, f"{pool.vm_size} has {size.gpus} GPU(s) per node")
    if st.nodes > pool.max_count:
        yield ConfigError(f"{SECTION}nodes", st.nodes, f"pool '{pool.name}' has at most {pool.max_count} nodes "
                          "(gpuPools[0].maxCount): a run of more would wait for ever")
    processes = st.nodes * gpus
    if st.batch_size % processes:
        yield ConfigError(f"{SECTION}batchSize", st.batch_size, f"must split evenly over {processes} processes "
                          f"({st.nodes} nodes × {gpus} GPUs)")
    if size.infiniband and not cfg.addons.network_operator:
        yield ConfigError("aksgpu:addons.networkOperator", False, f"{pool.vm_size} reaches the other nodes over "
                          "InfiniBand RDMA only with the Network Operator (its driver and RDMA device plugin); "
                          "set it true")
    if st.nodes > 1 and size.infiniband and len(pool.zones) > 1:
        yield ConfigError("aksgpu:gpuPools[0].zones", list(pool.zones), "InfiniBand joins the VMs of one scale set "
                          "in one zone: a multi-node run needs one zone or none")
    if pool.nap:
        yield ConfigError("aksgpu:gpuPools[0].provisioning", pool.provisioning, "a run's nodes must share an "
                          "InfiniBand fabric, which an agent pool's scale set gives; use provisioning autoscaler")
    if cfg.storage.auth == StorageAuth.SAS:
        yield ConfigError("aksgpu:storage.auth", cfg.storage.auth,
                          "a run that outlives the SAS would stop writing checkpoints; use identity")


NEEDS = Needs(images={"jobs": "docker/jobs"}, storage_roles=(CHECKPOINTS,), namespace="distributed",
              data_access={TRAIN: {CHECKPOINTS: True}}, job_queue=True, job_sets=True)
