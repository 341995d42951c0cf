"""What the spot drill (ops/e2e/drill.py) relies on, measured on a GPU: a training run killed mid-run, as a spot
eviction kills its pod, resumes from its newest checkpoint and ends with the weights an uninterrupted run ends with.

    python scripts/check_resume_on_gpu.py --out DIR [--steps 1200] [--checkpoint-every 200] [--kill-after 600]

Runs docker/jobs/train.py three times on the GPU, as the training Job does: uninterrupted; killed with SIGKILL once
its checkpoint at ``--kill-after`` is written (no clean shutdown, as after the node's 30 s notice); then again on
the same checkpoint folder, which resumes. Compares the two runs' ``weights_sha256`` and writes
DIR/train-resume-<gpu>.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = Path(__file__).resolve().parents[1] / "docker" / "jobs"
sys.path.insert(0, str(JOBS))
import checkpoints  # noqa: E402  (the image's own module, from its folder)


def train(folder: Path, args: argparse.Namespace) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "train.py", "--checkpoints", str(folder), "--steps", str(args.steps), "--checkpoint-every",
         str(args.checkpoint_every), "--keep", "100", "--data", "synthetic", "--device", "cuda"],
        cwd=JOBS, stdout=subprocess.PIPE, text=True)


def summary(process: subprocess.Popen) -> dict:
    out, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"train.py exited {process.returncode}:\n{out[-2000:]}")
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--checkpoint-every", type=int, default=200)
    parser.add_argument("--kill-after", type=int, default=600)
    args = parser.parse_args()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    with tempfile.TemporaryDirectory() as root:
        whole, evicted = Path(root) / "whole", Path(root) / "evicted"
        began = time.perf_counter()
        uninterrupted = summary(train(whole, args))
        whole_seconds = time.perf_counter() - began
        victim = train(evicted, args)
        while not any(step >= args.kill_after for step, _ in checkpoints.list_checkpoints(evicted)):
            if victim.poll() is not None:
                raise SystemExit("the run ended before its checkpoint at --kill-after")
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.communicate()
        left = [step for step, _ in checkpoints.list_checkpoints(evicted)]
        resumed = summary(train(evicted, args))
    import torch
    report = {
        "what": "train.py killed with SIGKILL after a checkpoint, then resumed on the same folder, against an "
                "uninterrupted run (scripts/check_resume_on_gpu.py)",
        "gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
        "steps": args.steps, "checkpoint_every": args.checkpoint_every, "killed_after_checkpoint": args.kill_after,
        "checkpoints_left_by_the_kill": left, "resumed_from": resumed["resumed_from"],
        "uninterrupted_weights_sha256": uninterrupted["weights_sha256"],
        "resumed_weights_sha256": resumed["weights_sha256"],
        "weights_match": uninterrupted["weights_sha256"] == resumed["weights_sha256"],
        "uninterrupted_seconds": round(whole_seconds, 1), "step_ms": uninterrupted.get("step_ms"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = gpu.split(",")[0].removeprefix("NVIDIA ").split()[0].lower()
    (args.out / f"train-resume-{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    raise SystemExit(0 if report["weights_match"] else 1)


if __name__ == "__main__":
    main()
