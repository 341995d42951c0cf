"""The private Pulumi SDK internals the offline render needs, in one place: nothing public runs a program to
completion under mocks in this process and hands back its stack outputs (``pulumi.runtime.test`` runs one test
function and exposes neither). The SDK is pinned exactly; tests/test_architecture.py fails when a bump moves any of
these. Also the render's stack transformation, which scripts/render_floor.py gives its floor: this module loads
pulumi and the project's name, not the program."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from program.config.keys import PROJECT

__all__ = ["resolve", "root_outputs", "run_program", "set_all_config", "without_provider_aliases"]


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


def _provider_type_alias(alias: Any) -> bool:
    """One of a provider SDK's own aliases: another type name of the same resource (an older API version), nothing
    else. The program's aliases name a parent or a name, or a type of the project's own."""
    return (isinstance(alias, pulumi.Alias) and isinstance(alias.type_, str)
            and not alias.type_.startswith(f"{PROJECT}:")
            and alias.name is ... and alias.parent is ... and alias.stack is ... and alias.project is ...)


def without_provider_aliases(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult:
    """Drop the providers' aliases: azure-native declares one per API version of a type (about 110 for an AKS
    cluster), which only move existing state to a new type name. A render has no state, and turning each into a URN
    took a fifth of its time. The program's own aliases stay: the URN pins check them."""
    if not args.opts.aliases:
        return pulumi.ResourceTransformationResult(args.props, args.opts)
    opts = copy.copy(args.opts)
    opts.aliases = [a for a in args.opts.aliases if not _provider_type_alias(a)] or None
    return pulumi.ResourceTransformationResult(args.props, opts)
