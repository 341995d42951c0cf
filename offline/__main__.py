"""``python -m offline COMMAND``: the offline tools, without a cloud, the Pulumi CLI or credentials.

    render --stack NAME [--config FILE] [--out DIR] | --all [--out DIR]   render stacks under Pulumi mocks
    docs [--check]                       regenerate (or check) the generated docs
    stacks [--check NAME]                the stack names as JSON (or: is NAME a stack?)
    matrix STACK...                      a workflow job matrix of {stack, runner} (private stacks: their own runner)
    lifetime --stack NAME                the stack's lifetime: demo or long-lived
    render-diff BASE HEAD [--stacks]     what changed between two renders (markdown, or changed stacks as JSON)
    preview-guard PREVIEW [--allow]      fail on a preview that replaces the cluster or data storage
    expired-stacks [--project P]         demo stacks past expiry, from `az group list` JSON on stdin
    leftovers --stack NAME               fail if anything of a destroyed stack but its protected data is in Azure

Each command imports only what it uses: the lifecycle helpers never load the Pulumi program.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from aksgpu.config.errors import ConfigError
from aksgpu.config.types import PROJECT


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m offline", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="render stacks under Pulumi mocks into DIR/<stack>/")
    which = render.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", help="stack name (Pulumi.<stack>.yaml)")
    which.add_argument("--all", action="store_true", help="every Pulumi.<stack>.yaml in the project")
    render.add_argument("--config", type=Path, help="config file to use instead of Pulumi.<stack>.yaml")
    render.add_argument("--out", type=Path, default=Path("out"), help="output directory (default: out)")
    docs = sub.add_parser("docs", help="regenerate docs/configuration.md and the README's scenario table")
    docs.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    names = sub.add_parser("stacks", help="the project's stacks as a JSON list")
    names.add_argument("--check", metavar="NAME", help="exit 2 unless NAME is a stack of the project")
    grid = sub.add_parser("matrix", help="a job matrix {include: [{stack, runner}]} for the workflows")
    grid.add_argument("stacks", nargs="*", help="stack names (a JSON list as one argument works too)")
    lifetime = sub.add_parser("lifetime", help="print the stack's lifetime: demo or long-lived")
    lifetime.add_argument("--stack", required=True)
    diff = sub.add_parser("render-diff", help="diff two render folders")
    diff.add_argument("base", type=Path)
    diff.add_argument("head", type=Path)
    diff.add_argument("--stacks", action="store_true", help="print the changed stacks as a JSON list")
    guard = sub.add_parser("preview-guard", help="check a `pulumi preview --json` for destructive steps")
    guard.add_argument("preview", type=Path)
    guard.add_argument("--allow", action="store_true", help="report, but exit 0 (label allow-replace)")
    expired = sub.add_parser("expired-stacks", help="expired demo stacks from `az group list` JSON on stdin")
    expired.add_argument("--project", default=PROJECT)
    left = sub.add_parser("leftovers", help="what of a destroyed stack is still in Azure (needs az)")
    left.add_argument("--stack", required=True)
    return parser


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _known_stack(stack: str) -> bool:
    from offline.stack_files import stack_files
    return stack in stack_files()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "render":
            if args.all and args.config:
                parser.error("--config goes with --stack")
            from offline.render_cli import render
            return render(args.stack, args.config, args.out)
        if args.command == "docs":
            from offline.docs import write_docs
            stale = write_docs(check=args.check)
            for path in stale:
                print(f"{'stale' if args.check else 'wrote'}: {path}", file=sys.stderr if args.check else sys.stdout)
            return 1 if args.check and stale else 0
        if args.command == "stacks":
            from offline.stack_files import stack_files
            if args.check is not None:
                return 0 if args.check in stack_files() else _error(
                    f"no stack {args.check!r}; stacks: {', '.join(stack_files())}")
            print(json.dumps(sorted(stack_files())))
            return 0
        if args.command == "matrix":
            from offline.runners import matrix
            names = [n for arg in args.stacks for n in (json.loads(arg) if arg.startswith("[") else [arg])]
            unknown = [n for n in names if not _known_stack(n)]
            if unknown:
                return _error(f"no config file for stack {unknown[0]!r} (expected Pulumi.{unknown[0]}.yaml)")
            print(json.dumps(matrix(names)))
            return 0
        if args.command in ("lifetime", "leftovers") and not _known_stack(args.stack):
            return _error(f"no config file for stack {args.stack!r} (expected Pulumi.{args.stack}.yaml)")
        if args.command == "lifetime":
            from offline.stack_files import stack_config
            print(stack_config(args.stack).lifetime.value)
            return 0
        if args.command == "leftovers":
            from offline.leftovers import remains
            found = remains(args.stack)
            for item in found.kept:
                print(f"kept after destroy of {args.stack}: {item}")
            for item in found.leftovers:
                print(f"LEFT OVER after destroy of {args.stack}: {item}", file=sys.stderr)
            if not found.leftovers and not found.kept:
                print(f"nothing of stack {args.stack} is left in Azure")
            return 1 if found.leftovers else 0
        if args.command == "render-diff":
            from offline.render_diff import changed_stacks, markdown
            print(json.dumps(changed_stacks(args.base, args.head)) if args.stacks
                  else markdown(args.base, args.head), end="")
            return 0
        if args.command == "preview-guard":
            from offline.preview_guard import guarded_steps, replaced_pools
            preview = json.loads(args.preview.read_text())
            for pool in replaced_pools(preview):
                print(f"replaces node pool {pool}: its nodes and their pods are recreated (a setting AKS fixes at "
                      "creation changed)")
            steps = guarded_steps(preview)
            for step in steps:
                print(f"destructive: {step}")
            if steps and not args.allow:
                print("this change would replace or delete the cluster or data storage; "
                      "label the pull request allow-replace if that is intended", file=sys.stderr)
                return 1
            if not steps:
                print("no replacement or deletion of the cluster or data storage")
            return 0
        if args.command == "expired-stacks":
            from aksgpu.config.expiry import expired_stacks
            print(json.dumps(expired_stacks(json.load(sys.stdin), dt.datetime.now(dt.UTC), args.project)))
            return 0
    except ConfigError as error:
        return _error(str(error))
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
