"""Load the GPU for a while and report the matrix throughput (seed 003's gpu_test jobs).

    python gpu_load.py --seconds 60 [--size 4096] [--require-cuda]

``--require-cuda``: fail when CUDA cannot be used instead of loading the CPU (the platform's check that a
non-root client reaches an MPS server).
"""

from __future__ import annotations

import json
import os
import time

import torch

from jobio import ArgumentParser, positive_float, positive_int


def load(seconds: float, size: int, device: torch.device) -> dict:
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    products = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        for _ in range(10):
            a = torch.tanh(a @ b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        products += 10
    elapsed = time.perf_counter() - began
    return {"index": int(os.environ.get("JOB_COMPLETION_INDEX", "0")), "device": device.type,
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None, "seconds": round(elapsed, 2),
            "matmuls": products, "tflops": round(2 * size**3 * products / elapsed / 1e12, 2)}


if __name__ == "__main__":
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=positive_float, default=60)
    parser.add_argument("--size", type=positive_int, default=4096)
    parser.add_argument("--require-cuda", action="store_true", help="fail without a usable GPU")
    args = parser.parse_args()
    if args.require_cuda and not torch.cuda.is_available():
        raise SystemExit(f"no usable CUDA device as UID {os.getuid()} "
                         f"(CUDA_MPS_PIPE_DIRECTORY={os.environ.get('CUDA_MPS_PIPE_DIRECTORY', 'unset')})")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(json.dumps(load(args.seconds, args.size, device)), flush=True)
