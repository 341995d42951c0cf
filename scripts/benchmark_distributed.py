"""Run the distributed-training stack's code on every GPU of one machine: all-reduce, scaling, a lost process.

    python3 scripts/benchmark_distributed.py --out DIR [--gpus N] [--steps 600] [--per-gpu-batch 512]

With N >= 2 GPUs, in one go:
  - the all-reduce check the stack runs (docker/jobs/allreduce.py under torchrun, one process per GPU),
    judged against the bus bandwidth the GPUs' link allows, read from `nvidia-smi topo -m`;
  - training throughput (docker/jobs/train.py, DigitNet, synthetic digits) on 1 GPU and on N GPUs with the
    same batch per GPU (weak scaling) and with the same global batch (strong scaling), at each per-GPU batch
    (a small one where launches and copies dominate, a large one where the arithmetic does);
  - a run whose last process dies halfway (--fail-at-step) under torchrun --max-restarts 1, resumed from its
    checkpoint, against an uninterrupted run: the final weights and optimizer state must be equal.
With one GPU only the 1-GPU training and the resume (one process) run. Every torchrun gets the training pods'
environment (train.TORCH_RESTART_ENV). Writes DIR/distributed-benchmark.json and the all-reduce's NCCL log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

JOBS = Path(__file__).resolve().parents[1] / "docker" / "jobs"
sys.path.insert(0, str(JOBS))
import checkpoints  # noqa: E402
import train  # noqa: E402

# What one GPU's links carry in each direction, in GB/s, with the source of the figure.
NVLINK4_PER_LINK = 25.0
"""NVLink 4 (H100, H200 SXM): 18 links give 900 GB/s both directions together (NVIDIA H200 datasheet,
nvidia.com/en-us/data-center/h200), so 25 GB/s per link and direction."""
PCIE5_X16 = 64.0
"""PCIe Gen5 x16: 128 GB/s both directions together (the same datasheet's PCIe figure)."""


def link_between_first_two(topology: str) -> str:
    """The GPU0-GPU1 cell of `nvidia-smi topo -m` (NV18, PIX, SYS...)."""
    for line in topology.splitlines():
        cells = line.split()
        if line.startswith("GPU0") and len(cells) > 2:  # the header row starts with blanks
            return cells[2]
    raise ValueError("no GPU0 row in the topology matrix")


def link_allows(link: str) -> tuple[float, str]:
    """(GB/s per direction, why): the ceiling of a ring all-reduce's bus bandwidth over this link."""
    if match := re.fullmatch(r"NV(\d+)", link):
        links = int(match[1])
        why = f"{link}: {links} NVLink 4 links x 25 GB/s per direction (NVIDIA H200 datasheet)"
        return links * NVLINK4_PER_LINK, why
    return PCIE5_X16, f"{link}: PCIe Gen5 x16, 64 GB/s per direction (NVIDIA H200 datasheet)"


def torchrun(script: str, args: list[str], processes: int, restarts: int = 0, env: dict | None = None,
             log: Path | None = None, results: tuple[int, ...] = (0,)) -> dict:
    """Run a docker/jobs script under torchrun on this machine; its last JSON line. ``results``: the exit
    codes that still carry a report (allreduce.py exits 1 on a slow verdict)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
               f"--max-restarts={restarts}", str(JOBS / script), *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False,
                            env={**os.environ, **train.TORCH_RESTART_ENV, **(env or {})})
    if log:
        log.write_text(result.stdout + result.stderr)
    if result.returncode not in results:
        raise RuntimeError(f"{script} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return {**json.loads(lines[-1]), "stdout": result.stdout} if lines else {"stdout": result.stdout}


def training(device: str, processes: int, global_batch: int, steps: int, folder: Path, *extra: str,
             restarts: int = 0) -> dict:
    report = torchrun("train.py", ["--checkpoints", str(folder), "--steps", str(steps), "--batch-size",
                                   str(global_batch), "--checkpoint-every", str(max(steps // 6, 1)),
                                   "--data", "synthetic", "--device", device, *extra], processes, restarts)
    report.pop("stdout")
    return report


def same_state(a: Path, b: Path) -> dict:
    (step_a, sa), (step_b, sb) = checkpoints.load_newest(a), checkpoints.load_newest(b)
    weights = all(torch.equal(sa["model"][k], sb["model"][k]) for k in sa["model"])
    moments = all(torch.equal(x, y) for i in sa["optimizer"]["state"]
                  for x, y in zip(sa["optimizer"]["state"][i].values(), sb["optimizer"]["state"][i].values(),
                                  strict=True))
    largest = max((sa["model"][k] - sb["model"][k]).abs().max().item() for k in sa["model"])
    return {"steps": [step_a, step_b], "weights_equal": weights, "optimizer_equal": moments,
            "largest_weight_difference": largest}


def scaling(device: str, n: int, per_gpu: int, steps: int, runs: Path) -> dict:
    """1 GPU and N GPUs at ``per_gpu`` images per GPU (weak), and 1 GPU at the N GPUs' global batch (strong)."""
    one = training(device, 1, per_gpu, steps, runs / f"one-{per_gpu}")
    result = {"steps": steps, "per_gpu_batch": per_gpu, "one_gpu": one}
    if n < 2:
        return result
    weak = training(device, n, per_gpu * n, steps, runs / f"n-{per_gpu}")
    strong_one = training(device, 1, per_gpu * n, steps, runs / f"strong-one-{per_gpu}")
    # The powers of two between: where the efficiency goes as ranks are added.
    between = {k: training(device, k, per_gpu * k, steps, runs / f"k{k}-{per_gpu}")
               for k in (2, 4, 8, 16) if k < n}
    result["weak_scaling_by_gpus"] = {
        str(k): {"images_per_s": r["images_per_s"], "step_ms": r["step_ms"],
                 "efficiency": round(r["images_per_s"] / (k * one["images_per_s"]), 3)}
        for k, r in {**between, n: weak}.items()}
    return {**result, "n_gpus": weak, "one_gpu_at_global_batch": strong_one,
            "weak_scaling_efficiency": round(weak["images_per_s"] / (n * one["images_per_s"]), 3),
            "strong_scaling_speedup": round(strong_one["step_ms"] / weak["step_ms"], 3),
            "one_vs_n_gpus": same_state(runs / f"strong-one-{per_gpu}", runs / f"n-{per_gpu}")}


def nccl_paths(log: str) -> list[str]:
    """NCCL's own words for how the ranks are connected (e.g. 'via P2P/CUMEM', 'via NET/IB')."""
    return sorted({m[1] for m in re.finditer(r"Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\] (via \S+)", log)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--per-gpu-batch", default="512,8192", help="comma-separated images per GPU per step")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: N gloo processes stand in for the GPUs (tries the script without one)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n, steps, device = args.gpus, args.steps, args.device
    per_gpu = [int(b) for b in args.per_gpu_batch.split(",")]
    report: dict = {"torch": torch.__version__, "device": device,
                    "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    if device == "cuda":
        smi = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        report.update({
            "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpus": subprocess.run(smi, capture_output=True, text=True, check=True).stdout.strip().splitlines(),
            "topology": subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                                       check=True).stdout})
    with tempfile.TemporaryDirectory() as root:
        runs = Path(root)
        if n >= 2:
            link = link_between_first_two(report["topology"]) if device == "cuda" else "loopback"
            allows, why = link_allows(link) if device == "cuda" else (None, "no GPU link")
            log = args.out / "allreduce-nccl.log"
            expect = ["--expect-busbw", str(allows)] if allows else []
            result = torchrun("allreduce.py", [*expect, "--device", device, "--max-bytes",
                                               str(1 << 33 if device == "cuda" else 1 << 24)], n,
                              env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH"}, log=log, results=(0, 1))
            result.pop("stdout")
            report["allreduce"] = {**result, "link": link, "link_allows_gbps": allows, "source": why,
                                   "nccl_paths": nccl_paths(log.read_text())}
        report["training"] = [scaling(device, n, batch, steps, runs) for batch in per_gpu]
        # The uninterrupted reference is the first scaling run of the same processes, batch and steps.
        processes, batch = (n, per_gpu[0]) if n >= 2 else (1, per_gpu[0])
        fail_at = steps // 2 + 7
        cut = training(device, processes, batch * processes, steps, runs / "cut", "--fail-at-step", str(fail_at),
                       restarts=1)
        reference = runs / (f"n-{batch}" if n >= 2 else f"one-{batch}")
        report["resume"] = {"processes": processes, "per_gpu_batch": batch, "failed_at_step": fail_at,
                            "resumed": cut, **same_state(reference, runs / "cut")}
    (args.out / "distributed-benchmark.json").write_text(json.dumps(report, indent=2) + "\n")
    summary = {k: report.get(k) for k in ("gpus", "torch", "nccl")}
    if "allreduce" in report:
        summary["allreduce"] = {k: report["allreduce"].get(k) for k in
                                ("link", "link_allows_gbps", "best_busbw_gbps", "fraction", "verdict", "nccl_paths")}
    summary["training"] = [{k: v for k, v in t.items() if "scaling" in k or k == "per_gpu_batch"}
                           for t in report["training"]]
    summary["resume"] = {k: report["resume"][k] for k in ("weights_equal", "optimizer_equal", "steps")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
