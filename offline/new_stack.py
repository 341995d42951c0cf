"""A new environment: a stack file for an existing scenario, made from one that runs it, checked like any stack
file, with the generated docs brought up to date (``python -m offline new-stack NAME --like STACK``)."""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from offline.cli import error
from offline.stack_files import REPO_ROOT, read_yaml, stack_config, stack_files
from program.config.errors import ConfigError
from program.config.keys import PROJECT

if TYPE_CHECKING:
    from program.config.schema import StackConfig

SETTINGS = ("nameRoot", "owner", "lifetime")
"""What a new environment usually changes first; anything else is edited in the file afterwards."""


def _set(text: str, key: str, value: str) -> str:
    """``text`` with ``PROJECT:key`` set to ``value``: its line replaced, or one added under ``config:``."""
    line = f"  {PROJECT}:{key}: {json.dumps(value)}"  # quoted: a '#' or ': ' in a value stays in it
    pattern = re.compile(rf"^  {PROJECT}:{key}:.*$", re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(line, text, count=1)
    return re.sub(r"^config:\n", f"config:\n{line}\n", text, count=1, flags=re.MULTILINE)


def new_stack_file(name: str, like: str, settings: dict[str, str], root: Path = REPO_ROOT) -> Path:
    """Write ``Pulumi.<name>.yaml`` from ``like``'s file with ``settings`` (SETTINGS keys) set, and check it; a file
    that does not load is removed again and its error raised."""
    files = stack_files(root)
    target = root / f"Pulumi.{name}.yaml"
    if target.exists():
        raise ValueError(f"{target.name} already exists")
    if like not in files:
        close = difflib.get_close_matches(like, files, n=1)
        raise ValueError(f"no stack {like!r} to start from{f'; did you mean {close[0]}?' if close else ''} "
                         f"stacks: {', '.join(sorted(files))}")
    text = files[like].read_text()
    scenario = read_yaml(files[like])["config"].get(f"{PROJECT}:scenario", like)
    schema, _, rest = text.partition("\n") if text.startswith("# yaml-language-server") else ("", "", text)
    note = f"# {name}: an environment of scenario {scenario}, from Pulumi.{like}.yaml (python -m offline new-stack)."
    text = "\n".join(filter(None, [schema, note, rest]))
    for key, value in settings.items():
        text = _set(text, key, value)
    target.write_text(text)
    try:
        stack_config(name, target)
    except ConfigError:
        target.unlink()
        raise
    return target


ASKED = (("owner", "owner", "the team the stack's resources are tagged to"),
         ("lifetime", "lifetime", "demo (destroyed by the hourly expiry after its ttlHours) or long-lived"))
"""What a new environment must decide rather than inherit: (flag, key, what it means)."""


def asked_settings(args: argparse.Namespace, like: StackConfig, ask: Callable[[str], str] | None
                   ) -> dict[str, str]:
    """``--owner`` and ``--lifetime``, else asked (``ask``: a terminal's input, the copied stack's value as the
    default), else an error: a new environment does not silently inherit another team's owner or a long-lived
    lifetime (newcomer #12)."""
    inherited = {"owner": like.owner, "lifetime": like.lifetime.value}
    settings, missing = {}, []
    for flag, key, meaning in ASKED:
        value = getattr(args, flag)
        if value is None and ask is not None:
            value = ask(f"{key} ({meaning}) [{inherited[key]}]: ").strip() or inherited[key]
        if value is None:
            missing.append(f"--{flag}")
        else:
            settings[key] = value
    if missing:
        raise ValueError(f"{' and '.join(missing)} needed (not asked: no terminal); "
                         f"{args.like} has owner {inherited['owner']}, lifetime {inherited['lifetime']}")
    if settings["lifetime"] not in ("demo", "long-lived"):
        raise ValueError(f"lifetime {settings['lifetime']!r}: demo or long-lived")
    return settings


def copied(cfg: StackConfig, like: str) -> str:
    """What the new stack took from ``like``'s file, in one line to review."""
    pools = "; ".join(f"{g.name} {g.vm_size}{' spot' if g.spot else ''} {g.min_count}–{g.max_count}"
                      for g in cfg.gpu_pools)
    return (f"copied from Pulumi.{like}.yaml: scenario {cfg.scenario}, region {cfg.location}, "
            f"GPU pools {pools or 'none'}; set: owner {cfg.owner}, lifetime {cfg.lifetime.value}, "
            f"naming root {cfg.naming.root}")


def new_stack_command(args: argparse.Namespace) -> int:
    from offline.docs import write_docs
    files = stack_files()
    like = stack_config(args.like) if args.like in files else None
    try:
        asked = asked_settings(args, like, input if sys.stdin.isatty() else None) if like else {}
        settings = {**({"nameRoot": args.name_root} if args.name_root else {}), **asked}
        path = new_stack_file(args.name, args.like, settings)
    except ValueError as e:
        return error(str(e))
    print(copied(stack_config(args.name, path), args.like))
    updated = write_docs()
    print(f"wrote {path.name}; regenerated {', '.join(map(str, updated)) or 'no docs (none changed)'}")
    print(f"next: review and commit them; deploy with `pulumi stack select --create --stack={shlex.quote(args.name)}` "
          "and `pulumi up "
          f"--policy-pack policy`, or the deploy workflow with stack {args.name}, whose environment needs its "
          "federated credential (.venv/bin/python -m ops ci-setup prints it)")
    return 0
