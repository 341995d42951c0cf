"""Seed 001's claim made measurable: the same batch sent to one inference service alone, then to
every service at once (all sharing one GPU). Prints elapsed times and the speed-up over running
the services one after another.

    python loadtest.py --targets http://infer-1/api/answer,http://infer-2/api/answer [--requests 32]

A service that refuses or fails a request is one line naming it (and why); the report then names the services that
failed instead of timing them, and the script exits 1 (a later retry of the Job may find them up).
"""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from jobio import ArgumentParser, http_url, positive_float, positive_int, shown_url

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


class ServiceFailed(Exception):
    """A request a service refused or failed: one line, naming the service (without its query: a key may be in it)."""


def _why(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return f"{type(error).__name__}: {error}"


def send_batch(url: str, batch: list[bytes], timeout: float) -> float:
    """Send the batch one request after another, as one client would; seconds taken. A failed request stops the
    batch (its timing would mean nothing) with ``ServiceFailed``."""
    began = time.perf_counter()
    for body in batch:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            raise ServiceFailed(f"{shown_url(url)}: {_why(error)}") from None
    return time.perf_counter() - began


def _timed(url: str, batch: list[bytes], timeout: float) -> float | ServiceFailed:
    try:
        return send_batch(url, batch, timeout)
    except ServiceFailed as failed:
        return failed


def _failed(targets: list[str], failures: list[ServiceFailed]) -> dict:
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr, flush=True)
    report = {"services": len(targets), "failed": [str(f) for f in failures]}
    print(json.dumps(report), flush=True)
    return report


def run(targets: list[str], count: int, timeout: float = 30.0) -> dict:
    batch = request_batch(count)
    alone = _timed(targets[0], batch[:2], timeout)  # warm-up: connections, first CUDA kernels
    if not isinstance(alone, ServiceFailed):
        alone = _timed(targets[0], batch, timeout)
    if isinstance(alone, ServiceFailed):
        return _failed(targets, [alone])
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        each = list(pool.map(lambda url: _timed(url, batch, timeout), targets))
    together = time.perf_counter() - began
    if failures := [e for e in each if isinstance(e, ServiceFailed)]:
        return _failed(targets, failures)
    sequential = alone * len(targets)
    report = {"services": len(targets), "requests_per_service": count, "one_alone_s": round(alone, 3),
              "all_at_once_s": round(together, 3), "per_service_s": [round(s, 3) for s in each],
              "sequential_estimate_s": round(sequential, 3), "speedup_vs_sequential": round(sequential / together, 2)}
    print(json.dumps(report), flush=True)
    return report


def url_list(text: str) -> list[str]:
    """Comma-separated http(s) URLs."""
    return [http_url(url) for url in text.split(",")]


if __name__ == "__main__":
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=url_list, required=True, help="comma-separated /api/answer URLs")
    parser.add_argument("--requests", type=positive_int, default=32)
    parser.add_argument("--timeout", type=positive_float, default=30.0)
    args = parser.parse_args()
    raise SystemExit(1 if "failed" in run(args.targets, args.requests, args.timeout) else 0)
