"""All-reduce across every process of the run: is the sum right, and is the bus bandwidth what the links allow?

    torchrun --nnodes 2 --nproc-per-node 8 ... allreduce.py --expect-busbw 450 --warn-below 400 --faulty-below 300

The check the distributed-training stack runs before a training run, and the figures the GPU results
pages report. Bus bandwidth is nccl-tests' figure (its PERFORMANCE.md): the algorithm bandwidth
(bytes / time) times 2(n-1)/n, the share of the data each link carries in a ring all-reduce, so it
compares directly with a link's speed whatever the number of processes. The verdict takes the best
bus bandwidth over the message sizes (large messages reach it) against the size's baseline, as Microsoft
publishes them (typical, warn, faulty): ``pass`` at or above the warn figure (exit 0), ``slow`` below it
(exit 1: test again), ``faulty`` below the faulty figure (exit 3: drain the node and report it), and
``wrong-sum`` when a sum is wrong (exit 2).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist

from jobio import ArgumentParser, device_name, non_negative_int, positive_float, positive_int
from process_group import World, join


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=positive_int, default=1 << 20)
    parser.add_argument("--max-bytes", type=positive_int, default=1 << 30)
    parser.add_argument("--iterations", type=positive_int, default=20, help="timed all-reduces per size")
    parser.add_argument("--warmup", type=non_negative_int, default=5)
    parser.add_argument("--expect-busbw", type=positive_float, default=None, help="GB/s a healthy interconnect gives")
    parser.add_argument("--warn-below", type=positive_float, default=None,
                        help="GB/s below which the run is slow (default: the whole --expect-busbw)")
    parser.add_argument("--faulty-below", type=positive_float, default=None, help="GB/s below which a node is faulty")
    parser.add_argument("--device", type=device_name, default="auto", help="auto, cuda or cpu")
    args = parser.parse_args(argv)
    if args.min_bytes > args.max_bytes:
        parser.error(f"--min-bytes {args.min_bytes} is above --max-bytes {args.max_bytes}")
    return args


def sizes(smallest: int, largest: int) -> list[int]:
    """Powers of two from ``smallest`` to ``largest`` bytes, in steps of 4x (nccl-tests' -f 4)."""
    out, size = [], smallest
    while size <= largest:
        out.append(size)
        size *= 4
    return out


def sums_are_right(world: World, elements: int) -> bool:
    """Each rank contributes rank + 1; every element of the result must be 1 + 2 + ... + n."""
    data = torch.full((elements,), world.rank + 1, dtype=torch.float32, device=world.device)
    dist.all_reduce(data)
    expected = world.size * (world.size + 1) / 2
    return bool(torch.all(data == expected).item())


def time_allreduce(world: World, size: int, iterations: int, warmup: int) -> float:
    """Mean seconds of one all-reduce of ``size`` bytes of float32, timed after ``warmup`` untimed ones."""
    data = torch.ones(size // 4, dtype=torch.float32, device=world.device)
    for _ in range(warmup):
        dist.all_reduce(data)
    synchronize(world)
    began = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(data)
    synchronize(world)
    return (time.perf_counter() - began) / iterations


def synchronize(world: World) -> None:
    if world.device.type == "cuda":
        torch.cuda.synchronize(world.device)
    dist.barrier()


def row(size: int, seconds: float, processes: int) -> dict:
    algbw = size / seconds / 1e9
    # Four decimals: a slow link (gloo on a busy CPU) still reads above zero.
    return {"bytes": size, "time_us": round(seconds * 1e6, 1), "algbw_gbps": round(algbw, 4),
            "busbw_gbps": round(algbw * 2 * (processes - 1) / processes, 4)}


def verdict(rows: list[dict], expect: float | None, warn_below: float | None, faulty_below: float | None,
            correct: bool) -> dict:
    best = max(r["busbw_gbps"] for r in rows)
    if not correct:
        return {"verdict": "wrong-sum", "best_busbw_gbps": best}
    warn_below = expect if warn_below is None else warn_below
    if warn_below is None:
        return {"verdict": "measured", "best_busbw_gbps": best}
    found = "pass"
    if best < warn_below:
        found = "faulty" if faulty_below is not None and best < faulty_below else "slow"
    return {"verdict": found, "best_busbw_gbps": best, "expected_busbw_gbps": expect, "warn_below_gbps": warn_below,
            "faulty_below_gbps": faulty_below, "fraction": round(best / expect, 3) if expect else None}


def check(args: argparse.Namespace) -> dict:
    world = join(args.device)
    try:
        if not world.distributed:
            raise SystemExit("an all-reduce needs two or more processes: start this under torchrun")
        correct = sums_are_right(world, 1 << 20)
        rows = [row(size, time_allreduce(world, size, args.iterations, args.warmup), world.size)
                for size in sizes(args.min_bytes, args.max_bytes)]
        report = {"processes": world.size, "backend": dist.get_backend(), "device": world.device.type,
                  "gpu": torch.cuda.get_device_name(world.device) if world.device.type == "cuda" else None,
                  "sizes": rows, **verdict(rows, args.expect_busbw, args.warn_below, args.faulty_below, correct)}
        if world.is_leader:
            for r in rows:
                print(f"{r['bytes']:>12} B  {r['time_us']:>10} us  algbw {r['algbw_gbps']:>8} GB/s  "
                      f"busbw {r['busbw_gbps']:>8} GB/s", flush=True)
            print(json.dumps(report), flush=True)
        return report
    finally:
        world.leave()


EXIT_CODES = {"pass": 0, "measured": 0, "slow": 1, "wrong-sum": 2, "faulty": 3}

if __name__ == "__main__":
    raise SystemExit(EXIT_CODES[check(parse_args())["verdict"]])
