"""Checkpoints on a shared volume: written atomically, read newest-first, old ones pruned.

A checkpoint is `ckpt-<step>.pt`. It is written to a temporary name in the same folder and renamed,
so a reader (the prediction service) or a resumed run never sees half a file, even when the
writer is killed mid-write (spot eviction).
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

T = TypeVar("T")

_NAME = re.compile(r"^ckpt-(\d{8})\.pt$")


def checkpoint_path(folder: Path, step: int) -> Path:
    return folder / f"ckpt-{step:08d}.pt"


def save_atomic(obj: object, path: Path) -> Path:
    """torch.save to a temporary file beside ``path``, fsync, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint, newest first."""
    if not folder.is_dir():
        return []
    found = [(int(m[1]), folder / name) for name in os.listdir(folder) if (m := _NAME.match(name))]
    return sorted(found, reverse=True)


def load(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """One checkpoint, unpickled by torch's restricted loader: tensors, containers and plain values only. Anyone who
    can write the checkpoint volume could otherwise run code in every pod that reads it (the prediction service,
    the batch job); torch refuses any other object with an UnpicklingError (torch.load, weights_only)."""
    return torch.load(path, map_location=map_location, weights_only=True)


class RefusedCheckpoint(ValueError):
    """A checkpoint that torch's restricted loader refuses: it holds an object that is not a tensor, container or
    plain value (someone else's writer, or a planted payload)."""


def why_refused(error: BaseException) -> str:
    """torch's many-line UnpicklingError as the one line that says what was refused."""
    text = str(error)
    found = re.search(r"WeightsUnpickler error: (.*?)(?: was not an allowed global|\.\s|$)", text, re.MULTILINE)
    return found[1] if found else (text.strip().splitlines() or [type(error).__name__])[0]


def load_newest(folder: Path, map_location: str | torch.device = "cpu",
                use: Callable[[dict], T] | None = None,
                stop_at_refused: bool = False) -> tuple[int, dict] | tuple[int, T] | None:
    """The newest checkpoint that loads (and that ``use`` accepts: what it returns instead of the checkpoint); a
    damaged or refused one, or one ``use`` refuses with ``ValueError`` (another layout), is skipped for the next
    older, one line each. With ``stop_at_refused`` (a trainer, which writes and prunes the folder) a refused one
    raises ``RefusedCheckpoint`` instead: see train.py's ``_resume_point``."""
    for step, path in list_checkpoints(folder):
        try:
            state = load(path, map_location)
        except pickle.UnpicklingError as error:
            if stop_at_refused:
                raise RefusedCheckpoint(f"checkpoint {path.name} is refused by torch's safe loader "
                                        f"({why_refused(error)})") from None
            print(f"skipping refused checkpoint {path.name}: {why_refused(error)}", flush=True)
            continue
        except Exception as error:  # noqa: BLE001 - any unreadable file means "try the older one"
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            print(f"skipping unreadable checkpoint {path.name}: {first}", flush=True)
            continue
        if use is None:
            return step, state
        try:
            return step, use(state)
        except ValueError as error:
            print(f"skipping checkpoint {path.name}: {error}", flush=True)
    return None


def prune(folder: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints."""
    for _, path in list_checkpoints(folder)[keep:]:
        path.unlink(missing_ok=True)


def remove_partials(folder: Path) -> list[str]:
    """Delete temporary files a killed writer left (one trainer per folder, so none is in progress)."""
    removed = []
    for leftover in sorted(folder.glob(".ckpt-*.tmp-*")) if folder.is_dir() else []:
        leftover.unlink(missing_ok=True)
        removed.append(leftover.name)
    return removed
