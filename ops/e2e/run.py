"""``python -m ops e2e --stack S``: one stack deployed to Azure, measured, probed, drilled, destroyed and checked for
leftovers, written to one results file (``offline.runs.Run``; docs/e2e.md).

Steps, in order: the capacity preflight (``ops.capacity``); `pulumi up` (``ops.e2e.automation``), polling the
cluster for its phases (``ops.e2e.phases``) from the moment the engine says the cluster exists; the scenario's
acceptance probes (``ops.e2e.probes.run_probes``); the spot drill where the scenario declares one on a spot GPU pool
(``ops.e2e.drill.spot_drill``); `pulumi destroy` of all but the protected data, always (after a failed up, a failed
or hung probe, a Ctrl-C, a SIGTERM or a SIGHUP too) unless ``--keep``, retried once when it fails; the leftover
check (``ops.e2e.leftovers``), which marks a group kept for protected data retained. Each step has a timeout; a step
that runs past it is interrupted (Pulumi gets one SIGINT, its "cancel") and the run goes on to the destroy; the
longest a run can take is ``Settings.longest_s``. The file is written whatever happened, every string in it
scrubbed (``ops.e2e.scrub``). A run killed outright (SIGKILL, out of memory, a cancelled workflow job's ten seconds)
destroys nothing: e2e-stack.yml's cleanup job does, and ``python -m ops e2e-cleanup`` by hand.

Exit status: 0 the run passed (every step ok or skipped, every probe passed, nothing left over); 1 a step or probe
failed, timed out or was interrupted, or something was left over; 2 bad input (an unknown stack, a config error,
no Azure sign-in, no Pulumi CLI, a stack that is already deployed): nothing was deployed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import importlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from components.kubernetes.kubeconfig import kubelogin_kubeconfig
from offline.cli import BadInput, unknown_stack
from offline.estimates.cost import fixed_costs, load_prices
from offline.estimates.e2e import phase_estimates
from offline.runs import RESULTS, Clock, Drill, Outcome, Phase, PhaseName, Pool, ProbeVerdict, Run, Step, StepName
from offline.stack_files import REPO_ROOT, stack_needs
from ops.e2e import phases as phase_module
from ops.e2e.automation import (
    Deployment,
    EngineTimes,
    Outputs,
    PulumiStack,
    StateResource,
    destroyed_by_exclude_protected,
)
from ops.e2e.cost import run_cost
from ops.e2e.drill import DrillFailed
from ops.e2e.leftovers import Found, leftovers
from ops.e2e.scrub import Scrubber
from ops.e2e.tools import ToolFailed, Tools
from ops.lifecycle import E2E_ENVIRONMENT, ENVIRONMENT_TAG, retain
from program.config.expiry import LIFETIME, RETAINED
from program.config.keys import PROJECT
from stacks import REGISTRY

if TYPE_CHECKING:
    from offline.render import Render
    from program.config.schema import StackConfig

T = TypeVar("T")

ProbesFn = Callable[[str, "StackConfig", Mapping[str, Any], Tools, float], list[ProbeVerdict]]
"""``ops.e2e.probes.run_probes`` (docs/e2e.md: the contract with the probes)."""
DrillFn = Callable[[str, "StackConfig", Mapping[str, Any], Tools, float], tuple[Drill | None, list[Phase]]]
"""``ops.e2e.drill.spot_drill``: (None, []) where the stack has no spot GPU pool."""
Preflight = Callable[["StackConfig"], tuple[Outcome, str]]

TOOLS_NEEDED = ("pulumi", "az", "kubectl", "kubelogin")
"""What a run calls: the Pulumi CLI (through the Automation API), az, kubectl and kubelogin (the kubeconfig's
credential plugin)."""


class StepFailed(Exception):
    """A step's work failed; the message is one line saying why."""


class StepTimedOut(Exception):
    """A step ran past its timeout."""


@dataclass(frozen=True)
class Settings:
    timeout_s: float = 3600.0
    """How long each of `pulumi up`, the probes and `pulumi destroy` may take (``--timeout-minutes``); the destroy's
    two attempts share it."""
    drill_timeout_s: float = 90 * 60.0
    """How long the spot drill may take (``--drill-timeout-minutes``): a node for its run, its first checkpoint,
    Azure's eviction (within 30 minutes of the call), a new node, the resume, and the uninterrupted run."""
    preflight_timeout_s: float = 180.0
    leftovers_timeout_s: float = 540.0
    cancel_grace_s: float = 600.0
    """After the SIGINT that cancels `pulumi up` or `destroy`, how long Pulumi may take to finish the operations in
    flight (an AKS cluster or pool create is estimated at 5 to 7 minutes: durations.yaml) before a second SIGINT
    terminates it."""
    poll_s: float = 30.0
    """How often the cluster is read while the stack is up (the resolution of the polled phases)."""
    tick_s: float = 5.0
    """How often a waiting step looks at its work, its deadline and the poll."""
    keep: bool = False
    """``--keep``: no destroy and no leftover check."""
    results: Path = REPO_ROOT / RESULTS

    @property
    def longest_s(self) -> float:
        """The longest a run can take, every call it makes counted: its start (``START_S``); each step to its
        timeout, an interrupted `pulumi up` and destroy to the end of their cancel grace and the terminate's minute,
        probes or a drill left running a minute past their own; a look at the cluster before the probes, the drill
        and the destroy, and one more past the end of each step that polls the cluster while it waits (``LOOK_S``);
        the state read and the Jobs' drain before the destroy. A workflow job that runs one must allow this much
        (e2e-stack.yml: the tests hold it)."""
        interrupted = self.cancel_grace_s + STOP_S
        up = self.timeout_s + interrupted + LOOK_S
        probes = LOOK_S + self.timeout_s + LEFT_RUNNING_S + LOOK_S
        drill = LOOK_S + self.drill_timeout_s + LEFT_RUNNING_S + LOOK_S
        destroy = STATE_S + LOOK_S + DRAIN_S + self.timeout_s + interrupted
        return START_S + self.preflight_timeout_s + up + probes + drill + destroy + self.leftovers_timeout_s

    @property
    def cleanup_longest_s(self) -> float:
        """The longest ``python -m ops e2e-cleanup`` can take: its start, each read tried ``CLEANUP_TRIES`` times
        (the sign-in, the stack's state, the resource group's tags), `pulumi cancel`, the state read before the
        destroy, a look at the cluster (its credentials), the Jobs' drain, the destroy to the end of its cancel grace,
        the leftover check."""
        reads = AZ_S + CLEANUP_TRIES * (STATE_S + 2 * AZ_S) + (CLEANUP_TRIES - 1) * 2 * RETRY_PAUSE_S
        return (reads + STATE_S + STATE_S + LOOK_S + DRAIN_S + self.timeout_s + self.cancel_grace_s + STOP_S
                + self.leftovers_timeout_s)


