"""The private Pulumi SDK internals the offline render needs, in one place: nothing public runs a program to
completion under mocks in this process and hands back its stack outputs (``pulumi.runtime.test`` runs one test
function and exposes neither). The SDK is pinned exactly; tests/test_architecture.py fails when a bump moves any of
these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

__all__ = ["resolve", "root_outputs", "run_program", "set_all_config"]


def run_program(program: Callable[[], None]) -> None:
    """Run ``program`` as the engine runs a stack's program, waiting for every resource it registers.

    Without the call stack the SDK takes of every resource it registers (``_get_stack_trace``: the source position the
    engine shows in diagnostics; a mock monitor drops it), a quarter less CPU per render (scripts/render_floor.py)."""
    taken = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        _sync_await(run_pulumi_func(program))
    finally:
        sdk_resource._get_stack_trace = taken


def resolve(output: pulumi.Output[Any]) -> tuple[Any, bool]:
    """An output's value and whether it is secret, once the program has run."""
    return _sync_await(output.future()), _sync_await(output.is_secret())


def root_outputs() -> dict[str, Any]:
    """What the program exported (``pulumi.export``)."""
    root = settings.get_root_resource()  # the program's Stack, once it has run
    return dict(root.outputs) if isinstance(root, Stack) else {}
