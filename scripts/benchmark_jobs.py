"""Time the jobs image's code on the GPU and on the CPU: training step time and re-simulation throughput.

    python scripts/benchmark_jobs.py --out DIR [--devices cuda,cpu] [--steps 300] [--cpu-threads 4]

Training: DigitNet on synthetic digits, batch 256, a fresh checkpoint folder per device; the
step time excludes the first 10 steps (CUDA start-up). Re-simulation: 32 synthetic recordings
of 1 MiB through resim.py's shard loop, one shard.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docker" / "jobs"))
import resim
import train


def bench_training(device: str, steps: int, batch: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        summary = train.train(train.parse_args([
            "--checkpoints", folder, "--steps", str(steps), "--batch-size", str(batch),
            "--checkpoint-every", str(steps), "--data", "synthetic", "--device", device]))
    return {"device": device, "steps": steps, "batch_size": batch, "step_ms": summary["step_ms"],
            "images_per_s": round(batch * 1000 / summary["step_ms"], 1), "final_loss": round(summary["loss"], 4)}


def bench_resim(device: str, files: int, size: int) -> dict:
    with tempfile.TemporaryDirectory() as root:
        source, output = Path(root) / "input", Path(root) / "output"
        source.mkdir()
        generator = torch.Generator().manual_seed(3)
        for i in range(files):
            data = torch.randint(0, 256, (size,), generator=generator, dtype=torch.uint8).numpy().tobytes()
            (source / f"recording-{i:03d}.bin").write_bytes(data)
        resim.run(source, output, 0, 1, torch.device(device))  # warm-up pass writes every result...
        for result in output.glob("*.json"):
            result.unlink()  # ...which are removed so the timed pass does the work again
        began = time.perf_counter()
        summary = resim.run(source, output, 0, 1, torch.device(device))
        elapsed = time.perf_counter() - began
    return {"device": device, "files": summary["processed"], "file_mib": size / 2**20,
            "seconds": round(elapsed, 3), "files_per_s": round(files / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--devices", default="cuda,cpu")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--files", type=int, default=32)
    parser.add_argument("--file-bytes", type=int, default=2**20)
    parser.add_argument("--cpu-threads", type=int, default=4, help="4 = the vCPUs of Standard_NC4as_T4_v3")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    devices = args.devices.split(",")
    report = {
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "cpu_threads": args.cpu_threads,
        "training": [bench_training(d, args.steps, args.batch) for d in devices],
        "resim": [bench_resim(d, args.files, args.file_bytes) for d in devices],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "jobs-benchmark.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