AZ_S = 60.0
"""The timeout of each az call a run makes outside its steps (the sign-in, the resource group's tags) and of the
cluster's credentials: each answers in seconds."""
LISTING_S = 60.0
"""The timeout of one read of the cluster's nodes and pods (kubectl)."""
LOOK_S = AZ_S + LISTING_S
"""One look at the cluster: its credentials where the run has none yet, then the listing."""
STATE_S = 120.0
"""How long one Pulumi CLI call outside the steps may take: selecting the stack and reading its state (`stack
export`), or `pulumi cancel`."""
START_S = 3 * AZ_S + STATE_S
"""Before anything is deployed: ``az account show``, the stack's state, ``az group exists`` and ``az group show``."""
CLEANUP_TRIES = 2
"""How often ``ops e2e-cleanup`` tries to read the stack's state and its resource group before it gives up: it runs
once after a run, and a read that fails (throttled, a slow backend) would leave the stack up."""
RETRY_PAUSE_S = 30.0
STOP_S = 60.0
"""After the second SIGINT (terminate), how long the run waits for Pulumi before it goes on."""
LEFT_RUNNING_S = 60.0
"""How long past its own timeout the run waits for probes or a drill that cannot be interrupted."""
DRAIN_S = 660.0
"""The Jobs' delete before the destroy (``kubectl delete --timeout=10m``, and a minute more)."""


@dataclass
class Seams:
    """What a run calls outside this module. The command builds the real ones; the tests hand in stand-ins."""

    tools: Tools
    deployment: Callable[[str], Deployment]
    render: Callable[[str], Render]
    preflight: Preflight
    probes: ProbesFn | None
    """None: ``ops.e2e.probes`` is not there (the probes step then fails: no run passes unprobed)."""
    drill: DrillFn | None
    commit: Callable[[], str]
    prices: Callable[[], dict[str, Any]] = load_prices
    say: Callable[[str], None] = print
    started: Callable[[], None] = lambda: None
    """Told once the run has passed its start (the stack is the run's to deploy) and its preflight, right before
    `pulumi up`: ``tell_workflow``."""


def _one_line(text: str, most: int = 400) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    line = " / ".join(lines[-3:]) if lines else ""
    return line if len(line) <= most else line[:most - 1] + "…"


def _utc(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)


