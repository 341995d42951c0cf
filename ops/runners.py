"""Which GitHub Actions runner previews, deploys and destroys each stack.

Hosted runners cannot resolve or reach a private API server (AKS private-clusters: the private DNS zone is linked
only to the cluster's VNet), so a private stack runs on its self-hosted runner (config ``ciRunner``) and never on
a hosted one; a private stack without a runner is left out, with a warning, rather than failing every run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.vocabulary import BuildMode
from offline.cli import error, json_input, unknown_stack
from offline.stack_files import stack_config, stack_files

HOSTED = "ubuntu-24.04"
CONTAINERD_STORE = ["driver-type", "io.containerd.snapshotter.v1"]
"""The pair ``docker info`` lists in ``DriverStatus`` when the daemon uses the containerd image store (moby
daemon/containerd/service.go, LayerStoreStatus; docs.docker.com/engine/storage/containerd: ``docker info -f
'{{ .DriverStatus }}'`` prints ``[[driver-type io.containerd.snapshotter.v1]]``). The classic store lists its graph
driver's status instead (overlay2: Backing Filesystem, Supports d_type, ...)."""


def runner(stack: str) -> list[str] | str | None:
    """``runs-on`` for the stack: its self-hosted label, the hosted runner, or None when it has none it can use."""
    cfg = stack_config(stack)
    if cfg.ci_runner:
        return ["self-hosted", cfg.ci_runner]
    return None if cfg.cluster.private else HOSTED


def frees_disk(stack: str) -> bool:
    """Whether the deploy job first prepares its runner for the image builds: a hosted one that builds the stack's
    images with its Docker engine (``build.mode: local``, the default). GitHub guarantees 14 GB free on a standard
    hosted runner (docs.github.com, "GitHub-hosted runners reference"), and one torch + CUDA image's pip layer alone
    unpacks to about 7.3 GB beside its 4.2 GB of wheels (docs/deploying.md#images); pulumi-docker's Image also needs
    the classic image store (``classic_image_store``). A self-hosted runner is its owner's to prepare."""
    return runner(stack) == HOSTED and stack_config(stack).build.mode == BuildMode.LOCAL


def classic_image_store(driver_status: Any, daemon_config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The daemon.json that turns the containerd image store off, from ``docker info``'s ``DriverStatus`` and the
    daemon.json in place; None where the daemon already has the classic store.

    pulumi-docker's Image fails under the containerd image store ("failed to read downloaded context: failed to load
    cache key: invalid response status 403", pulumi/pulumi-docker#967, open; moby/buildkit#5623), which Docker Engine
    29 and later uses on fresh installations (docs.docker.com/engine/storage/containerd). Docker turns it off with
    ``"features": {"containerd-snapshotter": false}`` in daemon.json, and the rest of the file stays as it is."""
    pairs = driver_status if isinstance(driver_status, list) else []
    if CONTAINERD_STORE not in [list(p) for p in pairs if isinstance(p, list | tuple)]:
        return None
    features = daemon_config.get("features")
    return {**daemon_config, "features": {**(features if isinstance(features, Mapping) else {}),
                                          "containerd-snapshotter": False}}


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


def image_store_command(args: argparse.Namespace) -> int:
    status = json_input(sys.stdin.read(), "stdin (docker info --format '{{json .DriverStatus}}')")
    path: Path = args.daemon_json
    try:
        config = json_input(path.read_text(), str(path))
    except FileNotFoundError:
        config = {}
    wanted = classic_image_store(status, config if isinstance(config, Mapping) else {})
    if wanted is None:
        return 0
    if args.check:
        return error("Docker still uses the containerd image store after the switch, and pulumi-docker's Image fails "
                     "there (pulumi/pulumi-docker#967): check the daemon's features in " + str(path))
    print("::notice::Docker uses the containerd image store, where pulumi-docker's Image fails "
          "(pulumi/pulumi-docker#967): switching this runner to the classic store", file=sys.stderr)
    print(json.dumps(wanted, indent=2))
    return 0
