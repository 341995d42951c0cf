"""Train DigitNet on GPUs (or the CPU), checkpointing to a volume and resuming from the newest checkpoint.

    python train.py --checkpoints /mnt/checkpoints --steps 2000 [--data auto|mnist|synthetic]
    python launch.py torchrun --nnodes 2 --nproc-per-node 8 ... train.py --checkpoints /mnt/checkpoints --steps 2000

One process, N GPUs of a node and N nodes run the same code: under torchrun each process takes an
equal slice of the same global batch and DistributedDataParallel averages the gradients, so N
processes take the steps one process would (up to the order of floating-point sums).

Killed at any point (spot eviction, node drain, OOM, a lost node), the next run continues from the
last checkpoint and ends with the same weights an uninterrupted run would have: batches depend only
on (seed, step), and the optimizer and RNG states are part of the checkpoint. The JSON summary it ends with
carries a digest of the final weights (``weights_sha256``), so two runs compare by their logs alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from checkpoints import (
    RefusedCheckpoint,
    checkpoint_path,
    load,
    load_newest,
    prune,
    remove_partials,
    save_atomic,
)
from digits import batch_for_step, load_dataset
from jobio import ArgumentParser, device_name, fail, non_negative_float, non_negative_int, positive_float, positive_int
from model import DigitNet
from process_group import World, join

# torchrun's restarted workers must not share the first attempt's rendezvous store: they read its
# stale addresses and fail to connect (gloo) or take the old NCCL id (pytorch/pytorch#135712, seen
# with torch 2.13). The training pods set this too (scenarios/distributed_training).
TORCH_RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

FIRST_STEP = "step {step}/{steps} first of this process, from step {start}"
"""The leader's line after the first step each process takes (the start, or a resume after a lost node): the spot
drill times the resume by it (ops/e2e/drill.py)."""


def weights_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over each tensor's name, dtype, shape and bytes in name order: runs that end with bit-equal weights
    print the same digest, so a resumed run is compared with an uninterrupted one from their summaries alone."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(bytes(tensor.flatten().view(torch.uint8).tolist()))  # the raw bytes, without numpy
    return digest.hexdigest()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="train.py", description=__doc__.splitlines()[0])  # launch.py reads them too
    parser.add_argument("--checkpoints", type=Path, required=True, help="folder on the checkpoint volume")
    parser.add_argument("--steps", type=positive_int, default=2000, help="total optimisation steps")
    parser.add_argument("--batch-size", type=positive_int, default=256,
                        help="global batch, split evenly over the processes")
    parser.add_argument("--lr", type=positive_float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=positive_int, default=200)
    parser.add_argument("--keep", type=positive_int, default=3, help="checkpoints kept")
    parser.add_argument("--data", choices=("auto", "mnist", "synthetic"), default="auto")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", type=device_name, default="auto", help="auto, cuda or cpu")
    parser.add_argument("--stop-after", type=non_negative_int, default=None,
                        help="exit after this many steps (tests a kill)")
    parser.add_argument("--fail-at-step", type=non_negative_int, default=None,
                        help="the last rank dies at this step on torchrun's first attempt (tests losing a node)")
    parser.add_argument("--pace-seconds", type=non_negative_float, default=0.0,
                        help="a run from step 0 spreads its steps over at least this many seconds, sleeping between "
                             "them (a resumed one runs at full speed); what it computes is unchanged (the spot "
                             "drill's run must outlast Azure's eviction: ops/e2e/drill.py)")
    return parser.parse_args(argv)


def _dataset(args: argparse.Namespace, world: World) -> tuple[str, torch.Tensor, torch.Tensor]:
    """The leader decides (and downloads, once, to the shared volume); the others load what it chose."""
    chosen = load_dataset(args.data, args.checkpoints / "data", args.seed) if world.is_leader else None
    name = world.broadcast(chosen[0] if chosen else None)
    return chosen or load_dataset(name, args.checkpoints / "data", args.seed)


def newest_checkpoint(folder: Path) -> tuple[int, dict] | None:
    """The newest readable checkpoint in ``folder``, or None.

    A damaged checkpoint (truncated) is skipped for the one before: the run redoes those steps and overwrites it. A
    checkpoint torch's safe loader refuses stops the run with one line and exit status 2 instead. Skipping it would
    silently train from an older step (from 0 where it is the only one), and ``prune`` keeps the highest steps, so
    with ``--keep`` at or below the number of refused checkpoints above the resumed step every new checkpoint was
    deleted straight after it was written while the refused one stayed. A refused file is also either someone
    else's writer or a planted payload: a person must look, then move it aside to resume from the one before.
    Under torchrun this check runs twice: in launch.py before any worker starts (torchrun would report a worker's
    exit 2 as its own exit 1, which the Jobs retry), and in the leader, which resumes from what it returns."""
    try:
        return load_newest(folder, stop_at_refused=True)
    except RefusedCheckpoint as error:
        fail(f"{error}: it holds objects train.py never writes; move it out of {folder} to resume from the one "
             "before")


def check_batch_split(batch_size: int, processes: int) -> None:
    """Every process takes an equal slice of the global batch."""
    if batch_size % processes:
        fail(f"argument --batch-size: {batch_size} does not split over {processes} processes: use a multiple of "
             f"{processes}")


def preflight(argv: list[str], processes: int | None) -> None:
    """What launch.py checks before torchrun starts ``processes`` workers (None: a count torchrun decides): the
    arguments, the batch split and the checkpoint folder, each refusal one line and exit status 2. It only reads:
    every node's pod runs it, and partial writes are the leader's to remove."""
    args = parse_args(argv)
    if processes is not None:
        check_batch_split(args.batch_size, processes)
    newest_checkpoint(args.checkpoints)


def _resume_point(args: argparse.Namespace, world: World) -> tuple[int, dict] | None:
    """The newest readable checkpoint, as the leader sees it (``newest_checkpoint``); every rank loads that same
    one."""
    newest = None
    if world.is_leader:
        removed = remove_partials(args.checkpoints)
        if removed:
            print(f"removed partial checkpoint writes: {', '.join(removed)}", flush=True)
        newest = newest_checkpoint(args.checkpoints)
    step = world.broadcast(newest[0] if newest else None)
    if step is None or newest is not None:
        return newest
    return step, load(checkpoint_path(args.checkpoints, step))


def first_attempt() -> bool:
    """torchrun counts its restarts of the workers; outside torchrun every run is a first attempt."""
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"


def deterministic() -> None:
    """Pick only deterministic kernels (cuDNN, cuBLAS), so a resumed run on a GPU ends where an uninterrupted one
    does; an operation without one warns instead of failing the run. cuBLAS reads its setting at its first call."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


