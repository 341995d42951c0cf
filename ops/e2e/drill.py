"""The spot eviction drill: during a training run on a spot GPU pool, evict the run's node through Azure's own
simulate-eviction API, time the new node and the run's resume from the moment the node went, check that the run
went on from its checkpoint rather than from step 0, then run the same training again without interruption and
compare the two runs' final weights.

The run is the scenario's (``Scenario.drill``, ``program/probes.py SpotDrill``): a Job made from its run template, as
``kubectl create job --from=cronjob/...`` makes one, whose checkpoints live on a persistent volume in a folder of its
own Job's name, so the evicted run resumes from them and the uninterrupted one starts from nothing.
``docker/jobs/train.py`` resumes deterministically and ends with a JSON summary carrying ``weights_sha256``; its
leader logs its first step of each process and where it started from (``FIRST_STEP``), which times the resume and
tells a resume from a restart.

**Long enough to be evicted.** ``simulate-eviction`` only schedules the eviction: "The eviction will occur within 30
minutes of calling the API" (Microsoft.Compute ``virtualMachines/simulateEviction``; ``Set-AzVM -SimulateEviction``).
A DigitNet run takes seconds to a minute on a GPU (2.26 ms a step on an H100: docs/results/jobs-benchmark-h100.json),
so the drilled run is paced in wall time whatever the GPU: from step 0 it spreads its steps over ``PACE_S``
(``train.py --pace-seconds``), which outlasts its first checkpoint and Azure's 30 minutes, and checkpoints every
``1/CHECKPOINTS`` of its steps; resumed, it runs at full speed. The uninterrupted run is not paced (pacing only
sleeps). Both train on synthetic digits (``--data synthetic``), so neither depends on the MNIST mirror answering twice.

**The eviction clock** starts when the node went, as Kubernetes recorded it: the earliest of the node's ``Ready``
condition leaving True, its ``deletionTimestamp``, the evicted pod's container terminating and its
``DisruptionTarget`` condition; a node deleted between two looks, none of those seen, counts from the look that
missed it (at most ``EVICTION_POLL_S`` late). The delay from the API call to that moment is kept too
(``Drill.eviction_seconds``). The eviction itself: the node's ``spec.providerID`` names its scale set instance (or,
for node auto-provisioning, its VM), and ``az vmss simulate-eviction`` (``az vm simulate-eviction``) evicts it as
Azure would (``virtualMachineScaleSets/virtualMachines/simulateEviction``, ``204 No Content``).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.runs import Clock, Drill, Phase, PhaseName
from ops.e2e.probes import ProbeFailed, Probing, finished, job_pods, run_id
from ops.e2e.tools import ToolFailed, Tools
from program.config.schema import StackConfig
from program.probes import SpotDrill
from stacks import REGISTRY

FIRST_STEP = re.compile(r"^step (\d+)/(\d+) first of this process, from step (\d+)$")
CHECKPOINTED = re.compile(r"^step (\d+)/(\d+) loss \S+ checkpointed$")
"""docker/jobs/train.py's lines: a process's first step (and the step it started from), and a checkpoint written (the
tests hold them to it). The drill evicts after the first checkpoint, so the run has one to resume from."""
PACE_S = 45 * 60
"""How long the drilled run's first process takes: its first checkpoint (``PACE_S / CHECKPOINTS``), Azure's 30
minutes to evict after the call, and 12 minutes to spare."""
CHECKPOINTS = 20
"""The drilled run checkpoints every ``1/CHECKPOINTS`` of its steps."""
EVICTION_WITHIN_S = 30 * 60
"""Azure evicts within 30 minutes of the simulate-eviction call (above)."""
EVICTION_SLACK_S = 5 * 60
"""How much longer the drill waits for the node to go before it says Azure did not evict it."""
EVICTION_POLL_S = 5.0
"""Between two looks at the node and the pod while the eviction is due."""
DEFAULT_STEPS = 2000
"""train.py's ``--steps`` when the command names none."""
INSTANTIATE = "cronjob.kubernetes.io/instantiate"
_PROVIDER = re.compile(
    r"^azure:///subscriptions/[^/]+/resourceGroups/(?P<group>[^/]+)/providers/Microsoft\.Compute/"
    r"(?:virtualMachineScaleSets/(?P<vmss>[^/]+)/virtualMachines/(?P<instance>[^/]+)|virtualMachines/(?P<vm>[^/]+))$",
    re.IGNORECASE)
"""A node's providerID: a scale set instance, or a standalone VM (cloud-provider-azure pkg/provider/azure_vmss.go
GetNodeNameByProviderID)."""


