"""`pulumi up` and `pulumi destroy` of one stack through Pulumi's Automation API (the pinned ``pulumi`` package's
``pulumi.automation``), and the engine's own timestamps of what happened.

The run drives the project's program as the CLI would (a local program: ``Pulumi.yaml`` and ``Pulumi.<stack>.yaml``
at the repository root) in the backend the environment names (``pulumi login``, or ``PULUMI_BACKEND_URL``;
docs/lifecycle.md). What the run needs of a stack is ``Deployment``; the tests hand in a stand-in with the same
methods that plays back a recorded timeline.

Engine events (``on_event``) carry a Unix timestamp in seconds (``EngineEvent.timestamp``, pulumi/automation/
events.py). The managed cluster is ready when the engine has its outputs: its ``ResOutputsEvent``, which the engine
sends once the provider's create returned (pulumi/pulumi pkg/engine/update.go, ``OnResourceOutputs`` calling
``resourceOutputsEvent`` of pkg/engine/events.go), and azure-native's create returns once Azure's long-running
operation on the cluster has finished. ``pulumi up`` starts at its ``PreludeEvent`` (the engine's first) and is done
at its ``SummaryEvent``.

The CLI runs in a session of its own (``InterruptiblePulumi``): a Ctrl-C at the terminal reaches this process only,
and the run decides what the CLI gets: one SIGINT, which Pulumi takes as "cancel" (it lets the resource operations in
flight finish and writes the state), and a second only if the first did not end it in time, which Pulumi takes as
"terminate" (pkg/backend/cancellation_scope.go in pulumi/pulumi: the first SIGINT or SIGTERM cancels, the next one
terminates).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from pulumi import automation as auto
from pulumi.automation import events
from pulumi.automation.errors import create_command_error

from ops.e2e.tools import run_tool

MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
"""The type token of the AKS cluster: its outputs mark the cluster ready."""
PROVIDER_PREFIX = "pulumi:providers:"
ROOT_STACK = "pulumi:pulumi:Stack"


OnEvent = Callable[[events.EngineEvent], None]
OnLine = Callable[[str], None]


@dataclass
class Outputs:
    """A stack's outputs after `pulumi up`: their values, and which of them Pulumi holds as secrets."""

    values: dict[str, Any] = field(default_factory=dict)
    secret: frozenset[str] = frozenset()


@dataclass(frozen=True)
class StateResource:
    """One resource in the stack's state: its type token and its provider id (an Azure resource id), and what
    decides whether `pulumi destroy --exclude-protected` keeps it."""

    type: str
    id: str
    urn: str = ""
    protect: bool = False
    """The resource's ``protect`` option (``storage.accounts[].protect``)."""
    custom: bool = True
    """False for a component: it holds nothing in Azure."""
    needs: tuple[str, ...] = ()
    """The URNs it depends on: its parent, its dependencies and its property dependencies."""


def destroyed_by_exclude_protected(resources: Iterable[StateResource]) -> list[StateResource]:
    """What `pulumi destroy --exclude-protected` deletes of ``resources``: everything but the protected resources and
    what they depend on, transitively (their parents, dependencies and property dependencies: pulumi/pulumi
    pkg/cmd/pulumi/operations/destroy.go, ``separateProtected``)."""
    resources = list(resources)
    by_urn = {r.urn: r for r in resources if r.urn}
    kept: set[str] = set()
    todo = [r.urn for r in resources if r.protect and r.urn]
    while todo:
        urn = todo.pop()
        if urn in kept:
            continue
        kept.add(urn)
        todo += [need for need in (by_urn[urn].needs if urn in by_urn else ()) if need not in kept]
    return [r for r in resources if r.urn not in kept or not r.urn]