def train(args: argparse.Namespace) -> dict:
    deterministic()
    world = join(args.device)
    try:
        return _train(args, world)
    finally:
        world.leave()


def _train(args: argparse.Namespace, world: World) -> dict:
    device = world.device
    check_batch_split(args.batch_size, world.size)
    data_name, images, labels = _dataset(args, world)
    torch.manual_seed(args.seed)
    net = DigitNet().to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
    start = 0
    resumed = _resume_point(args, world)
    if resumed is not None:
        start, state = resumed
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        if world.is_leader:
            print(f"resumed from step {start}", flush=True)
    # DDP wraps only where there is someone to average with; the checkpoint always holds `net`'s keys.
    model = DistributedDataParallel(net, device_ids=[device] if device.type == "cuda" else None) \
        if world.distributed else net
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    step, timings = start, []
    loss: float | None = None  # until a checkpoint step measures it (a rerun of a finished training measures none)
    paced_from = time.monotonic() if args.pace_seconds and start == 0 else None
    while step < args.steps:
        if paced_from is not None:  # sleeping only: batches, RNG and weights are those of an unpaced run
            time.sleep(max(0.0, paced_from + args.pace_seconds * step / args.steps - time.monotonic()))
        if args.stop_after is not None and step - start >= args.stop_after:
            if world.is_leader:
                print(f"stopping at step {step} (--stop-after)", flush=True)
            break
        if step == args.fail_at_step and world.rank == world.size - 1 and first_attempt():
            print(f"rank {world.rank} failing at step {step} (--fail-at-step)", flush=True)
            os._exit(1)  # no cleanup, no goodbye to the others: what a lost node looks like to them
        batch, target = batch_for_step(images, labels, args.seed, step, args.batch_size)
        batch, target = world.shard(batch), world.shard(target)
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
        if step == start + 1 and world.is_leader:
            print(FIRST_STEP.format(step=step, steps=args.steps, start=start), flush=True)
        if step % args.checkpoint_every == 0 or step == args.steps:
            loss = world.mean(output.item())
            if world.is_leader:
                save_atomic({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                             "rng": torch.get_rng_state(), "step": step, "data": data_name, "loss": loss,
                             "processes": world.size}, checkpoint_path(args.checkpoints, step))
                prune(args.checkpoints, args.keep)
                print(f"step {step}/{args.steps} loss {loss:.4f} checkpointed", flush=True)
    world.barrier()  # the leader's last checkpoint is on the volume before any process reports done
    measured = timings[10:] or timings  # the first steps include CUDA start-up
    step_ms = round(1000 * sum(measured) / len(measured), 3) if measured else None
    summary = {"device": device.type, "processes": world.size, "data": data_name, "resumed_from": start,
               "step": step, "loss": loss if loss is not None and math.isfinite(loss) else None, "step_ms": step_ms,
               "images_per_s": round(args.batch_size * 1000 / step_ms, 1) if step_ms else None,
               "done": step >= args.steps, "weights_sha256": weights_sha256(net.state_dict())}
    if world.is_leader:
        print(json.dumps(summary, allow_nan=False), flush=True)  # strict JSON (RFC 8259): null, never NaN
    return summary


if __name__ == "__main__":
    train(parse_args())