class DrillFailed(Exception):
    """The drill could not finish: why (one line), and what it measured before that."""

    def __init__(self, why: str, drill: Drill | None = None, phases: list[Phase] | None = None) -> None:
        super().__init__(why)
        self.drill, self.phases = drill, phases or []


@dataclass(frozen=True)
class Instance:
    """What ``az`` evicts: a scale set instance, or a VM (``vmss`` None)."""

    group: str
    name: str
    """The scale set, or the VM."""
    instance: str | None = None

    def evict_args(self) -> list[str]:
        if self.instance is None:
            return ["vm", "simulate-eviction", "--resource-group", self.group, "--name", self.name]
        return ["vmss", "simulate-eviction", "--resource-group", self.group, "--name", self.name,
                "--instance-id", self.instance]


def instance_of(provider_id: str) -> Instance:
    """The scale set instance (or VM) behind a node's ``spec.providerID``."""
    found = _PROVIDER.match(provider_id)
    if found is None:
        raise DrillFailed(f"providerID {provider_id!r} names no Azure VM or scale set instance")
    if found["vm"]:
        return Instance(found["group"], found["vm"])
    instance = found["instance"]
    # Some instance ids carry their scale set's name: k8s-agentpool-36841236-vmss_1 (azure_vmss.go).
    if instance.lower().startswith(found["vmss"].lower()) and "_" in instance:
        instance = instance.rsplit("_", 1)[1]
    return Instance(found["group"], found["vmss"], instance)


def timestamp(text: str) -> dt.datetime:
    """An RFC 3339 time as Kubernetes writes it (``kubectl logs --timestamps``: nanoseconds; conditions: seconds)."""
    found = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if found is None:
        raise ValueError(f"{text!r} is no RFC 3339 time")
    micro = (found[2] or "0")[:6].ljust(6, "0")
    zone = "+00:00" if found[3] == "Z" else found[3]
    return dt.datetime.fromisoformat(f"{found[1]}.{micro}{zone}")


def ready_since(node: Mapping[str, Any]) -> dt.datetime | None:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return timestamp(condition["lastTransitionTime"])
    return None


# The runs.

