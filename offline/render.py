"""Run the Pulumi program offline under mocks and record every resource it registers.

The program runs exactly as under ``pulumi up`` (``program.pipeline``), with the stack's config encoded the way
the CLI encodes it; only the engine is replaced, and the private-cluster reachability check is off (there is
no cluster to reach). Each stack runs in a fresh ``contextvars.Context`` because the
SDK keeps the root stack and the config in context variables.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from offline.mocks import SUBSCRIPTION, AzureMocks
from offline.runtime import resolve, root_outputs, run_program, set_all_config, without_provider_aliases
from offline.stack_files import REPO_ROOT, cli_encoded, read_stack_file, stack_files
from program.config.keys import PROJECT
from program.config.schema import StackConfig
from program.pipeline import deploy, load_stack_config, read_stack_config
from stacks import REGISTRY

__all__ = ["REPO_ROOT", "SECRET", "Render", "Resource", "check_stack", "render_stack", "stack_files"]

SECRET = "[secret]"  # noqa: S105 (a placeholder, not a secret)


@dataclass
class Resource:
    type: str
    name: str
    parent: str | None
    depends_on: list[str]
    provider: str | None
    custom: bool
    inputs: dict[str, Any]
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    """Inputs whose change replaces the resource (``replaceOnChanges``)."""
    protect: bool = False
    """``pulumi destroy`` refuses the resource (``protect``)."""
    delete_before_replace: bool = False
    """A replacement deletes the old resource first (``deleteBeforeReplace``): a fixed name cannot exist twice."""
    revealed: dict[str, Any] = field(default_factory=dict, repr=False)
    """Inputs with secrets shown, for tests only: never written by the render."""
    urn: str = ""
    """The resource's identity in the stack's state, as the engine writes it without ``urn:pulumi:STACK::PROJECT::``:
    its parents' types, its type and its name (``aksgpu:aks:Cluster$azure-native:...:ManagedCluster::aks``)."""
    aliases: list[str] = field(default_factory=list)
    """Earlier identities (``urn`` form) the resource declares with ``pulumi.Alias``, so a move keeps its state;
    azure-native's own aliases of older API versions are left out."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "name": self.name, "parent": self.parent,
                               "dependsOn": self.depends_on, "inputs": self.inputs}
        if self.provider:
            out["provider"] = self.provider
        if self.ignore_changes:
            out["ignoreChanges"] = self.ignore_changes
        if self.replace_on_changes:
            out["replaceOnChanges"] = self.replace_on_changes
        if self.protect:
            out["protect"] = True
        if self.delete_before_replace:
            out["deleteBeforeReplace"] = True
        return out


@dataclass
class Render:
    stack: str
    cfg: StackConfig
    resources: list[Resource]
    outputs: dict[str, Any]
    invokes: list[str]
    """Provider functions the program called (sorted), e.g. which AKS credentials it fetched."""
    reads: list[str] = field(default_factory=list)
    """Existing resources the program reads (``Resource.get``), as ``type::name`` (sorted)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Each provider function the program called with its arguments, in call order."""

    def called(self, token: str) -> list[dict[str, Any]]:
        """The arguments of each call of the provider function ``token``."""
        return [args for called, args in self.calls if called == token]

    def of_type(self, typ: str) -> list[Resource]:
        return [r for r in self.resources if r.type == typ]

    def named(self, name: str, typ: str | None = None) -> Resource:
        found = [r for r in self.resources if r.name == name and (typ is None or r.type == typ)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} resources named {name!r} (type {typ}) in stack {self.stack}")
        return found[0]

    def children(self, parent: str) -> list[Resource]:
        return [r for r in self.resources if r.parent == parent]

    def upstream(self, name: str) -> set[str]:
        """Everything the engine creates before resource ``name``: its dependencies and its provider's, transitively."""
        by_name = {r.name: r for r in self.resources}
        seen: set[str] = set()
        todo = [name]
        while todo:
            r = by_name.get(todo.pop())
            if r is None:
                continue
            for dep in [*r.depends_on, *([r.provider] if r.provider else [])]:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen


def _urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def _is_stack(urn: str) -> bool:
    return "::pulumi:pulumi:Stack::" in urn