def wait(work: Callable[[], T], timeout_s: float, tools: Tools, settings: Settings, stack: str,
         interrupt: Callable[[], None] | None = None, during: Callable[[], None] | None = None) -> T:
    """``work()`` run in a thread: its value, or its exception. Past ``timeout_s`` (or on Ctrl-C) the work is
    interrupted when it can be (``interrupt``), given ``cancel_grace_s`` to stop, and ``StepTimedOut`` (or the
    ``KeyboardInterrupt``) raised; work that cannot be interrupted is left behind in its thread. ``during`` runs at
    each look (the cluster's poll)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as error:  # noqa: BLE001 (handed to the waiting thread as it is)
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True, name=f"e2e-{stack}")
    thread.start()
    began = tools.now()
    try:
        while thread.is_alive():
            if during is not None:
                during()
            if (tools.now() - began).total_seconds() >= timeout_s:
                if interrupt is not None:
                    _stop(thread, interrupt, tools, settings)
                raise StepTimedOut(f"no end in {timeout_s / 60:.0f} min"
                                   + (": interrupted" if interrupt is not None else ": left running"))
            tools.sleep(settings.tick_s)
            thread.join(0.001)
    except KeyboardInterrupt:
        if interrupt is not None:
            _stop(thread, interrupt, tools, settings)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _stop(thread: threading.Thread, interrupt: Callable[[], None], tools: Tools, settings: Settings) -> None:
    """Cancel: one interrupt, ``cancel_grace_s`` to end; then terminate: a second, and a minute more. A Ctrl-C
    while waiting terminates at once, and goes on as a Ctrl-C."""
    interrupt()
    began, grace, second = tools.now(), settings.cancel_grace_s, False
    try:
        while thread.is_alive():
            waited = (tools.now() - began).total_seconds()
            if waited >= grace and not second:
                interrupt()
                second = True
            elif waited >= grace + STOP_S:
                return
            tools.sleep(settings.tick_s)
            thread.join(0.001)
    except KeyboardInterrupt:
        interrupt()
        raise


@dataclass
class E2ERun:
    stack: str
    seams: Seams
    settings: Settings
    render: Render
    cfg: StackConfig
    deployment: Deployment
    scrub: Scrubber
    commit: str
    started: dt.datetime
    steps: list[Step] = field(default_factory=list)
    probes: list[ProbeVerdict] = field(default_factory=list)
    drill: Drill | None = None
    drill_phases: list[Phase] = field(default_factory=list)
    drill_started: dt.datetime | None = None
    leftovers: list[Any] = field(default_factory=list)
    outputs: Outputs | None = None
    up_attempted: bool = False
    up_started: dt.datetime | None = None
    up_ended: dt.datetime | None = None
    up_times: EngineTimes = field(default_factory=EngineTimes)
    destroy_seconds: float | None = None
    destroyed_whole: bool = False
    """The destroy took down a whole stack (`pulumi up` finished) at its first attempt: a measure of the destroy
    estimate (offline/estimates/measured.py)."""
    ended: dt.datetime | None = None
    interrupted: bool = False
    made: list[StateResource] = field(default_factory=list)
    observations: phase_module.Observations = field(default_factory=phase_module.Observations)
    kubeconfig_dir: Path | None = None
    last_poll: dt.datetime | None = None
    last_access_try: dt.datetime | None = None

    @property
    def tools(self) -> Tools:
        return self.seams.tools

    def now(self) -> dt.datetime:
        return self.tools.now()

    def say(self, text: str) -> None:
        self.seams.say(self.scrub.text(text))

    def outcome(self, step: StepName) -> Outcome | None:
        return next((s.outcome for s in self.steps if s.step == step), None)

    def wait(self, work: Callable[[], T], timeout_s: float, interrupt: Callable[[], None] | None = None,
             during: Callable[[], None] | None = None) -> T:
        return wait(work, timeout_s, self.tools, self.settings, self.stack, interrupt, during)

    # --- the cluster ------------------------------------------------------------------------------------------

    def _credentials(self) -> None:
        """A kubeconfig for the cluster from ARM (``az aks get-credentials --file -``: "Use "-" to print YAML to
        stdout instead", Azure CLI reference), made non-interactive as the program's provider does
        (``kubelogin_kubeconfig``), in a private temporary folder."""
        names = self.cfg.naming
        text = self.tools.az("aks", "get-credentials", "--resource-group", names.resource_group(), "--name",
                             names.cluster(), "--file", "-", timeout_s=AZ_S)
        converted = kubelogin_kubeconfig(text, self.cfg.cluster.login_mode)
        self.kubeconfig_dir = self.kubeconfig_dir or Path(tempfile.mkdtemp(prefix="e2e-"))  # mode 0700
        path = self.kubeconfig_dir / "kubeconfig"
        path.touch(mode=0o600)
        path.write_text(converted)
        self.tools.kubeconfig = path

    def observe(self, force: bool = False, cluster: bool = True) -> None:
        """Read the cluster's nodes and pods when a poll is due (``force``: now). ``cluster``: the cluster may exist
        (its engine event came, or `pulumi up` got past it)."""
        now = self.now()
        if self.tools.kubeconfig is None:
            due = self.last_access_try is None or (now - self.last_access_try).total_seconds() >= self.settings.poll_s
            if not cluster or not (due or force):
                return
            self.last_access_try = now
            try:
                self._credentials()
            except Exception:  # noqa: BLE001 (no cluster yet, or no access: the next poll tries again)
                return
        if not force and self.last_poll is not None and \
                (now - self.last_poll).total_seconds() < self.settings.poll_s:
            return
        self.last_poll = now
        try:
            self.observations.add(json.loads(self.tools.kubectl(*phase_module.LISTING, timeout_s=LISTING_S)), now)
        except Exception:  # noqa: BLE001 (the next poll tries again; a phase never seen stays unmeasured)
            return

    def _cluster_may_exist(self) -> bool:
        return self.up_times.cluster_ready is not None or self.outcome(StepName.UP) == Outcome.OK

    # --- the steps --------------------------------------------------------------------------------------------

    def step(self, name: StepName, body: Callable[[], tuple[Outcome, str]]) -> Outcome:
        """Run one step and record it; a Ctrl-C marks it interrupted and the run goes to its cleanup."""
        began = self.now()
        self.say(f"e2e {self.stack}: {name.value} ...")
        try:
            outcome, detail = body()
        except KeyboardInterrupt:
            self.interrupted = True
            outcome, detail = Outcome.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM)"
        except StepTimedOut as e:
            outcome, detail = Outcome.TIMED_OUT, str(e)
        except ToolFailed as e:
            outcome, detail = (Outcome.TIMED_OUT if e.timed_out else Outcome.FAILED), str(e)
        except Exception as e:  # noqa: BLE001 (a step's failure is recorded, and the run goes on to its cleanup)
            outcome, detail = Outcome.FAILED, str(e) if isinstance(e, StepFailed) else f"{type(e).__name__}: {e}"
        seconds = max(0.0, (self.now() - began).total_seconds())
        self.steps.append(Step(step=name, outcome=outcome, seconds=seconds, detail=self.scrub.text(_one_line(detail))))
        self.say(f"e2e {self.stack}: {name.value} {outcome.value} in {seconds / 60:.1f} min"
                 + (f": {_one_line(detail)}" if detail else ""))
        return outcome

    def skip(self, name: StepName, why: str) -> None:
        self.steps.append(Step(step=name, outcome=Outcome.SKIPPED, seconds=0.0, detail=why))

    def preflight(self) -> tuple[Outcome, str]:
        return self.wait(lambda: self.seams.preflight(self.cfg), self.settings.preflight_timeout_s)

    def up(self) -> tuple[Outcome, str]:
        self.up_attempted = True
        self.up_started = self.now()
        times = self.up_times

        def during() -> None:
            self.observe(cluster=times.cluster_ready is not None)

        try:
            self.outputs = self.wait(lambda: self.deployment.up(times.on_event, self.say), self.settings.timeout_s,
                                     self.deployment.interrupt, during)
        except (StepTimedOut, KeyboardInterrupt):
            raise
        except Exception as e:  # why `pulumi up` failed: the engine's first error says it best
            raise StepFailed(times.errors[0] if times.errors else _one_line(str(e))) from e
        finally:
            self.up_ended = self.now()
        secrets = [self.outputs.values.get(k) for k in self.outputs.secret]
        self.scrub.hide([*secrets, *(json.dumps(v) for v in secrets if not isinstance(v, str))])
        return Outcome.OK, f"{len(self.outputs.values)} stack outputs"

    def _during_workload(self) -> None:
        self.observe(cluster=True)

    def _cluster_access(self) -> str:
        """Why the probes or the drill cannot reach the cluster (no kubeconfig from Azure), or nothing: without the
        run's own kubeconfig, kubectl would use whatever cluster the machine's default one names."""
        self.observe(force=True)
        return "" if self.tools.kubeconfig is not None else \
            f"no kubeconfig for cluster {self.cfg.naming.cluster()} (az aks get-credentials failed)"

    def probe(self) -> tuple[Outcome, str]:
        if self.outputs is None:
            return Outcome.SKIPPED, "`pulumi up` did not finish"
        if self.seams.probes is None:
            return Outcome.FAILED, "ops.e2e.probes (the scenario's acceptance probes) is not installed"
        if why := self._cluster_access():
            return Outcome.FAILED, why
        run_probes, outputs = self.seams.probes, self.outputs.values
        verdicts = self.wait(lambda: run_probes(self.stack, self.cfg, outputs, self.tools, self.settings.timeout_s),
                             self.settings.timeout_s + LEFT_RUNNING_S, during=self._during_workload)
        self.probes = list(verdicts)
        if not self.probes:
            return Outcome.SKIPPED, "the scenario declares no probes"
        failed = [v.name for v in self.probes if not v.passed]
        if failed:
            return Outcome.FAILED, f"{len(failed)} of {len(self.probes)} probes failed: {', '.join(failed)}"
        return Outcome.OK, f"{len(self.probes)} probes passed"

    def spot_drill(self) -> tuple[Outcome, str]:
        if self.outputs is None:
            return Outcome.SKIPPED, "`pulumi up` did not finish"
        plan = REGISTRY[self.cfg.scenario].drill_of(self.cfg, self.cfg.settings)
        if plan is None:
            return Outcome.SKIPPED, (f"scenario {self.cfg.scenario} declares no spot drill: it has no training run "
                                     "whose checkpoints outlive its node (docs/e2e.md)")
        if not self.cfg.gpu_pool(plan.pool).spot:
            return Outcome.SKIPPED, f"the drill's pool {plan.pool} is not spot"
        if self.seams.drill is None:
            return Outcome.FAILED, "ops.e2e.drill (the spot eviction drill) is not installed"
        if why := self._cluster_access():
            return Outcome.FAILED, why
        drill_fn, outputs, budget = self.seams.drill, self.outputs.values, self.settings.drill_timeout_s
        self.drill_started = self.now()
        try:
            drill, found = self.wait(lambda: drill_fn(self.stack, self.cfg, outputs, self.tools, budget),
                                     budget + LEFT_RUNNING_S, during=self._during_workload)
        except DrillFailed as failed:  # what it measured before it stopped still goes in the results
            self.drill, self.drill_phases = failed.drill, list(failed.phases)
            return Outcome.FAILED, str(failed)
        self.drill, self.drill_phases = drill, list(found)
        if drill is None:
            return Outcome.FAILED, f"the drill did not run on spot pool {plan.pool}"
        if not drill.resumed_from:  # a run that starts again from step 0 proves nothing about a resume
            return Outcome.FAILED, f"evicted {drill.node}: the run did not go on from a checkpoint " \
                                   f"(resumed from {drill.resumed_from})"
        if drill.weights_match is True:
            return Outcome.OK, f"evicted {drill.node} of pool {drill.pool}: the run went on from step " \
                               f"{drill.resumed_from} and its final weights match an uninterrupted run's"
        if drill.weights_match is False:
            return Outcome.FAILED, f"evicted {drill.node}: the resumed run's final weights differ from an " \
                                   "uninterrupted run's"
        return Outcome.FAILED, f"evicted {drill.node}: the resumed run did not finish"

    def _drain(self) -> str:
        """The scenario's Jobs (and JobSets, where it runs them) go before the destroy, so Kueue lets its queue go
        and an active JobSet makes no Jobs again (as ``ops drain-jobs`` does for the destroy workflow:
        ops/lifecycle.py). One call: kubectl refuses a kind the cluster lacks before it deletes anything."""
        needs = stack_needs(self.stack)
        if needs.namespace is None or self.tools.kubeconfig is None:
            return ""
        namespace, kinds = needs.namespace, "cronjobs,jobs" + (",jobsets.jobset.x-k8s.io" if needs.job_sets else "")
        try:
            self.tools.kubectl("--namespace", namespace, "delete", kinds, "--all", "--ignore-not-found",
                               "--wait=true", "--timeout=10m", timeout_s=DRAIN_S)
        except ToolFailed as e:
            return f"; the Jobs of {namespace} were not deleted first ({e})"
        return ""

    def destroy(self) -> tuple[Outcome, str]:
        if self.settings.keep:
            return Outcome.SKIPPED, f"--keep: the stack stays up (destroy it: pulumi destroy --stack {self.stack})"
        if not self.up_attempted:
            return Outcome.SKIPPED, "nothing was deployed"
        notes = ""
        try:
            self.made = self.wait(self.deployment.resources, STATE_S)
        except Exception as e:  # noqa: BLE001 (the leftover check then has no state to compare with)
            notes = f"; the state was not read before the destroy ({_one_line(str(e))})"
        self.observe(force=True)  # the nodes' last look before they go (tried even where no event said a cluster)
        notes += self._drain()
        errors: list[str] = []
        timed_out = False
        began = self.now()
        for attempt in (1, 2):
            # Both attempts share the timeout: the retry gets what the first left (a hung first one leaves none).
            left = self.settings.timeout_s - (self.now() - began).total_seconds()
            if left <= 0:
                break
            times = EngineTimes()
            try:
                self.wait(functools.partial(self.deployment.destroy, times.on_event, self.say, attempt == 2), left,
                          self.deployment.interrupt)
            except KeyboardInterrupt:
                raise
            except StepTimedOut as e:
                errors.append(str(e))
                timed_out = True
                continue
            except Exception as e:  # noqa: BLE001 (retried once, then reported with what is left)
                errors.append(times.errors[0] if times.errors else _one_line(str(e)))
                continue
            finally:
                self.ended = self.now()
            # From the first attempt's start: a retry's time is the destroy's too.
            self.destroy_seconds = (self.ended - began).total_seconds()
            self.destroyed_whole = attempt == 1 and self.outcome(StepName.UP) == Outcome.OK
            retried = f" on the retry, after: {errors[0]}" if attempt == 2 else ""
            return Outcome.OK, f"destroyed{retried}{notes}"
        tries = "twice" if len(errors) == 2 else "once, leaving no time for a retry"
        return (Outcome.TIMED_OUT if timed_out else Outcome.FAILED), \
            f"failed {tries} ({errors[-1]}): what is left is listed under leftovers{notes}"

    def check_leftovers(self) -> tuple[Outcome, str]:
        if self.settings.keep:
            return Outcome.SKIPPED, "--keep"
        if not self.up_attempted:
            return Outcome.SKIPPED, "nothing was deployed"
        def look() -> Found:
            found = leftovers(self.cfg, self.made, self.tools.az)
            if not found.leftovers and found.kept_group is not None:
                # As `ops leftovers --retain` does after the destroy workflow's destroy: the kept group is no demo to
                # expire and no live stack to update or to refuse an end-to-end run for (ops/lifecycle.py).
                retain(found.kept_group, self.tools.az)
            return found

        found = self.wait(look, self.settings.leftovers_timeout_s)
        self.leftovers = found.leftovers
        kept = f"; kept on purpose: {'; '.join(found.kept)}" if found.kept else ""
        if found.leftovers:
            return Outcome.FAILED, f"{len(found.leftovers)} left in Azure: " \
                                   f"{', '.join(item.id for item in found.leftovers[:5])}{kept}"
        if found.kept_group is not None:
            kept += f"; resource group {found.kept_group} marked {LIFETIME}: {RETAINED}"
        return Outcome.OK, f"nothing left{kept}"

    # --- the record -------------------------------------------------------------------------------------------

    def phases(self) -> list[Phase]:
        if self.up_started is None:
            return []
        up_ok = self.outcome(StepName.UP) == Outcome.OK
        ctx = phase_module.Context(
            cfg=self.cfg, up_started=_utc(self.up_times.started) or self.up_started,
            up_finished=(_utc(self.up_times.finished) or self.up_ended) if up_ok else None,
            cluster_ready=_utc(self.up_times.cluster_ready),
            operator_namespace=phase_module.operator_namespace(self.render),
            workload_namespaces=phase_module.workload_namespaces(self.render), scale_up_before=self.drill_started)
        estimates = phase_estimates(self.render)
        found = phase_module.phases(self.observations, ctx, estimates)
        if (endpoint := self._endpoint_answering(ctx.up_started)) is not None:
            found.append(endpoint.model_copy(update={
                "estimated_seconds": estimates.get((PhaseName.ENDPOINT_ANSWERING, Clock.UP))}))
        if self.outcome(StepName.DESTROY) not in (None, Outcome.SKIPPED):
            estimated = estimates.get((PhaseName.DESTROY, Clock.DESTROY))
            if self.destroyed_whole:
                found.append(Phase(name=PhaseName.DESTROY, clock=Clock.DESTROY, measured_seconds=self.destroy_seconds,
                                   estimated_seconds=estimated, source="`pulumi destroy` of the whole stack, from its "
                                                                       "start"))
            else:  # what a failed `pulumi up` made, or a destroy that failed or needed its retry: no such measure
                took = "" if self.destroy_seconds is None else f" ({self.destroy_seconds:.0f} s)"
                found.append(Phase(name=PhaseName.DESTROY, clock=Clock.DESTROY, measured_seconds=None,
                                   estimated_seconds=estimated,
                                   source=f"not a whole stack's destroy at its first attempt{took}: `pulumi up` "
                                          "did not finish, or the destroy failed or was retried"))
        return [*found, *self.drill_phases]

    def _endpoint_answering(self, zero: dt.datetime) -> Phase | None:
        """When the scenario's endpoint first answered: its first endpoint probe's first expected answer, measured
        only where an earlier request of that probe got none, so that the endpoint came up between the two (within
        one look). A probe whose first request got its answer says only that the endpoint answered before it
        asked, and earlier probes' time is no part of it: that is not set beside the estimate."""
        probe = next((v for v in self.probes if v.answered is not None), None)
        if probe is None or probe.answered is None:
            return None
        at = max(0.0, (probe.answered - zero).total_seconds())
        if probe.unanswered is None:
            return Phase(name=PhaseName.ENDPOINT_ANSWERING, measured_seconds=None,
                         source=f"probe {probe.name!r} got its answer at its first request, {at / 60:.1f} min after "
                                "`pulumi up` began: the endpoint answered before that (not measured)")
        gap = max(0.0, (probe.answered - probe.unanswered).total_seconds())
        return Phase(name=PhaseName.ENDPOINT_ANSWERING, measured_seconds=at,
                     source=f"probe {probe.name!r}: its first expected answer, {gap:.0f} s after a request that got "
                            "none")

    def cost(self, ended: dt.datetime) -> float | None:
        if self.up_started is None:
            return 0.0
        prices = self.seams.prices()
        fixed = fixed_costs(self.render, prices) if self._cluster_may_exist() else []
        if self._cluster_may_exist() and not self.observations.polls:
            return None  # the cluster ran, but its nodes were never read
        hours = max(0.0, (ended - self.up_started).total_seconds()) / 3600
        return run_cost(self.observations, ended, self.cfg.location, prices, fixed, hours)

    def _measured(self, finished: dt.datetime) -> tuple[list[Phase], float | None]:
        """The phases and the cost; a fault in working them out loses them, not the run's file."""
        try:
            return self.phases(), self.cost(finished)
        except Exception as e:  # noqa: BLE001 (said, and the file is still written)
            self.say(f"e2e {self.stack}: the phases and cost could not be worked out: {type(e).__name__}: {e}")
            return [], None

    def record(self) -> Run:
        finished = self.ended or self.now()
        cfg = self.cfg
        pools = [Pool(name=p.name, vm_size=p.vm_size, spot=spot, min_count=p.min_count, max_count=p.max_count)
                 for p, spot in [(cfg.cluster.system_pool, False), *((g, g.spot) for g in cfg.gpu_pools),
                                 *((c, c.spot) for c in cfg.cpu_pools)]]
        passed = all(s.outcome in (Outcome.OK, Outcome.SKIPPED) for s in self.steps) and \
            all(v.passed for v in self.probes) and not self.leftovers
        found, cost = self._measured(finished)
        run = Run(stack=self.stack, scenario=cfg.scenario, commit=self.commit, region=cfg.location,
                  started=self.started, finished=max(finished, self.started), pools=tuple(pools),
                  steps=tuple(self.steps), phases=tuple(found), probes=tuple(self.probes), drill=self.drill,
                  leftovers=tuple(self.leftovers), cost_usd=cost, passed=passed)
        return self.scrub.run(run)

    def cleanup(self) -> None:
        """The kubeconfig goes; its path stays, so a thread left running finds it gone and calls no kubectl
        (``Tools.kubectl_config``), rather than one without ``--kubeconfig``."""
        if self.kubeconfig_dir is not None:
            shutil.rmtree(self.kubeconfig_dir, ignore_errors=True)


def _tried(work: Callable[[], T], tries: int, errors: tuple[type[Exception], ...], tools: Tools,
           on_retry: Callable[[Exception], None] = lambda e: None) -> T:
    """``work()``, tried up to ``tries`` times ``RETRY_PAUSE_S`` apart while it raises one of ``errors``; the last
    try's error is raised."""
    for _ in range(tries - 1):
        try:
            return work()
        except errors as e:
            on_retry(e)
            tools.sleep(RETRY_PAUSE_S)
    return work()


def _group_tags(tools: Tools, group: str) -> dict[str, str] | None:
    """The resource group's tags, or None where there is no such group; ``ToolFailed`` or ``ValueError`` where az
    cannot say (a caller that cannot tell must not take the group for absent)."""
    if json.loads(tools.az("group", "exists", "--name", group, timeout_s=AZ_S)) is not True:
        return None
    return json.loads(tools.az("group", "show", "--name", group, "--query", "tags", timeout_s=AZ_S) or "null") or {}


def _prepare(stack: str, seams: Seams, settings: Settings, tries: int = 1) -> tuple[E2ERun, list[StateResource]]:
    """The run and what the backend holds of the stack, its state read up to ``tries`` times; ``BadInput`` (exit 2)
    when there is no run to be had."""
    if problem := unknown_stack(stack):
        raise BadInput(problem)
    tools = seams.tools
    started = tools.now()
    try:
        account = json.loads(tools.az("account", "show", "--query", "{id:id, tenant:tenantId}", timeout_s=AZ_S))
    except (ToolFailed, json.JSONDecodeError) as e:
        raise BadInput(f"not signed in to Azure: run az login ({e})") from None
    scrub = Scrubber()
    scrub.hide_environment()
    scrub.hide([account.get("id"), account.get("tenant")])
    commit = seams.commit()
    render = seams.render(stack)  # a config error stops the run here (exit 2), before anything is deployed
    cfg = render.cfg.for_deployment(account["id"])
    def read_state() -> tuple[Deployment, list[StateResource]]:
        deployment = seams.deployment(stack)
        return deployment, deployment.resources()

    def again(e: Exception) -> None:
        seams.say(f"e2e {stack}: the stack's state: {scrub.text(_one_line(str(e)))}; trying again")

    try:
        deployment, made = _tried(lambda: wait(read_state, STATE_S, tools, settings, stack), tries, (Exception,),
                                  tools, again)
    except Exception as e:  # noqa: BLE001 (no backend, no CLI, no stack, no answer: nothing can run)
        raise BadInput(f"pulumi: {scrub.text(_one_line(str(e)))} (docs/e2e.md: what a run needs)") from None
    return E2ERun(stack, seams, settings, render, cfg, deployment, scrub, commit, started), made


def in_use(made: list[StateResource]) -> list[StateResource]:
    """What of a stack's state is a deployment: everything but what an earlier destroy kept on purpose (protected
    data, its resource group and the components above them), which `pulumi up` takes up again and a run's destroy
    keeps again."""
    return [r for r in destroyed_by_exclude_protected(made) if r.custom]


def start(stack: str, seams: Seams, settings: Settings) -> E2ERun:
    """Everything a run needs before it deploys anything; ``BadInput`` (exit 2) when it cannot start."""
    e2e, made = _prepare(stack, seams, settings)
    if deployed := in_use(made):
        raise BadInput(f"stack {stack} already has {len(deployed)} resources in the Pulumi backend: e2e deploys, "
                       f"measures and destroys a stack of its own; destroy it first (pulumi destroy --stack {stack} "
                       "--exclude-protected), or run e2e for a stack that is not deployed")
    # As the workflow's plan checks (ops e2e-matrix): a deployment from another backend, or one a run left, is up in
    # Azure whatever this backend holds.
    group = e2e.cfg.naming.resource_group()
    try:
        tags = _group_tags(e2e.tools, group)
    except (ToolFailed, json.JSONDecodeError) as e:
        raise BadInput(f"could not tell whether stack {stack} is up in Azure: {e}") from None
    if tags is not None and tags.get(LIFETIME) != RETAINED:
        raise BadInput(f"stack {stack} is up in Azure (resource group {group}, environment "
                       f"{tags.get(ENVIRONMENT_TAG)!r}), though this Pulumi backend holds none of it: destroy it "
                       f"where it was deployed from (python -m ops e2e-cleanup --stack {stack} after an end-to-end "
                       "run), or run e2e for a stack that is not deployed")
    if made:
        e2e.say(f"e2e {stack}: the backend keeps {sum(r.protect for r in made)} protected resource(s) of an earlier "
                "destroy (storage.accounts[].protect): `pulumi up` takes them up again and the destroy keeps them")
    return e2e


def cleanup_stack(stack: str, seams: Seams, settings: Settings) -> int:
    """After a run that may not have got to its destroy (its workflow job cancelled or killed, its machine lost):
    destroy what the backend holds of the stack but its protected data, and check for leftovers, as the run would
    have; 0 when nothing is left. Run it only after a run that reached its `pulumi up` (e2e-stack.yml's cleanup job
    requires the run's ``deploying`` output: ``tell_workflow``), so the stack was the run's to deploy. Even then only
    the run's own deployment is destroyed: its resource group says an end-to-end run's environment, or is still the
    one an earlier destroy kept (``lifetime: retained``; the run's `pulumi up` re-tags it, a run killed before that
    leaves it so); one that says another environment (a deploy that came after the run) is left alone."""
    e2e, made = _prepare(stack, seams, settings, tries=CLEANUP_TRIES)
    say = e2e.say
    group = e2e.cfg.naming.resource_group()
    try:  # fails closed, as start() does: a group it cannot read may be someone's deployment
        # No group: nothing of the run's deployment, or what is left outside it.
        tags = _tried(lambda: _group_tags(e2e.tools, group), CLEANUP_TRIES, (ToolFailed, ValueError), e2e.tools) or {}
    except (ToolFailed, ValueError) as e:
        say(f"e2e-cleanup {stack}: could not read its resource group {group} ({_one_line(str(e))}): left alone; "
            "run it again")
        return 1
    if tags and tags.get(ENVIRONMENT_TAG) != E2E_ENVIRONMENT and tags.get(LIFETIME) != RETAINED:
        say(f"e2e-cleanup {stack}: its resource group is environment {tags.get(ENVIRONMENT_TAG)!r}, not an "
            f"end-to-end run's ({E2E_ENVIRONMENT}): another deployment, left alone")
        return 0
    e2e.up_attempted = True
    try:
        if in_use(made):
            say(f"e2e-cleanup {stack}: the backend holds {len(in_use(made))} resources of the run: destroying them")
            try:  # a killed `pulumi` leaves its lock on a self-managed backend
                e2e.deployment.cancel(STATE_S)
            except Exception as e:  # noqa: BLE001 (no lock, or a backend that keeps none: the destroy says)
                say(f"e2e-cleanup {stack}: pulumi cancel: {_one_line(str(e))}")
            e2e.step(StepName.DESTROY, e2e.destroy)
        else:
            e2e.skip(StepName.DESTROY, "the backend holds nothing of the stack but protected data")
            say(f"e2e-cleanup {stack}: the backend holds nothing of the stack but protected data: nothing to destroy")
        outcome = e2e.step(StepName.LEFTOVERS, e2e.check_leftovers)
    finally:
        e2e.cleanup()
    return 0 if outcome == Outcome.OK and all(s.outcome in (Outcome.OK, Outcome.SKIPPED) for s in e2e.steps) else 1


def run(stack: str, seams: Seams, settings: Settings) -> tuple[Run, Path]:
    """Run the stack end to end; the record and the file it was written to. Every step is recorded: one the run did
    not get to as skipped, with why."""
    e2e = start(stack, seams, settings)
    blocked = ""
    try:
        for name, body in ((StepName.PREFLIGHT, e2e.preflight), (StepName.UP, e2e.up), (StepName.PROBES, e2e.probe),
                           (StepName.DRILL, e2e.spot_drill)):
            try:
                if blocked:
                    e2e.skip(name, blocked)
                    continue
                if name == StepName.UP:
                    seams.started()
                outcome = e2e.step(name, body)
            except KeyboardInterrupt:  # between two steps
                e2e.interrupted, outcome = True, Outcome.INTERRUPTED
            if e2e.interrupted:
                blocked = "the run was interrupted"
            elif name in (StepName.PREFLIGHT, StepName.UP) and outcome != Outcome.OK:
                blocked = f"{'the preflight' if name == StepName.PREFLIGHT else '`pulumi up`'} {outcome.value}"
        e2e.step(StepName.DESTROY, e2e.destroy)
        e2e.step(StepName.LEFTOVERS, e2e.check_leftovers)
    finally:
        e2e.cleanup()
    record = e2e.record()
    settings.results.mkdir(parents=True, exist_ok=True)
    path = settings.results / record.file_name
    path.write_text(record.model_dump_json(indent=2) + "\n")
    seams.say(f"e2e {stack}: {'passed' if record.passed else 'FAILED'}; results in {path}")
    return record, path


def exit_code(record: Run) -> int:
    """0 passed; 1 a step, a probe or a leftover failed it (2, bad input, is ``BadInput``'s)."""
    return 0 if record.passed else 1


def git_commit() -> str:
    """The commit the run deploys (``GITHUB_SHA`` in a workflow)."""
    found = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    commit = found.stdout.strip() or os.environ.get("GITHUB_SHA", "")
    if not commit:
        raise BadInput("the run records the commit it deploys: run it from a git checkout")
    return commit


def capacity_preflight(cfg: StackConfig) -> tuple[Outcome, str]:
    """The capacity check (``ops.capacity``, as ``python -m ops capacity`` runs it) for the deployment's subscription:
    ok when every pool fits (at min only: ok, said so), failed when one does not or it could not check."""
    try:
        from azure.core.exceptions import ClientAuthenticationError

        from ops import capacity
        from ops.azure_reads import AzureReadError
    except ImportError as e:
        return Outcome.FAILED, f"the capacity check needs Azure's SDK: make install-azure ({e})"
    needs = capacity.pool_needs(cfg)
    try:
        checks = capacity.check(needs, capacity.read(capacity.connect(cfg.subscription), cfg, needs))
    except ClientAuthenticationError:
        return Outcome.FAILED, "no Azure credential for the capacity check (az login)"
    except AzureReadError as e:
        return Outcome.FAILED, f"capacity not checked: {e}"
    verdict = capacity.worst(checks)
    lines = "; ".join(c.line() for c in checks if c.verdict != capacity.Verdict.FITS)
    if verdict == capacity.Verdict.FITS:
        return Outcome.OK, "every pool fits"
    if verdict == capacity.Verdict.MIN_ONLY:
        return Outcome.OK, f"fits at min only: {lines}"
    return Outcome.FAILED, lines


def _optional(module: str, function: str) -> Any:
    """A step's function from a module that may not be installed yet (None then)."""
    try:
        return getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        return None


def real_seams() -> Seams:
    from offline.render import render_stack
    missing = [tool for tool in TOOLS_NEEDED if shutil.which(tool) is None]
    if missing:
        raise BadInput(f"e2e needs {', '.join(missing)} on PATH (docs/e2e.md: what a run needs)")
    # Deployed as an end-to-end run's environment (every resource's tag), so a push to main leaves it to the run.
    overrides = {f"{PROJECT}:{ENVIRONMENT_TAG}": E2E_ENVIRONMENT}
    return Seams(tools=Tools(own_cluster_only=True),
                 deployment=lambda stack: PulumiStack(stack, REPO_ROOT, overrides),
                 render=render_stack,
                 preflight=capacity_preflight, probes=_optional("ops.e2e.probes", "run_probes"),
                 drill=_optional("ops.e2e.drill", "spot_drill"), commit=git_commit, started=tell_workflow)


DEPLOYING = "deploying"
"""The run step's output (``deploying=true``) that e2e-stack.yml's cleanup job requires."""


def tell_workflow() -> None:
    """In a GitHub Actions step (``GITHUB_OUTPUT`` set), the step's output ``deploying=true``. The runner reads the
    output file after the step ends whatever ended it, a cancel or timeout too (actions/runner ActionRunner.RunAsync:
    ``ProcessFiles`` in a ``finally``), and evaluates job outputs when the job completes (JobExtension.FinalizeJob):
    so the cleanup job runs after a run that got this far, and never after one that stopped at its start, where the
    stack may be someone else's deployment."""
    if path := os.environ.get("GITHUB_OUTPUT"):
        with Path(path).open("a") as out:
            out.write(f"{DEPLOYING}=true\n")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


INTERRUPTS = (signal.SIGTERM, signal.SIGHUP)
"""Taken as a Ctrl-C: a ``kill``, and a closed terminal or dropped SSH session (SIGHUP), which would otherwise end
this process while Pulumi, in a session of its own, went on creating the stack with nobody left to destroy it."""


def _say(text: str) -> None:
    """print, where a closed terminal (EIO) must not stop the destroy that follows the SIGHUP."""
    try:
        print(text, flush=True)
    except OSError:
        pass


def e2e_cleanup_command(args: argparse.Namespace) -> int:
    settings = Settings(timeout_s=args.timeout_minutes * 60)
    seams = real_seams()
    seams.say = _say
    previous = {number: signal.signal(number, _interrupt) for number in INTERRUPTS}
    try:
        return cleanup_stack(args.stack, seams, settings)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def e2e_command(args: argparse.Namespace) -> int:
    settings = Settings(timeout_s=args.timeout_minutes * 60, drill_timeout_s=args.drill_timeout_minutes * 60,
                        keep=args.keep, results=args.results or REPO_ROOT / RESULTS)
    seams = real_seams()
    seams.say = _say
    # Each is a Ctrl-C: the run cancels its step, destroys what it made and writes its file before it ends, which
    # takes as long as the destroy does. A cancelled workflow job gives a step 10 seconds (SIGINT, then SIGTERM 7.5 s
    # later, then a kill 2.5 s after that: GitHub's workflow cancellation reference), and bash does not pass them on:
    # there, e2e-stack.yml's cleanup job destroys the stack.
    previous = {number: signal.signal(number, _interrupt) for number in INTERRUPTS}
    try:
        record, _ = run(args.stack, seams, settings)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return exit_code(record)