class Deployment(Protocol):
    """What a run needs of the stack it deploys. ``up`` and ``destroy`` block until the CLI ends and raise when it
    fails; ``interrupt`` may be called from another thread while they run."""

    def resources(self) -> list[StateResource]: ...

    def up(self, on_event: OnEvent, on_output: OnLine) -> Outputs: ...

    def destroy(self, on_event: OnEvent, on_output: OnLine, retry: bool = False) -> None:
        """Everything but the protected resources and what they need (``--exclude-protected``), going on past a
        resource that fails to delete; ``retry``: the state refreshed from the cloud first."""
        ...

    def interrupt(self) -> None: ...

    def cancel(self, timeout_s: float) -> None:
        """``pulumi cancel``: the lock a killed update left on the backend goes; the command is killed at
        ``timeout_s``."""
        ...


@dataclass
class EngineTimes:
    """The engine's timestamps (Unix seconds) of one operation, collected from its event stream."""

    started: float | None = None
    """The prelude event: the engine began the operation."""
    cluster_ready: float | None = None
    """The managed cluster's outputs arrived (its create finished)."""
    finished: float | None = None
    """The summary event: the operation is over."""
    errors: list[str] = field(default_factory=list)
    """The engine's error diagnostics, in order (the first says why an operation failed)."""

    def on_event(self, event: events.EngineEvent) -> None:
        if event.prelude_event is not None and self.started is None:
            self.started = float(event.timestamp)
        if (outputs := event.res_outputs_event) is not None and self.cluster_ready is None \
                and outputs.metadata.type == MANAGED_CLUSTER:
            self.cluster_ready = float(event.timestamp)
        if event.summary_event is not None:
            self.finished = float(event.timestamp)
        if (diagnostic := event.diagnostic_event) is not None and diagnostic.severity == "error":
            self.errors.append(diagnostic.message.strip())


class InterruptiblePulumi(auto.PulumiCommand):
    """The Pulumi CLI from ``PATH`` (``PulumiCommand``'s own version check), each command in a session of its own
    whose process ``interrupt`` sends SIGINT."""

    def __init__(self) -> None:
        super().__init__()
        self._running: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()

    def run(self, args: list[str], cwd: str, additional_env: Mapping[str, str], on_output: OnLine | None = None,
            on_error: OnLine | None = None) -> auto.CommandResult:
        """``PulumiCommand.run`` (pulumi/automation/_cmd.py at the pinned 3.272.0: ``--non-interactive`` before the
        subcommand, the automation environment, each line to its callback, ``CommandError`` on a non-zero exit),
        with the process started in a new session and kept for ``interrupt``."""
        cut = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:cut]:
            args = ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        out: list[str] = []
        err: list[str] = []

        def consume(stream: Any, callback: OnLine | None, lines: list[str]) -> None:
            for line in iter(stream.readline, ""):
                line = line.rstrip()
                if callback:
                    callback(line)
                lines.append(line)
            stream.close()

        with subprocess.Popen([self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                              env=env, encoding="utf-8", start_new_session=True) as process:
            with self._lock:
                self._running.add(process)
            readers = [threading.Thread(target=consume, args=(process.stdout, on_output, out), daemon=True),
                       threading.Thread(target=consume, args=(process.stderr, on_error, err), daemon=True)]
            try:
                for reader in readers:
                    reader.start()
                for reader in readers:
                    reader.join()
                process.wait()
            finally:
                with self._lock:
                    self._running.discard(process)
        result = auto.CommandResult(stdout="\n".join(out), stderr="\n".join(err), code=process.returncode)
        if process.returncode != 0:
            raise create_command_error(result)
        return result

    def interrupt(self) -> None:
        """SIGINT to every command running now: the first cancels an update, a second terminates it."""
        with self._lock:
            running = list(self._running)
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)


def _needs(resource: Mapping[str, Any]) -> tuple[str, ...]:
    """A state resource's parent, dependencies and property dependencies (``ResourceV3``)."""
    found = [resource.get("parent"), *(resource.get("dependencies") or []),
             *(urn for urns in (resource.get("propertyDependencies") or {}).values() for urn in urns or [])]
    return tuple(dict.fromkeys(str(urn) for urn in found if urn))


