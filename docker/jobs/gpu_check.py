"""A new GPU node's acceptance check: the GPU node gate runs it on each node before the node takes workloads.

    python gpu_check.py --gpus 8 --min-tflops 346 --dtype bf16 [--ib-ports 8 --ib-rate-gbps 400]

On every GPU it can see: CUDA works, a large matrix multiply reaches ``--min-tflops`` (a GPU well below its
datasheet rate is broken or throttled: a failed clock, a PCIe link trained down, a thermal fault), and nearly all
its memory can be allocated, written and read back. With ``--ib-ports``: that many InfiniBand ports are ACTIVE (at
``--ib-rate-gbps``), read from /sys/class/infiniband as ``ibstat`` reads it. It prints one JSON report and exits 0
when every check passes, 1 when one fails; ``--device cpu`` runs the same code without a GPU (the tests).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import torch

from jobio import ArgumentParser, fraction, non_negative_float, non_negative_int, positive_int

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=positive_int, required=True, help="GPUs the node must show")
    parser.add_argument("--min-tflops", type=non_negative_float, required=True,
                        help="matrix multiply rate each GPU must reach")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--size", type=positive_int, default=8192, help="square matrices of this size")
    parser.add_argument("--iterations", type=positive_int, default=20)
    parser.add_argument("--memory-fraction", type=fraction, default=0.9, help="share of free memory to test")
    parser.add_argument("--ib-ports", type=non_negative_int, default=0,
                        help="ACTIVE InfiniBand ports the node must have")
    parser.add_argument("--ib-rate-gbps", type=non_negative_int, default=0, help="each port's rate; 0: not checked")
    parser.add_argument("--sysfs", type=Path, default=Path("/sys"), help="where sysfs is mounted")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    return parser.parse_args(argv)


def matmul_tflops(device: torch.device, dtype: torch.dtype, size: int, iterations: int) -> float:
    """Dense multiply-add rate of ``iterations`` products of two ``size`` x ``size`` matrices, after a warm-up."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b)
    synchronize(device)
    began = time.perf_counter()
    for _ in range(iterations):
        torch.matmul(a, b)
    synchronize(device)
    return 2 * size**3 * iterations / (time.perf_counter() - began) / 1e12


def memory_ok(device: torch.device, fraction: float) -> tuple[bool, float]:
    """Allocate ``fraction`` of the device's free memory, write a pattern and read it back: (right, GiB tested)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
    else:
        free = 64 << 20  # a token amount: the CPU path tests the code, not the host's memory
    elements = int(free * fraction) // 4
    block = torch.empty(elements, dtype=torch.int32, device=device)
    right = True
    for pattern in (0x55555555, -0x55555556):  # 0101... then 1010...: every bit written both ways
        block.fill_(pattern)
        # Reductions, not a comparison: a boolean copy of the block would need a quarter more memory.
        right = right and int(block.min().item()) == int(block.max().item()) == pattern
    del block
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return right, round(elements * 4 / 2**30, 2)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def infiniband_ports(sysfs: Path) -> list[dict]:
    """Every InfiniBand port the node's devices show: device, port, state and rate in Gb/s."""
    ports = []
    for port in sorted((sysfs / "class" / "infiniband").glob("*/ports/*")):
        state = (port / "state").read_text().strip() if (port / "state").exists() else ""
        rate = (port / "rate").read_text().strip() if (port / "rate").exists() else ""
        gbps = re.match(r"(\d+)", rate)
        ports.append({"device": port.parent.parent.name, "port": port.name, "state": state,
                      "rate_gbps": int(gbps[1]) if gbps else None})
    return ports


def check(args: argparse.Namespace) -> dict:
    failures: list[str] = []
    if args.device == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        devices = [torch.device("cuda", i) for i in range(count)]
    else:
        count, devices = 1, [torch.device("cpu")]
    if count != args.gpus:
        failures.append(f"{count} GPU(s) visible, the node's size has {args.gpus}")
    gpus = []
    for device in devices:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        tflops = round(matmul_tflops(device, DTYPES[args.dtype], args.size, args.iterations), 1)
        right, tested = memory_ok(device, args.memory_fraction)
        gpus.append({"device": str(device), "name": name, "tflops": tflops, "memory_gib_tested": tested,
                     "memory_ok": right})
        if tflops < args.min_tflops:
            failures.append(f"{device} ({name}): {tflops} TFLOPS {args.dtype}, below {args.min_tflops}")
        if not right:
            failures.append(f"{device} ({name}): memory read back wrong")
    report: dict = {"gpus": gpus, "min_tflops": args.min_tflops, "dtype": args.dtype}
    if args.ib_ports:
        ports = infiniband_ports(args.sysfs)
        active = [p for p in ports if p["state"].endswith("ACTIVE")
                  and (not args.ib_rate_gbps or p["rate_gbps"] == args.ib_rate_gbps)]
        report["infiniband"] = {"ports": ports, "active": len(active), "expected": args.ib_ports}
        if len(active) < args.ib_ports:
            failures.append(f"{len(active)} of {args.ib_ports} InfiniBand ports ACTIVE"
                            + (f" at {args.ib_rate_gbps} Gb/s" if args.ib_rate_gbps else ""))
    return {"verdict": "fail" if failures else "pass", "failures": failures, **report}


if __name__ == "__main__":
    found = check(parse_args())
    print(json.dumps(found), flush=True)
    raise SystemExit(0 if found["verdict"] == "pass" else 1)
