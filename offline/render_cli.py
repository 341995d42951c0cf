"""``python -m offline render``: check every requested stack's config, alone and beside the other stack files, then
render each into OUT/<stack>/."""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

from offline.cli import error, unknown_stack
from offline.stack_files import stack_files
from program.config.errors import ConfigError


def render(stack: str | None, config: Path | None, out: Path, between: Callable[[], None] = lambda: None) -> int:
    """Render ``stack`` (with ``config`` instead of its stack file), or every stack when ``stack`` is None; ``between``
    runs once the configs are checked and after each stack."""
    from offline.render import check_stack
    from program.config.rules import between_stacks

    files = stack_files()
    if stack is None:
        targets = dict(files)
    else:
        if config is None and (problem := unknown_stack(stack)):
            return error(problem)
        targets = {stack: config or files[stack]}
    bad = set()
    checked = {}
    for name, path in {**files, **targets}.items():  # every config is checked before anything is written
        try:
            checked[name] = check_stack(name, path)
        except ConfigError as e:
            if name in targets:
                bad.add(name)
                for found in e.problems:
                    print(f"error: stack {name}: {found}", file=sys.stderr)
    # Stack files are deployed side by side: what two of them would make Azure refuse together, put on the stack
    # whose config is new (--config), else on both, as which one is deployed cannot be told here.
    new = {stack} if stack is not None and config is not None else set()
    for clash in between_stacks(dict(sorted(checked.items())), new):
        if mine := [s for s in clash.stacks if s in targets]:
            bad.update(mine)
            which = f"stack {clash.stacks[0]}" if len(clash.stacks) == 1 else f"stacks {' and '.join(clash.stacks)}"
            print(f"error: {which}: {clash.error}", file=sys.stderr)
    if bad:
        return 2
    between()
    for name, path in targets.items():
        _render_into(name, path, out)
        between()
    return 0


def _render_into(name: str, path: Path, out: Path) -> None:
    from offline.render import render_stack
    from offline.report import warnings, write_render

    start = time.perf_counter()
    rendered = render_stack(name, path)
    target = write_render(rendered, out)
    print(f"{name}: {len(rendered.resources)} resources -> {target} ({time.perf_counter() - start:.1f}s)")
    for warning in warnings(rendered):
        print(f"warning: stack {name}: {warning}", file=sys.stderr)


def settle() -> None:
    """Collect what the last stack left, then put what survives out of the collector's reach (``gc.freeze``): the
    program's and the SDK's modules and type objects load once and live until exit, and the collector, left to
    itself, walked them all again several times while they loaded, during each render and at exit
    (scripts/render_floor.py --process times the command)."""
    gc.collect()
    gc.freeze()


def render_command(args: argparse.Namespace) -> int:
    """The command: garbage is collected between stacks only (``settle``), from before the program and the SDK load.
    What it freezes stays frozen in the process, which the command ends; tests that call it in process reach only its
    errors, before anything is frozen, and their workers settle the same way (tests/conftest.py)."""
    if args.all and args.config:
        return error("--config goes with --stack")
    enabled = gc.isenabled()
    gc.disable()
    try:
        return render(args.stack, args.config, args.out, between=settle)
    finally:
        if enabled:
            gc.enable()