class PulumiStack:
    """The stack ``name`` of the project in ``work_dir``, selected in the current backend, or created there (with
    ``PULUMI_SECRETS_PROVIDER`` as its secrets provider when set, as the workflows do). ``overrides``: config keys
    `pulumi up` takes in place of the stack file's, from a copy of it (``--config-file``), so the file stays as it
    is."""

    def __init__(self, name: str, work_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.name, self.work_dir, self.overrides = name, work_dir, dict(overrides or {})
        self.command = InterruptiblePulumi()
        # Pulumi.yaml runs the program through uv (toolchain: uv), which `make install` puts in .venv-tools.
        tools = work_dir / ".venv-tools" / "bin"
        self.env = {"PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"} if tools.is_dir() else {}
        options = auto.LocalWorkspaceOptions(pulumi_command=self.command, env_vars=self.env,
                                             secrets_provider=os.environ.get("PULUMI_SECRETS_PROVIDER") or None)
        self.stack = auto.create_or_select_stack(name, work_dir=str(work_dir), opts=options)

    def resources(self) -> list[StateResource]:
        """Every resource of the stack's state but the root stack and the providers. The export holds the state
        with its secrets shown (``stack export --show-secrets``): only types, ids, URNs and the protect option and
        dependencies leave this method (pulumi/pulumi sdk/go/common/apitype/core.go, ``ResourceV3``)."""
        state = self.stack.export_stack().deployment or {}
        return [StateResource(r.get("type", ""), r.get("id", ""), r.get("urn", ""), bool(r.get("protect")),
                              r.get("custom", True) is not False, _needs(r))
                for r in state.get("resources") or []
                if r.get("type") != ROOT_STACK and not str(r.get("type", "")).startswith(PROVIDER_PREFIX)]

    def up(self, on_event: OnEvent, on_output: OnLine) -> Outputs:
        with tempfile.TemporaryDirectory() as folder:
            config = self._config_file(Path(folder)) if self.overrides else None
            result = self.stack.up(on_event=on_event, on_output=on_output, on_error=on_output, color="never",
                                   suppress_outputs=True, config_file=str(config) if config else None)
        return Outputs({k: v.value for k, v in result.outputs.items()},
                       frozenset(k for k, v in result.outputs.items() if v.secret))

    def _config_file(self, folder: Path) -> Path:
        """A copy of the stack file (its secrets provider and encrypted values as they are) with the overrides."""
        source = self.work_dir / f"Pulumi.{self.name}.yaml"
        settings = (yaml.safe_load(source.read_text()) if source.is_file() else None) or {}
        settings["config"] = {**(settings.get("config") or {}), **self.overrides}
        path = folder / source.name
        path.write_text(yaml.safe_dump(settings, sort_keys=False))
        return path

    def cancel(self, timeout_s: float) -> None:
        # The CLI itself, killed at its timeout (the Automation API's cancel has none): on a self-managed backend a
        # cancel deletes every lock of the stack (diy backend CancelCurrentUpdate), so one still running when the
        # destroy takes the lock would remove the destroy's too.
        run_tool(["pulumi", "cancel", "--yes", "--non-interactive", f"--stack={self.name}"], timeout_s,
                 env={**os.environ, **self.env}, cwd=self.work_dir)

    def destroy(self, on_event: OnEvent, on_output: OnLine, retry: bool = False) -> None:
        # Pulumi refuses to delete a protected resource and fails the whole destroy ("unable to delete resource
        # ... as it is currently marked for protection", pkg/resource/deploy/step.go): the protected data stays, as
        # destroy-stack.yml keeps it, and everything else goes. One resource that fails to delete stops no other
        # (--continue-on-error). The retry first reads what is really left (what the first attempt or Azure deleted
        # meanwhile) as a refresh of its own: `destroy --refresh --exclude-protected` names its targets from the state
        # before the refresh drops the deleted ones, then fails "one or more targets could not be found"
        # (pulumi cmd destroy.go handleExcludeProtected; engine checkTargets).
        if retry:
            self.stack.refresh(on_event=on_event, on_output=on_output, on_error=on_output, color="never",
                               suppress_outputs=True)
        self.stack.destroy(on_event=on_event, on_output=on_output, on_error=on_output, color="never",
                           suppress_outputs=True, exclude_protected=True, continue_on_error=True)

    def interrupt(self) -> None:
        self.command.interrupt()
