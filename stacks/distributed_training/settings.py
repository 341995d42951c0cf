"""The ``distributed`` section of a distributed-training stack, and the scenario's rules: one training run across
several GPU nodes (InfiniBand ND sizes, RDMA through the Network Operator), checkpoints in blob storage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from components.vocabulary import SecurityException, StorageAuth
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

@dataclass(frozen=True)
class NcclBaseline:
    """What an NCCL all-reduce across healthy nodes of one size reaches: bus bandwidth in GB/s at its largest
    messages, the figure below which a re-test is due, and the one below which the node is faulty."""

    expected: float
    warn_below: float
    faulty_below: float | None
    source: str


NCCL_BASELINES: dict[str, NcclBaseline] = {
    # The 450 GB/s assumes a full rack with SHARP/CollNet at 16 G (the source's own notes): a 2-node run without
    # them reads below 400 when healthy, so the check warns only where Microsoft calls the node faulty.
    "standardNDSH100v5Family": NcclBaseline(
        450.0, 300.0, 300.0, "Azure/ai-infrastructure-on-azure@a01b073 skills/slurm/sku_performance_baseline/SKILL.md, "
        "Standard_ND96isr_H100_v5: NCCL all_reduce busbw (full sweep, 16 G, SHARP/CollNet, a full rack) ~450 GB/s, "
        "GHR (drain the node and file a Guest Health Report) < 300 GB/s"),
    "Standard NDASv4_A100 Family": NcclBaseline(
        187.0, 180.0, None, "Azure/aks-rdma-infiniband@700dabb tests/expected-output.md (2 Standard_ND96asr_v4 nodes, "
        "tests/README.md): 187 GB/s at 8 GiB; 'less than 180 indicates that there is a problem with the setup'"),
}
"""Microsoft's published all-reduce baselines, by quota family. A family not here gets its figures reported
without a verdict (``expectBusbw`` sets one, from the user's own healthy run)."""

TOPOLOGY_FILES = {"standardNDSH100v5Family": "ndv5-topo.xml", "Standard NDASv4_A100 Family": "ndv4-topo.xml"}
"""NCCL's view of the VM's GPU, NIC and NUMA layout, which it cannot read inside the VM, by quota family: Azure's
files (Azure/aks-rdma-infiniband@700dabb tests/scenarios/nvidia-topology/, MIT; its NCCL test mounts them as
NCCL_TOPO_FILE with CUDA_DEVICE_ORDER=PCI_BUS_ID, tests/scenarios/k8s/templates/mpi-job.yaml), kept byte for byte in
this folder's topology/."""
TOPOLOGY_FOLDER = Path(__file__).with_name("topology")


class DistributedSettings(ConfigModel):
    section: ClassVar[str] = "distributed"

    nodes: int = Field(2, ge=1, le=64)
    """Nodes of one run: a pod per node, all started together (JobSet), admitted whole (Kueue)."""
    gpus_per_node: int | None = derived("every GPU of the pool's size", ge=1)
    """Processes (one per GPU) each node's pod runs."""
    steps: int = Field(2000, ge=1, le=1_000_000)
    """Optimisation steps of a run."""
    batch_size: int = Field(4096, ge=1, le=10_000_000)
    """Global batch of each step, split evenly over every process of the run (nodes × gpusPerNode)."""
    expect_busbw: float | None = derived("the warn figure of NCCL_BASELINES for the pool's size, where published")
    """GB/s of bus bandwidth below which the all-reduce check says the run is slow; unset and unpublished: the
    check reports its figures only."""


def training_pool(cfg: StackConfig) -> GpuPool:
    """The pool runs take: the first GPU pool."""
    return cfg.gpu_pools[0]


def gpus_per_node(cfg: StackConfig, st: DistributedSettings) -> int:
    return st.gpus_per_node or training_pool(cfg).size.gpus


def rdma(cfg: StackConfig) -> bool:
    """Runs reach the other nodes over InfiniBand RDMA: an InfiniBand size with the Network Operator serving it."""
    return training_pool(cfg).size.infiniband and cfg.addons.network_operator


def nccl_baseline(cfg: StackConfig, st: DistributedSettings) -> NcclBaseline | None:
    """The all-reduce check's thresholds: the size's published baseline, or ``expectBusbw`` as the warn figure."""
    published = NCCL_BASELINES.get(training_pool(cfg).size.family)
    if st.expect_busbw is None:
        return published
    return NcclBaseline(max(st.expect_busbw, published.expected if published else 0.0), st.expect_busbw,
                        published.faulty_below if published else None, "distributed.expectBusbw")


def topology_file(cfg: StackConfig) -> Path | None:
    """Azure's NCCL topology file for the pool's size, where one exists."""
    name = TOPOLOGY_FILES.get(training_pool(cfg).size.family)
    return TOPOLOGY_FOLDER / name if name else None


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


def needs(cfg: StackConfig, st: DistributedSettings) -> Needs:
    """InfiniBand runs lock memory for RDMA: their namespace is the stated exception (SecurityException)."""
    return Needs(images={"jobs": "docker/jobs"}, storage_roles=(CHECKPOINTS,), namespace="distributed",
                 namespace_exception=SecurityException.RDMA_MEMORY_LOCK if rdma(cfg) else None,
                 data_access={TRAIN: {CHECKPOINTS: True}}, job_queue=True, job_sets=True)
