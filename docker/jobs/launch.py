"""Start torchrun only once the script's own checks pass, so that what no restart can mend fails the pod with exit 2.

    python launch.py torchrun --nnodes=2 --nproc-per-node=8 ... train.py --checkpoints /mnt/checkpoints/train ...

torchrun reports a worker that exits 2 (a bad argument, a refused checkpoint) as a ``ChildFailedError`` and exits 1
itself (torch/distributed/run.py: ``main`` under ``@record`` re-raises it), so a Job's pod failure policy never sees
the 2 and JobSet restarts the whole group, each worker refusing again on every node. Here the command is read with
torchrun's own parser; a script listed in ``PREFLIGHTS`` checks its arguments and input in this process (exit 2
from the container itself), and only then does this process become torchrun (``os.execvp``: the same process, so
the kubelet's signals reach torchrun). A script without a preflight starts at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from torch.distributed.run import get_args_parser

import train
from jobio import ArgumentParser, fail

PREFLIGHTS: dict[str, Callable[[list[str], int | None], None]] = {"train.py": train.preflight}
"""Script file name → its check: (its arguments, the run's process count where the command fixes it)."""


def processes(nnodes: str, nproc_per_node: str) -> int | None:
    """The run's process count where the command fixes it (``--nnodes=2 --nproc-per-node=8``: 16); None for an
    elastic range of nodes (``1:4``) or a count torchrun reads from the machine (``gpu``, ``auto``)."""
    low, _, high = nnodes.partition(":")
    if not (low.isdigit() and nproc_per_node.isdigit()) or (high and high != low):
        return None
    return int(low) * int(nproc_per_node)


def main(argv: list[str]) -> NoReturn:
    if not argv or Path(argv[0]).name != "torchrun":
        fail(f"the command must start with torchrun, not {argv[0] if argv else 'nothing'!r} "
             "(launch.py torchrun [torchrun options] SCRIPT.py [script arguments])")
    # torchrun's own options, with this project's one-line errors (argparse copies a parent's actions).
    parser = ArgumentParser(prog="torchrun", parents=[get_args_parser()], add_help=False)
    command = parser.parse_args(argv[1:])
    check = PREFLIGHTS.get(Path(command.training_script).name)
    if check is not None:
        check(command.training_script_args, processes(command.nnodes, command.nproc_per_node))
    sys.stdout.flush()
    os.execvp(argv[0], argv)  # noqa: S606 (the pod spec's own command, as a list: no shell)


if __name__ == "__main__":
    main(sys.argv[1:])
