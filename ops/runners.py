"""Which GitHub Actions runner previews, deploys and destroys each stack.

Hosted runners cannot resolve or reach a private API server (AKS private-clusters: the private DNS zone is linked
only to the cluster's VNet), so a private stack runs on its self-hosted runner (config ``ciRunner``) and never on
a hosted one; a private stack without a runner is left out, with a warning, rather than failing every run.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from components.vocabulary import BuildMode
from offline.cli import error, json_input, unknown_stack
from offline.stack_files import stack_config, stack_files

HOSTED = "ubuntu-24.04"
HOSTED_FREE_GB = 14
"""The disk GitHub guarantees free on a standard hosted runner (docs.github.com, "GitHub-hosted runners reference":
14 GB SSD). One torch + CUDA image's pip layer alone unpacks to about 7.3 GB beside its 4.2 GB of wheels, and a
stack builds one or two such images at once (docs/deploying.md#images)."""


def runner(stack: str) -> list[str] | str | None:
    """``runs-on`` for the stack: its self-hosted label, the hosted runner, or None when it has none it can use."""
    cfg = stack_config(stack)
    if cfg.ci_runner:
        return ["self-hosted", cfg.ci_runner]
    return None if cfg.cluster.private else HOSTED


def frees_disk(stack: str) -> bool:
    """Whether the deploy job first makes room on its runner: a hosted one that builds the stack's images with its
    Docker engine (``build.mode: local``, the default); a self-hosted runner's disk is its owner's to size."""
    return runner(stack) == HOSTED and stack_config(stack).build.mode == BuildMode.LOCAL


def environment(stack: str) -> str:
    """The GitHub environment a stack deploys in: its scenario's, so the federated credentials grow with the
    scenarios and not with the stack files (Entra ID allows 20 per app; ops/ci_setup.py)."""
    return stack_config(stack).scenario


def matrix_row(stack: str, runs_on: list[str] | str) -> dict[str, Any]:
    """One job's row of a matrix: the stack, its runner, its scenario's environment, whether it makes room first."""
    return {"stack": stack, "runner": runs_on, "environment": environment(stack), "freeDisk": frees_disk(stack)}


def matrix(stacks: list[str]) -> dict[str, Any]:
    """A job matrix of ``{stack, runner, environment, freeDisk}``; private stacks without a runner are left out with
    a warning."""
    include = []
    for stack in stacks:
        runs_on = runner(stack)
        if runs_on is None:
            print(f"::warning::stack {stack} has a private API server and no ciRunner: hosted runners cannot reach "
                  "it, so its workflow jobs are skipped (docs/deploying.md: Private clusters)", file=sys.stderr)
            continue
        include.append(matrix_row(stack, runs_on))
    return {"include": include}


def stacks_command(args: argparse.Namespace) -> int:
    if args.check is not None:
        return 0 if args.check in stack_files() else error(
            f"no stack {args.check!r}; stacks: {', '.join(stack_files())}")
    print(json.dumps(sorted(stack_files())))
    return 0


def matrix_command(args: argparse.Namespace) -> int:
    names = [n for arg in args.stacks
             for n in (json_input(arg, f"argument {arg!r}") if arg.startswith("[") else [arg])]
    if problems := [p for n in names if (p := unknown_stack(n))]:
        return error(problems[0])
    print(json.dumps(matrix(names)))
    return 0
