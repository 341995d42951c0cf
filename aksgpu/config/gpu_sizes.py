"""Azure GPU VM sizes that AKS GPU pools may use, and the retired ones users still paste from old guides.

Each family's source sits beside its row; the retirement notices beside ``RETIRED_SIZES``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSize:
    """One Azure VM size with NVIDIA GPUs."""

    name: str
    """Azure VM size name, e.g. ``Standard_NC4as_T4_v3``."""
    series: str
    """Azure series name as the docs spell it."""
    gpu_model: str
    """GPU model, e.g. ``T4``."""
    gpus: int
    """Whole GPUs per VM (what ``nvidia.com/gpu`` advertises without sharing)."""
    gpu_memory_gib: int
    """Memory of one GPU."""
    vcpus: int
    """vCPUs per VM."""
    memory_gib: int
    """VM memory."""
    compute_capability: float = 0.0
    """CUDA compute capability of the GPU (https://developer.nvidia.com/cuda-gpus): bfloat16 needs 8.0 or more."""
    mig: bool = False
    """The GPU supports Multi-Instance GPU partitioning (A100, H100)."""
    grid: bool = False
    """The GPU needs NVIDIA's GRID (vGPU) driver, which only AKS installs: the GPU operator cannot own it."""


# https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ncast4v3-series
_T4 = dict(series="NCasT4_v3", gpu_model="T4", gpu_memory_gib=16, compute_capability=7.5)
# https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nca100v4-series
_A100 = dict(series="NC A100 v4", gpu_model="A100", gpu_memory_gib=80, compute_capability=8.0, mig=True)
# https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ncadsh100v5-series
_H100 = dict(series="NCads H100 v5", gpu_model="H100 NVL", gpu_memory_gib=94, compute_capability=9.0, mig=True)
# https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nvadsa10v5-series (GRID licensed)
_A10 = dict(series="NVadsA10 v5", gpu_model="A10", gpu_memory_gib=24, compute_capability=8.6, grid=True)

GPU_SIZES: dict[str, GpuSize] = {
    s.name: s
    for s in (
        GpuSize("Standard_NC4as_T4_v3", gpus=1, vcpus=4, memory_gib=28, **_T4),
        GpuSize("Standard_NC8as_T4_v3", gpus=1, vcpus=8, memory_gib=56, **_T4),
        GpuSize("Standard_NC16as_T4_v3", gpus=1, vcpus=16, memory_gib=110, **_T4),
        GpuSize("Standard_NC64as_T4_v3", gpus=4, vcpus=64, memory_gib=440, **_T4),
        GpuSize("Standard_NC24ads_A100_v4", gpus=1, vcpus=24, memory_gib=220, **_A100),
        GpuSize("Standard_NC48ads_A100_v4", gpus=2, vcpus=48, memory_gib=440, **_A100),
        GpuSize("Standard_NC96ads_A100_v4", gpus=4, vcpus=96, memory_gib=880, **_A100),
        GpuSize("Standard_NC40ads_H100_v5", gpus=1, vcpus=40, memory_gib=320, **_H100),
        GpuSize("Standard_NC80adis_H100_v5", gpus=2, vcpus=80, memory_gib=640, **_H100),
        GpuSize("Standard_NV36ads_A10_v5", gpus=1, vcpus=36, memory_gib=440, **_A10),
        GpuSize("Standard_NV72ads_A10_v5", gpus=2, vcpus=72, memory_gib=880, **_A10),
        # https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nda100v4-series
        GpuSize("Standard_ND96asr_v4", series="ND A100 v4", gpu_model="A100", gpus=8, gpu_memory_gib=40,
                vcpus=96, memory_gib=900, compute_capability=8.0, mig=True),
        # https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh100v5-series
        GpuSize("Standard_ND96isr_H100_v5", series="ND H100 v5", gpu_model="H100", gpus=8, gpu_memory_gib=80,
                vcpus=96, memory_gib=1900, compute_capability=9.0, mig=True),
    )
}

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
    close = suggest_gpu_sizes(name)
    hint = f"did you mean {' or '.join(close)}?" if close else f"allowed: {', '.join(GPU_SIZES)}"
    raise ValueError(f"not a known Azure GPU size; {hint}")


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
