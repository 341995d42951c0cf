"""``python -m stacks render``: the offline render of one or every stack (no cloud, CLI or credentials).
``python -m stacks lifetime --stack S``: the stack's lifetime (demo or long-lived), for the destroy workflow."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stacks.config_reader import ConfigError
from stacks.render import check_stack, render_stack, stack_files
from stacks.report import write_render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stacks")
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="render stacks under Pulumi mocks into DIR/<stack>/")
    which = render.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", help="stack name (Pulumi.<stack>.yaml)")
    which.add_argument("--all", action="store_true", help="every Pulumi.<stack>.yaml in the project")
    render.add_argument("--config", type=Path, help="config file to use instead of Pulumi.<stack>.yaml")
    render.add_argument("--out", type=Path, default=Path("out"), help="output directory (default: out)")
    lifetime = sub.add_parser("lifetime", help="print the stack's lifetime: demo or long-lived")
    lifetime.add_argument("--stack", required=True)
    args = parser.parse_args(argv)

    files = stack_files()
    if args.command == "lifetime":
        if args.stack not in files:
            print(f"error: no config file for stack {args.stack!r} (expected Pulumi.{args.stack}.yaml)",
                  file=sys.stderr)
            return 2
        print(check_stack(args.stack, files[args.stack]).lifetime)
        return 0
    if args.all:
        if args.config:
            parser.error("--config goes with --stack")
        targets = dict(files)
    else:
        config = args.config or files.get(args.stack)
        if config is None or not config.exists():
            print(f"error: no config file for stack {args.stack!r} (expected Pulumi.{args.stack}.yaml)",
                  file=sys.stderr)
            return 2
        targets = {args.stack: config}

    try:
        for stack, config in targets.items():  # every config is checked before anything is written
            check_stack(stack, config)
    except ConfigError as e:
        print(f"error: stack {stack}: {e}", file=sys.stderr)
        return 2

    for stack, config in targets.items():
        start = time.perf_counter()
        rendered = render_stack(stack, config)
        path = write_render(rendered, args.out)
        print(f"{stack}: {len(rendered.resources)} resources -> {path} ({time.perf_counter() - start:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