def trainer(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template's train.py container."""
    found = [c for c in pod.get("containers") or [] if "train.py" in (c.get("command") or []) + (c.get("args") or [])]
    if len(found) != 1:
        raise ProbeFailed(f"the drill's run has {len(found)} train.py containers, not one")
    return found[0]


def steps_of(container: Mapping[str, Any]) -> int:
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return int(words[words.index("--steps") + 1]) if "--steps" in words else DEFAULT_STEPS


def run_args(steps: int, paced: bool) -> list[str]:
    """What the drill adds to the run's train.py command (argparse takes an option's last value)."""
    return ["--checkpoint-every", str(max(1, steps // CHECKPOINTS)), "--data", "synthetic",
            *(["--pace-seconds", str(PACE_S)] if paced else [])]


def job_from_template(cronjob: Mapping[str, Any], name: str, extra: list[str]) -> dict[str, Any]:
    """The Job ``kubectl create job NAME --from=cronjob/...`` makes (kubectl pkg/cmd/create/create_job.go,
    ``createJobFromCronJob``: the template's labels and annotations, ``cronjob.kubernetes.io/instantiate: manual``,
    the CronJob as its controller), its train.py command given ``extra``."""
    template = cronjob["spec"]["jobTemplate"]
    meta = template.get("metadata") or {}
    spec = copy.deepcopy(template["spec"])
    container = trainer(spec["template"]["spec"])
    key = "args" if container.get("args") else "command"
    container[key] = [*container[key], *extra]
    owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": cronjob["metadata"]["name"],
             "uid": cronjob["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": cronjob["metadata"]["namespace"],
                         "labels": dict(meta.get("labels") or {}),
                         "annotations": {**(meta.get("annotations") or {}), INSTANTIATE: "manual"},
                         "ownerReferences": [owner]},
            "spec": spec}


def start_run(p: Probing, plan: SpotDrill, cronjob: Mapping[str, Any], role: str, paced: bool) -> str:
    """Start one run of the drill (``role``: drill or reference); its Job's name."""
    name = f"{plan.run.template}-{role}-{p.run}"
    steps = steps_of(trainer(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.json"
        path.write_text(json.dumps(job_from_template(cronjob, name, run_args(steps, paced))))
        p.kubectl("-n", plan.namespace, "create", "-f", str(path))
    p.note(f"started job/{name}" + (f", paced over {PACE_S // 60} min" if paced else ""))
    return name


def logged(p: Probing, namespace: str, pod: str, line: re.Pattern[str]) -> tuple[dt.datetime, str] | None:
    """When ``pod`` first logged a ``line``, and the line; None before it has."""
    try:
        text = p.kubectl("-n", namespace, "logs", f"pod/{pod}", "--timestamps", "--tail=-1")
    except ToolFailed:
        return None  # not started yet: no log to read
    for found in text.splitlines():
        stamp, _, said = found.partition(" ")
        if line.match(said.strip()):
            return timestamp(stamp), said.strip()
    return None


def summary(p: Probing, namespace: str, job: str) -> dict[str, Any]:
    """The JSON summary its succeeded pod ended with."""
    done = [pod["metadata"]["name"] for pod in job_pods(p, namespace, job)
            if (pod.get("status") or {}).get("phase") == "Succeeded"]
    if not done:
        raise ProbeFailed(f"job/{job} has no succeeded pod to read a summary from")
    text = p.kubectl("-n", namespace, "logs", f"pod/{done[-1]}", "--tail=-1")
    for line in reversed(text.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and "weights_sha256" in found:
            return found
    raise ProbeFailed(f"job/{job}'s log ends without a summary holding weights_sha256")


def finish(p: Probing, namespace: str, job: str) -> dict[str, Any]:
    ok, how = p.wait(f"job/{job} to finish", lambda: finished(p, namespace, "job", job))
    p.note(how)
    if not ok:
        raise ProbeFailed(how)
    return summary(p, namespace, job)


# The eviction.

def checkpointed(p: Probing, namespace: str, job: str) -> tuple[str, str] | None:
    """(pod, node) once the run's pod, still running, has written a checkpoint."""
    for pod in job_pods(p, namespace, job):
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") == "Running" \
                and logged(p, namespace, pod["metadata"]["name"], CHECKPOINTED) is not None:
            return pod["metadata"]["name"], node
    return None


def _get(p: Probing, *args: str) -> dict[str, Any] | None:
    text = p.kubectl(*args, "--ignore-not-found", "-o", "json").strip()
    return json.loads(text) if text else None


def went(p: Probing, namespace: str, pod: str, node: str) -> tuple[dt.datetime, str] | None:
    """When the evicted node went and how Kubernetes recorded it (the earliest record), once it has; ``ProbeFailed``
    when the run finished on the node first (the eviction came too late for it)."""
    seen: list[tuple[dt.datetime, str]] = []
    if (found := _get(p, "-n", namespace, "get", "pod", pod)) is not None:
        status = found.get("status") or {}
        if status.get("phase") == "Succeeded":
            raise ProbeFailed(f"pod {pod} finished its run on node {node} before Azure's eviction took effect")
        seen += [(timestamp(c["lastTransitionTime"]), f"Pod/{pod} DisruptionTarget ({c.get('reason', '')})")
                 for c in status.get("conditions") or [] if c.get("type") == "DisruptionTarget"
                 and c.get("status") == "True"]
        seen += [(timestamp(ended), f"Pod/{pod} container {s.get('name')} terminated")
                 for s in status.get("containerStatuses") or []
                 if (ended := ((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))]
    if (found := _get(p, "get", "node", node)) is not None:
        if deleted := (found.get("metadata") or {}).get("deletionTimestamp"):
            seen.append((timestamp(deleted), f"Node/{node} deleted"))
        seen += [(timestamp(c["lastTransitionTime"]), f"Node/{node} Ready {c.get('status')} ({c.get('reason', '')})")
                 for c in (found.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready" and c.get("status") != "True"]
    elif not seen:
        seen.append((p.tools.now(), f"Node/{node} gone (the first look that missed it: at most "
                                    f"{EVICTION_POLL_S:.0f} s late)"))
    return min(seen) if seen else None


def resumed(p: Probing, namespace: str, job: str, evicted_pod: str, evicted_at: dt.datetime,
            called: dt.datetime) -> tuple[list[Phase], int]:
    """The eviction clock's phases (the run's first step in a new pod, the new node it runs on Ready), and the step
    the new pod started from."""
    def first_after() -> tuple[str, str, dt.datetime, str] | None:
        for pod in job_pods(p, namespace, job):
            name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
            if name == evicted_pod or not node:
                continue
            if (found := logged(p, namespace, name, FIRST_STEP)) is not None:
                return name, node, *found
        return None

    pod, node, at, line = p.wait(f"job/{job} to go on in a new pod", first_after)
    matched = FIRST_STEP.match(line)
    start = int(matched[3]) if matched else 0
    resume = Phase(name=PhaseName.RUN_RESUMED, clock=Clock.EVICTION,
                   measured_seconds=max(0.0, (at - evicted_at).total_seconds()), source=f"Pod/{pod} log: {line}")
    joined = json.loads(p.kubectl("get", "node", node, "-o", "json"))
    created, ready = timestamp(joined["metadata"]["creationTimestamp"]), ready_since(joined)
    if ready is not None and created >= called - dt.timedelta(seconds=5):  # the two clocks: a few seconds apart
        replaced = Phase(name=PhaseName.NODE_REPLACED, clock=Clock.EVICTION,
                         measured_seconds=max(0.0, (ready - evicted_at).total_seconds()), source=f"Node/{node} Ready")
    else:
        replaced = Phase(name=PhaseName.NODE_REPLACED, clock=Clock.EVICTION, measured_seconds=None,
                         source=f"the run went on on node {node}, which was there before the eviction")
    p.note(f"went on in {pod} on {node}: {line}")
    return [replaced, resume], start


def spot_drill(stack: str, cfg: StackConfig, outputs: Mapping[str, Any], tools: Tools,
               timeout_s: float) -> tuple[Drill | None, list[Phase]]:
    """Evict a training run's spot node and measure what it costs; (None, []) where the stack's scenario has no
    drill run or its pool is not spot. ``DrillFailed`` (with what was measured) when it cannot finish."""
    plan = REGISTRY[cfg.scenario].drill_of(cfg, cfg.settings)
    if plan is None or not cfg.gpu_pool(plan.pool).spot:
        return None, []
    began = tools.now()
    p = Probing(tools, cfg, outputs, run_id(began), began + dt.timedelta(seconds=timeout_s))
    started: list[str] = []
    drill: Drill | None = None
    phases = [Phase(name=name, clock=Clock.EVICTION, measured_seconds=None, source="not reached")
              for name in (PhaseName.NODE_REPLACED, PhaseName.RUN_RESUMED)]
    try:
        cronjob = json.loads(p.kubectl("-n", plan.namespace, "get", "cronjob", plan.run.template, "-o", "json"))
        started.append(start_run(p, plan, cronjob, "drill", paced=True))
        pod, node = p.wait(f"job/{started[0]}'s first checkpoint", lambda: checkpointed(p, plan.namespace, started[0]))
        target = instance_of(json.loads(p.kubectl("get", "node", node, "-o", "json"))["spec"]["providerID"])
        called = tools.now()
        p.az(*target.evict_args())
        p.note(f"asked Azure to evict node {node} ({target.name} {target.instance or ''}) at {called:%H:%M:%S}")
        drill = Drill(pool=plan.pool, node=node, weights_match=None)
        evicted_at, how = p.wait(f"node {node} to go (Azure evicts within {EVICTION_WITHIN_S // 60} min of the call)",
                                 lambda: went(p, plan.namespace, pod, node), every=EVICTION_POLL_S,
                                 within=EVICTION_WITHIN_S + EVICTION_SLACK_S)
        drill = drill.model_copy(update={"eviction_seconds": max(0.0, (evicted_at - called).total_seconds())})
        p.note(f"node {node} went at {evicted_at:%H:%M:%S}: {how}")
        phases, start = resumed(p, plan.namespace, started[0], pod, evicted_at, called)
        drill = drill.model_copy(update={"resumed_from": start})
        if start == 0:
            raise ProbeFailed("the evicted run started again from step 0: a restart, not a resume (its checkpoints "
                              "did not outlive the node)")
        drilled = finish(p, plan.namespace, started[0])
        started.append(start_run(p, plan, cronjob, "reference", paced=False))
        reference = finish(p, plan.namespace, started[1])
        p.note(f"weights {drilled['weights_sha256'][:12]} (evicted) vs {reference['weights_sha256'][:12]} "
               f"(uninterrupted)")
        return drill.model_copy(update={"weights_match": drilled["weights_sha256"] == reference["weights_sha256"]}), \
            phases
    except (ProbeFailed, ToolFailed, KeyError, ValueError, IndexError) as failure:
        raise DrillFailed(f"spot drill on pool {plan.pool}: {failure}", drill, phases) from None
    finally:
        for job in started:  # their results are in the run's record; the Jobs would hold their pods
            try:
                p.tools.kubectl("-n", plan.namespace, "delete", "job", job, "--ignore-not-found", "--wait=false",
                                timeout_s=60)
            except ToolFailed:
                pass
