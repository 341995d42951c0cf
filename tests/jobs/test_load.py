"""The GPU load job and the sharing load test, on the CPU against local stand-in services."""

from __future__ import annotations

import json
import threading
import time
from contextlib import ExitStack

import pytest
import torch

from tests.docker_modules import import_from
from tests.local_http import QuietHandler, base_url, serving

gpu_load = import_from("jobs", "gpu_load")
loadtest = import_from("jobs", "loadtest")


def test_gpu_load_reports_its_matrix_throughput():
    report = gpu_load.load(0.2, 64, torch.device("cpu"))
    assert report["matmuls"] >= 10 and report["tflops"] >= 0 and report["device"] == "cpu"


def test_a_required_gpu_that_cannot_be_used_fails_the_check_instead_of_loading_the_cpu():
    """The MPS pool's smoke test: a client that cannot reach the GPU must fail its Job (and `pulumi up`)."""
    import subprocess
    import sys

    from tests.docker_modules import DOCKER_DIR
    result = subprocess.run([sys.executable, "gpu_load.py", "--seconds", "0.1", "--size", "8", "--require-cuda"],
                            capture_output=True, text=True, cwd=DOCKER_DIR / "jobs", env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 1 and "no usable CUDA device as UID" in result.stderr


class SlowAnswer(QuietHandler):
    """Stands in for one inference service: 10 ms per request, one request at a time."""

    lock = None
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            time.sleep(0.01)
        self.seen.append(body)
        self.reply(200, b"{}")


@pytest.fixture
def services():
    with ExitStack() as stack:
        yield [stack.enter_context(serving(type("Handler", (SlowAnswer,), {"lock": threading.Lock(), "seen": []})))
               for _ in range(3)]


def test_load_test_sends_the_same_batch_to_each_service_and_times_both_ways(services):
    urls = [f"{base_url(s)}/api/answer" for s in services]
    report = loadtest.run(urls, count=8)
    assert report["services"] == 3 and report["requests_per_service"] == 8
    # Independent services run side by side: all at once takes about as long as one alone.
    assert report["speedup_vs_sequential"] > 1.5
    assert report["sequential_estimate_s"] == pytest.approx(3 * report["one_alone_s"], rel=0.01)
    counts = [len(s.RequestHandlerClass.seen) for s in services]
    assert counts == [2 + 8 + 8, 8, 8]  # warm-up and the alone run go to the first service
    assert all({"question", "context"} == set(body) for s in services for body in s.RequestHandlerClass.seen)
