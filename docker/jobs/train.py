"""Train DigitNet on the GPU (or CPU), checkpointing to a volume and resuming from the newest checkpoint.

    python train.py --checkpoints /mnt/checkpoints --steps 2000 [--data auto|mnist|synthetic]

Killed at any point (spot eviction, node drain, OOM), the next run continues from the last
checkpoint and ends with the same weights an uninterrupted run would have: batches depend only
on (seed, step), and the RNG and optimizer states are part of the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch import nn

from checkpoints import checkpoint_path, load_newest, prune, remove_partials, save_atomic
from digits import batch_for_step, load_dataset
from model import DigitNet


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=Path, required=True, help="folder on the checkpoint volume")
    parser.add_argument("--steps", type=int, default=2000, help="total optimisation steps")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=int, default=200)
    parser.add_argument("--keep", type=int, default=3, help="checkpoints kept")
    parser.add_argument("--data", choices=("auto", "mnist", "synthetic"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cuda or cpu")
    parser.add_argument("--stop-after", type=int, default=None, help="exit after this many steps (tests a kill)")
    return parser.parse_args(argv)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def train(args: argparse.Namespace) -> dict:
    device = pick_device(args.device)
    removed = remove_partials(args.checkpoints)
    if removed:
        print(f"removed partial checkpoint writes: {', '.join(removed)}", flush=True)
    data_name, images, labels = load_dataset(args.data, args.checkpoints / "data", args.seed)
    torch.manual_seed(args.seed)
    model = DigitNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    start = 0
    resumed = load_newest(args.checkpoints)
    if resumed is not None:
        start, state = resumed
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        print(f"resumed from step {start}", flush=True)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    step, loss, timings = start, float("nan"), []
    while step < args.steps:
        if args.stop_after is not None and step - start >= args.stop_after:
            print(f"stopping at step {step} (--stop-after)", flush=True)
            break
        batch, target = batch_for_step(images, labels, args.seed, step, args.batch_size)
        began = time.perf_counter()
        batch, target = batch.to(device, non_blocking=True), target.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        output = loss_fn(model(batch), target)
        output.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        timings.append(time.perf_counter() - began)
        step += 1
        loss = output.item()
        if step % args.checkpoint_every == 0 or step == args.steps:
            save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state(),
                         "step": step, "data": data_name, "loss": loss}, checkpoint_path(args.checkpoints, step))
            prune(args.checkpoints, args.keep)
            print(f"step {step}/{args.steps} loss {loss:.4f} checkpointed", flush=True)
    measured = timings[10:] or timings  # the first steps include CUDA start-up
    summary = {"device": device.type, "data": data_name, "resumed_from": start, "step": step, "loss": loss,
               "step_ms": round(1000 * sum(measured) / len(measured), 3) if measured else None,
               "done": step >= args.steps}
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    train(parse_args())
