"""Seed 001's claim made measurable: the same batch sent to one inference service alone, then to
every service at once (all sharing one GPU). Prints elapsed times and the speed-up over running
the services one after another.

    python loadtest.py --targets http://infer-1/api/answer,http://infer-2/api/answer [--requests 32]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

SAMPLES = [
    ("What installs the NVIDIA driver?", "AKS creates the pool. The GPU operator installs the NVIDIA driver. "
     "The Blob CSI driver mounts storage."),
    ("How can pods share a GPU?", "Spot nodes can be evicted. Time-slicing lets several pods take turns on one GPU. "
     "Checkpoints survive evictions."),
    ("How tall is Mount Everest?", "Paris is the capital of France. Mount Everest rises 8,849 metres. "
     "Rivers flow into the sea."),
    ("When are spot VMs evicted?", "Spot virtual machines are evicted when Azure needs the capacity back. "
     "Regular VMs are not. The autoscaler adds nodes."),
]


def request_batch(count: int) -> list[bytes]:
    return [json.dumps({"question": q, "context": c}).encode() for q, c in (SAMPLES * count)[:count]]


def send_batch(url: str, batch: list[bytes], timeout: float) -> float:
    """Send the batch one request after another, as one client would; seconds taken."""
    began = time.perf_counter()
    for body in batch:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    return time.perf_counter() - began


def run(targets: list[str], count: int, timeout: float = 30.0) -> dict:
    batch = request_batch(count)
    send_batch(targets[0], batch[:2], timeout)  # warm-up: connections, first CUDA kernels
    alone = send_batch(targets[0], batch, timeout)
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        each = list(pool.map(lambda url: send_batch(url, batch, timeout), targets))
    together = time.perf_counter() - began
    sequential = alone * len(targets)
    report = {"services": len(targets), "requests_per_service": count, "one_alone_s": round(alone, 3),
              "all_at_once_s": round(together, 3), "per_service_s": [round(s, 3) for s in each],
              "sequential_estimate_s": round(sequential, 3), "speedup_vs_sequential": round(sequential / together, 2)}
    print(json.dumps(report), flush=True)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", required=True, help="comma-separated /api/answer URLs")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    run(args.targets.split(","), args.requests, args.timeout)