def normalise(value: Any, reveal: bool = False) -> Any:
    """Inputs as JSON would show them: secrets masked (unless ``reveal``), keys sorted, integral numbers as
    integers. (The gRPC wire format carries every number as a double.)

    A secret object or list keeps its shape and masks each value, so a masked Secret is still a valid Secret.
    """
    if rpc.is_rpc_secret(value):
        inner = normalise(rpc.unwrap_rpc_secret(value), reveal)
        return inner if reveal else _mask(inner)
    if isinstance(value, pulumi.FileAsset):
        return {"fileAsset": value.path}
    if isinstance(value, dict):
        return {k: normalise(v, reveal) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [normalise(v, reveal) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return SECRET


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, also keeping what the engine would see: parent, dependencies, provider."""

    mocks: AzureMocks

    def __init__(self, mocks: AzureMocks):
        super().__init__(mocks)
        self.recorded: list[Resource] = []
        self.reads: list[str] = []
        self.qualified: dict[str, str] = {}
        """Mock URN → the type chain the engine puts in the real URN (the mock keeps only the parent's last type)."""

    def ReadResource(self, request):
        self.reads.append(f"{request.type}::{request.name}")
        return super().ReadResource(request)

    def _qualified(self, parent: str, typ: str) -> str:
        chain = self.qualified.get(parent) if parent and not _is_stack(parent) else None
        return f"{chain}${typ}" if chain else typ

    def _alias(self, alias: Any, request: Any) -> str:
        """An alias as a URN tail: given whole, or as a spec whose unset parts are the resource's own."""
        if alias.urn:
            return alias.urn.split("::", 2)[2]
        spec = alias.spec
        if spec.noParent:
            parent_chain = None
        elif spec.parentUrn:
            parent_chain = None if _is_stack(spec.parentUrn) else spec.parentUrn.split("::")[2]
        else:
            parent_chain = self.qualified.get(request.parent) if request.parent else None
        typ = spec.type or request.type
        return f"{parent_chain + '$' if parent_chain else ''}{typ}::{spec.name or request.name}"

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        qualified = self._qualified(request.parent, request.type)
        self.qualified[response.urn] = qualified
        deps = set(request.dependencies)
        for prop in request.propertyDependencies.values():
            deps.update(prop.urns)
        provider = request.provider.split("::")[-2] if request.provider else None
        properties = rpc.deserialize_properties(request.object)
        self.recorded.append(Resource(
            type=request.type,
            name=request.name,
            parent=None if not request.parent or _is_stack(request.parent) else _urn_name(request.parent),
            depends_on=sorted({_urn_name(u) for u in deps} - {request.name}),
            provider=provider,
            custom=bool(request.custom),
            inputs=normalise(properties),
            ignore_changes=sorted(request.ignoreChanges),
            replace_on_changes=sorted(request.replaceOnChanges),
            protect=bool(request.protect),
            delete_before_replace=bool(request.deleteBeforeReplace),
            revealed=normalise(properties, reveal=True),
            urn=f"{qualified}::{request.name}",
            aliases=sorted(self._alias(a, request) for a in request.aliases),
        ))
        return response


def _resolve_outputs(raw: dict[str, Any]) -> dict[str, Any]:
    resolved = {}
    for key in sorted(raw):
        value, secret = resolve(pulumi.Output.from_input(raw[key]))
        resolved[key] = SECRET if secret else value
    return resolved


def _run_program(stack: str, encoded: dict[str, str], subscription: str
                 ) -> tuple[StackConfig, RecordingMonitor, dict[str, Any]]:
    set_all_config(encoded)
    monitor = RecordingMonitor(AzureMocks(stack, subscription))
    pulumi_mocks.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    holder: dict[str, StackConfig] = {}

    def program() -> None:
        pulumi.runtime.register_stack_transformation(without_provider_aliases)
        holder["cfg"] = deploy(read_stack_config(REGISTRY), REGISTRY, preflight=False)

    run_program(program)
    outputs = _resolve_outputs(root_outputs())
    return holder["cfg"], monitor, outputs


def check_stack(stack: str, config_file: Path | None = None) -> StackConfig:
    """Validate a stack's config and its scenario's requirements without declaring anything; raises
    ``ConfigError``."""
    namespace, others = read_stack_file(config_file or stack_files()[stack])
    return load_stack_config(namespace, PROJECT, stack, REGISTRY, others)


def render_stack(stack: str, config_file: Path | None = None) -> Render:
    """Render one stack in memory; raises ``ConfigError`` before any resource is declared."""
    return render_namespace(stack, *read_stack_file(config_file or stack_files()[stack]))


def render_namespace(stack: str, namespace: dict[str, Any], others: dict[str, Any] | None = None,
                     subscription: str = SUBSCRIPTION) -> Render:
    """Render a stack from its config namespace (keys without ``aksgpu:``, Pulumi.yaml defaults applied) and its
    other keys (a provider's), as deployed into ``subscription`` (the mocks' by default)."""
    load_stack_config(namespace, PROJECT, stack, REGISTRY, others)
    cfg, monitor, outputs = contextvars.Context().run(_run_program, stack, cli_encoded(namespace, others),
                                                      subscription)
    resources = sorted(monitor.recorded, key=lambda r: (r.type, r.name))
    return Render(stack, cfg, resources, outputs, sorted(monitor.mocks.invokes), sorted(monitor.reads),
                  list(monitor.mocks.calls))
