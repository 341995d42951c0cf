"""Azure GPU VM sizes that AKS GPU pools may use, and the retired ones users still paste from old guides.

What Azure says of each size (quota family, vCPUs, memory, GPU count, regions) is data, refreshed from its APIs into
``catalogue.yaml``; what the GPU in each family is (model, memory, CUDA capability, MIG, GRID, InfiniBand) is
known here, with each family's source beside it; the retirement notices beside ``RETIRED_SIZES``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CATALOGUE = Path(__file__).with_name("catalogue.yaml")


@dataclass(frozen=True)
class GpuFamily:
    """What every size of one Resource SKUs family has: its GPU."""

    series: str
    """Azure series name as the docs spell it."""
    gpu_model: str
    """GPU model, e.g. ``T4``."""
    gpu_memory_gib: int
    """Memory of one GPU."""
    compute_capability: float
    """CUDA compute capability of the GPU (https://developer.nvidia.com/cuda-gpus): bfloat16 needs 8.0 or more."""
    mig: bool = False
    """The GPU supports Multi-Instance GPU partitioning (A100, H100, H200)."""
    grid: bool = False
    """The GPU needs NVIDIA's GRID (vGPU) driver, which only AKS installs: the GPU operator cannot own it."""
    infiniband_gbps: int = 0
    """Each GPU's InfiniBand port speed (the ``r`` in the size name: one port per GPU, for GPUDirect RDMA between
    nodes); 0: none."""
    dense_tflops: float = 0.0
    """The GPU's dense tensor rate in its fastest 16-bit type (bf16, or fp16 before compute capability 8.0), from
    NVIDIA's datasheet: what the GPU node gate's check holds a node's GPUs to a fraction of."""

    @property
    def infiniband(self) -> bool:
        return self.infiniband_gbps > 0


# Sources: the series pages, learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/<page>; the dense
# 16-bit tensor rates from NVIDIA's datasheets (T4: "Mixed-Precision (FP16/FP32) 65 TFLOPS"; A10: BF16 125
# (250 with sparsity); A100: BF16 312; H100 SXM5: BF16 1,979 with sparsity, 989 dense; H100 NVL: 1,671 with sparsity,
# 835 dense; H200: as H100 SXM5).
FAMILIES: dict[str, GpuFamily] = {
    # gpu-accelerated/ncast4v3-series
    "Standard NCASv3_T4 Family": GpuFamily("NCasT4_v3", "T4", 16, 7.5, dense_tflops=65),
    # gpu-accelerated/nca100v4-series
    "StandardNCADSA100v4Family": GpuFamily("NC A100 v4", "A100", 80, 8.0, mig=True, dense_tflops=312),
    # gpu-accelerated/ncadsh100v5-series
    "StandardNCadsH100v5Family": GpuFamily("NCads H100 v5", "H100 NVL", 94, 9.0, mig=True, dense_tflops=835),
    # gpu-accelerated/nvadsa10v5-series (GRID licensed; the fractional sizes are in FRACTIONAL_SIZES)
    "StandardNVADSA10v5Family": GpuFamily("NVadsA10 v5", "A10", 24, 8.6, grid=True, dense_tflops=125),
    # gpu-accelerated/nda100v4-series: 200 Gb/s HDR InfiniBand per GPU
    "Standard NDASv4_A100 Family": GpuFamily("ND A100 v4", "A100", 40, 8.0, mig=True, infiniband_gbps=200,
                                              dense_tflops=312),
    # gpu-accelerated/ndma100v4-series: A100 80 GB, 200 Gb/s HDR InfiniBand per GPU
    "standard NDAMSv4_A100Family": GpuFamily("NDm A100 v4", "A100", 80, 8.0, mig=True, infiniband_gbps=200,
                                              dense_tflops=312),
    # gpu-accelerated/ndh100v5-series: 400 Gb/s NDR InfiniBand per GPU
    "standardNDSH100v5Family": GpuFamily("ND H100 v5", "H100", 80, 9.0, mig=True, infiniband_gbps=400,
                                          dense_tflops=989),
    # gpu-accelerated/ndh200v5-series: H200 141 GB, 400 Gb/s NDR InfiniBand per GPU
    "standardNDISRH200V5Family": GpuFamily("ND H200 v5", "H200", 141, 9.0, mig=True, infiniband_gbps=400,
                                            dense_tflops=989),
}


@dataclass(frozen=True)
class GpuSize:
    """One Azure VM size with NVIDIA GPUs: the catalogue's row and its family's GPU."""

    name: str
    """Azure VM size name, e.g. ``Standard_NC4as_T4_v3``."""
    family: str
    """Resource SKUs family: the name of its vCPU quota (``az vm list-usage``)."""
    gpus: int
    """Whole GPUs per VM (what ``nvidia.com/gpu`` advertises without sharing)."""
    vcpus: int
    """vCPUs per VM."""
    memory_gib: int
    """VM memory."""
    gpu: GpuFamily
    """The family's GPU."""
    regions: Mapping[str, tuple[str, ...]] | None = None
    """Region → availability zones that offer the size, as the last refresh saw them; None: not refreshed yet."""
    spot: bool | None = None
    """The size can run as spot (Resource SKUs' LowPriorityCapable); None: not refreshed yet."""

    @property
    def series(self) -> str:
        return self.gpu.series

    @property
    def gpu_model(self) -> str:
        return self.gpu.gpu_model

    @property
    def gpu_memory_gib(self) -> int:
        return self.gpu.gpu_memory_gib

    @property
    def compute_capability(self) -> float:
        return self.gpu.compute_capability

    @property
    def mig(self) -> bool:
        return self.gpu.mig

    @property
    def grid(self) -> bool:
        return self.gpu.grid

    @property
    def infiniband(self) -> bool:
        return self.gpu.infiniband

    @property
    def infiniband_gbps(self) -> int:
        return self.gpu.infiniband_gbps

    @property
    def dense_tflops(self) -> float:
        return self.gpu.dense_tflops


def load_catalogue(path: Path = CATALOGUE) -> tuple[dict[str, Any], dict[str, GpuSize]]:
    """(the file's header, size name → GpuSize). A row whose family has no entry in FAMILIES is an error."""
    data = yaml.safe_load(path.read_text())
    sizes = {}
    for name, row in data["sizes"].items():
        if row["family"] not in FAMILIES:
            raise ValueError(f"{path.name}: {name} has family {row['family']!r}, which FAMILIES in sizes.py does "
                             "not know: add the family's GPU there")
        regions = row.get("regions")
        sizes[name] = GpuSize(name, row["family"], row["gpus"], row["vcpus"], row["memory_gib"],
                              FAMILIES[row["family"]],
                              None if regions is None else {r: tuple(z) for r, z in regions.items()},
                              row.get("spot"))
    return {k: v for k, v in data.items() if k != "sizes"}, sizes


CATALOGUE_HEADER, GPU_SIZES = load_catalogue()


# Sizes that exist but cannot back a Kubernetes GPU pool: a fraction of one A10 is not a schedulable nvidia.com/gpu.
FRACTIONAL_SIZES: dict[str, str] = {
    "Standard_NV6ads_A10_v5": "1/6 of an A10",
    "Standard_NV12ads_A10_v5": "1/3 of an A10",
    "Standard_NV18ads_A10_v5": "1/2 of an A10",
}


@dataclass(frozen=True)
class Retired:
    """A retired GPU size and what replaces it."""

    gpu: str
    """The retired size's GPU."""
    retired: str
    """When Azure retired it, as a phrase: ``on 2023-09-06``."""
    replacement: str
    """The size to use instead (same or more GPUs)."""


# Azure retirement notices: nc-series-retirement (2023-09-06), ncv2-series-retirement,
# ncv3-nc6s-nc12s-nc24s-retirement (2025-09-30), under learn.microsoft.com/azure/virtual-machines/.
_K80 = "NC-series (Tesla K80)"
_P100 = "NCv2-series (Tesla P100)"
_V100 = "NCv3-series (Tesla V100)"
RETIRED_SIZES: dict[str, Retired] = {
    "Standard_NC6": Retired(_K80, "on 2023-09-06", "Standard_NC4as_T4_v3"),
    "Standard_NC12": Retired(_K80, "on 2023-09-06", "Standard_NC16as_T4_v3"),
    "Standard_NC24": Retired(_K80, "on 2023-09-06", "Standard_NC64as_T4_v3"),
    "Standard_NC24r": Retired(_K80, "on 2023-09-06", "Standard_NC64as_T4_v3"),
    "Standard_NC6s_v2": Retired(_P100, "in 2023", "Standard_NC4as_T4_v3"),
    "Standard_NC12s_v2": Retired(_P100, "in 2023", "Standard_NC16as_T4_v3"),
    "Standard_NC24s_v2": Retired(_P100, "in 2023", "Standard_NC64as_T4_v3"),
    "Standard_NC24rs_v2": Retired(_P100, "in 2023", "Standard_NC64as_T4_v3"),
    "Standard_NC6s_v3": Retired(_V100, "on 2025-09-30", "Standard_NC24ads_A100_v4"),
    "Standard_NC12s_v3": Retired(_V100, "on 2025-09-30", "Standard_NC48ads_A100_v4"),
    "Standard_NC24s_v3": Retired(_V100, "on 2025-09-30", "Standard_NC96ads_A100_v4"),
    "Standard_NC24rs_v3": Retired(_V100, "on 2025-09-30", "Standard_NC96ads_A100_v4"),
}


def lookup_gpu_size(name: str) -> GpuSize:
    """Return the catalogue entry for ``name`` or raise ``ValueError`` saying why it is refused and what to use."""
    if name in GPU_SIZES:
        return GPU_SIZES[name]
    if name in RETIRED_SIZES:
        r = RETIRED_SIZES[name]
        raise ValueError(f"{name} is {r.gpu}, retired by Azure {r.retired}; use {r.replacement}")
    if name in FRACTIONAL_SIZES:
        raise ValueError(
            f"{name} has {FRACTIONAL_SIZES[name]}, not a whole GPU the device plugin can schedule; "
            "use Standard_NV36ads_A10_v5"
        )
    if not re.match(r"Standard_N[A-Z]", name) and not suggest_gpu_sizes(name):
        raise ValueError("not a GPU size: Azure's GPU sizes are the N families (Standard_NC..., ND..., NV...)")
    close = suggest_gpu_sizes(name)
    hint = f"did you mean {' or '.join(close)}? If not: " if close else ""
    raise ValueError(f"not in the GPU catalogue ({CATALOGUE.name}, {catalogue_freshness()}); {hint}refresh it with "
                     "`python -m ops catalogue` where `az login` works, or add the size to it as a "
                     "`source: manual` row")


def catalogue_freshness() -> str:
    """How current the catalogue is, for messages."""
    refreshed = CATALOGUE_HEADER.get("refreshed")
    return f"refreshed {refreshed}" if refreshed else "never refreshed from Azure"


def suggest_gpu_sizes(name: str) -> list[str]:
    """The closest known GPU size names to a misspelt one (case-insensitive), best first."""
    by_lower = {k.lower(): k for k in GPU_SIZES}
    if name.lower() in by_lower:
        return [by_lower[name.lower()]]
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.8)
    return [by_lower[m] for m in matches]


def vcpus_of(vm_size: str) -> int:
    """vCPUs of any Azure VM size, from its name: the number after the family letters (Azure's VM naming
    convention, learn.microsoft.com/azure/virtual-machines/vm-naming-conventions: ``Standard_D4ds_v5`` has 4)."""
    if vm_size in GPU_SIZES:
        return GPU_SIZES[vm_size].vcpus
    match = re.match(r"Standard_[A-Z]+(\d+)", vm_size)
    if match is None:
        raise ValueError(f"{vm_size}: not an Azure VM size name")
    return int(match[1])
