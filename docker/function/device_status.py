"""What torch sees of the GPU: the seed's status line and a JSON report.

The CUDA runtime comes from the torch wheels; the driver (libcuda) is mounted
from the node by the GPU operator's container toolkit. So `cuda` here proves
the whole chain: pool -> operator driver -> toolkit -> device plugin -> pod.
"""

from __future__ import annotations

import platform

import torch


def torch_device() -> torch.device:
    """The device the function computes on: the first GPU when torch sees one."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def status_line() -> str:
    """The seed's exact status text, kept so its walkthrough still reads true."""
    return f"Status - Torch device is set to {torch_device()} ."


def status_report() -> dict:
    """GPU name, count and memory, and the versions that decide CUDA compatibility."""
    gpus = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append(
                {
                    "index": index,
                    "name": props.name,
                    "memory_mib": props.total_memory // (1024 * 1024),
                    "compute_capability": f"{props.major}.{props.minor}",
                }
            )
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device": str(torch_device()),
        "cuda_available": torch.cuda.is_available(),
        "gpu_count": len(gpus),
        "gpus": gpus,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": cudnn,
        "python_version": platform.python_version(),
    }
