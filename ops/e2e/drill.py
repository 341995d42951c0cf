"""The spot eviction drill: during a training run on a spot GPU pool, evict the run's node through Azure's own
simulate-eviction API, time the new node and the run's resume from the eviction, then run the same training again
without interruption and compare the two runs' final weights.

The run is the scenario's (``Scenario.drill``, ``program/probes.py SpotDrill``): one that starts from nothing each
time, so the uninterrupted run is comparable. ``docker/jobs/train.py`` resumes deterministically and ends with a
JSON summary carrying ``weights_sha256``; its leader logs its first step of each process (``FIRST_STEP``), which
times the resume. The eviction: the node's ``spec.providerID`` names its scale set instance (or, for node
auto-provisioning, its VM), and ``az vmss simulate-eviction`` (``az vm simulate-eviction``) evicts it as Azure
would (Microsoft.Compute ``virtualMachineScaleSets/virtualMachines/simulateEviction``, ``204 No Content``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.runs import Clock, Drill, Phase, PhaseName
from ops.e2e.probes import JOB_NAME_LABEL, ProbeFailed, Probing, finished, job_pods, run_id
from ops.e2e.tools import ToolFailed, Tools
from program.config.schema import StackConfig
from program.probes import JobCopy, JobFromTemplate, SpotDrill
from stacks import REGISTRY

FIRST_STEP = re.compile(r"^step (\d+)/(\d+) first of this process, from step (\d+)$")
CHECKPOINTED = re.compile(r"^step (\d+)/(\d+) loss \S+ checkpointed$")
"""docker/jobs/train.py's lines: a process's first step, and a checkpoint written (the tests hold them to it). The
drill evicts after the first checkpoint, so the run has one to resume from."""
CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name", JOB_NAME_LABEL)
"""Labels and selector the Job controller writes from the Job's uid and name: a copy must not carry the original's
(Kubernetes docs, Jobs: "Specifying your own Pod selector")."""
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


def start_run(p: Probing, plan: SpotDrill, role: str) -> str:
    """Start one run of the drill (``role``: drill or reference); its Job's name."""
    if isinstance(plan.run, JobFromTemplate):
        name = f"{plan.run.template}-{role}-{p.run}"
        p.kubectl("-n", plan.namespace, "create", "job", name, f"--from=cronjob/{plan.run.template}")
    else:
        name = f"{plan.run.job}-{role}-{p.run}"
        copy_job(p, plan.namespace, plan.run, name)
    p.note(f"started job/{name}")
    return name


def copy_job(p: Probing, namespace: str, run: JobCopy, name: str) -> None:
    """A new Job ``name`` with ``run.job``'s spec, less what the Job controller derived from the original."""
    job = json.loads(p.kubectl("-n", namespace, "get", "job", run.job, "-o", "json"))

    def own(labels: Mapping[str, str] | None) -> dict[str, str]:
        return {k: v for k, v in (labels or {}).items() if k not in CONTROLLER_LABELS}

    spec = {k: v for k, v in job["spec"].items() if k not in ("selector", "manualSelector")}
    template = spec["template"]
    spec["template"] = {**template, "metadata": {**template.get("metadata", {}),
                                                 "labels": own(template.get("metadata", {}).get("labels"))}}
    manifest = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": namespace, "labels": own(job["metadata"].get("labels"))},
                "spec": spec}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.json"
        path.write_text(json.dumps(manifest))
        p.kubectl("-n", namespace, "create", "-f", str(path))


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


def spot_drill(stack: str, cfg: StackConfig, outputs: Mapping[str, Any], tools: Tools,
               timeout_s: float) -> tuple[Drill | None, list[Phase]]:
    """Evict a training run's spot node and measure what it costs; (None, []) where the stack's scenario has no
    drill run or its pool is not spot. ``DrillFailed`` (with what was measured) when it cannot finish."""
    plan = REGISTRY[cfg.scenario].drill_of(cfg, cfg.settings)
    if plan is None or not cfg.gpu_pool(plan.pool).spot:
        return None, []
    began = tools.now()
    p = Probing(tools, cfg, outputs, run_id(began), began + dt.timedelta(seconds=min(timeout_s, plan.timeout_s)))
    started: list[str] = []
    node, phases = "", [Phase(name=PhaseName.NODE_REPLACED, clock=Clock.EVICTION, measured_seconds=None,
                              source="not reached"),
                        Phase(name=PhaseName.RUN_RESUMED, clock=Clock.EVICTION, measured_seconds=None,
                              source="not reached")]
    try:
        started.append(start_run(p, plan, "drill"))
        pod, node = p.wait(f"job/{started[0]}'s first checkpoint", lambda: checkpointed(p, plan.namespace, started[0]))
        target = instance_of(json.loads(p.kubectl("get", "node", node, "-o", "json"))["spec"]["providerID"])
        evicted_at = tools.now()
        p.az(*target.evict_args())
        p.note(f"evicted node {node} ({target.name} {target.instance or ''}) at {evicted_at:%H:%M:%S}")
        phases = resumed(p, plan.namespace, started[0], pod, evicted_at)
        drilled = finish(p, plan.namespace, started[0])
        started.append(start_run(p, plan, "reference"))
        reference = finish(p, plan.namespace, started[1])
        match = drilled["weights_sha256"] == reference["weights_sha256"]
        p.note(f"weights {drilled['weights_sha256'][:12]} (evicted) vs {reference['weights_sha256'][:12]} "
               f"(uninterrupted)")
        return Drill(pool=plan.pool, node=node, weights_match=match), phases
    except (ProbeFailed, ToolFailed, KeyError, ValueError) as failure:
        drill = Drill(pool=plan.pool, node=node, weights_match=None) if node else None
        raise DrillFailed(f"spot drill on pool {plan.pool}: {failure}", drill, phases) from None
    finally:
        for job in started:  # their results are in the run's record; the Jobs would hold their pods
            try:
                p.tools.kubectl("-n", plan.namespace, "delete", "job", job, "--ignore-not-found", "--wait=false",
                                timeout_s=60)
            except ToolFailed:
                pass


def checkpointed(p: Probing, namespace: str, job: str) -> tuple[str, str] | None:
    """(pod, node) once the run's pod, still running, has written a checkpoint."""
    for pod in job_pods(p, namespace, job):
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") == "Running" \
                and logged(p, namespace, pod["metadata"]["name"], CHECKPOINTED) is not None:
            return pod["metadata"]["name"], node
    return None


def resumed(p: Probing, namespace: str, job: str, evicted_pod: str, evicted_at: dt.datetime) -> list[Phase]:
    """The eviction clock's phases: the run's first step in a new pod, and the new node it runs on Ready."""
    def first_after() -> tuple[str, str, dt.datetime, str] | None:
        for pod in job_pods(p, namespace, job):
            name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
            if name == evicted_pod or not node:
                continue
            if (found := logged(p, namespace, name, FIRST_STEP)) is not None:
                return name, node, *found
        return None

    pod, node, at, line = p.wait(f"job/{job} to resume in a new pod", first_after)
    resume = Phase(name=PhaseName.RUN_RESUMED, clock=Clock.EVICTION,
                   measured_seconds=max(0.0, (at - evicted_at).total_seconds()), source=f"Pod/{pod} log: {line}")
    joined = json.loads(p.kubectl("get", "node", node, "-o", "json"))
    created, ready = timestamp(joined["metadata"]["creationTimestamp"]), ready_since(joined)
    if ready is not None and created >= evicted_at - dt.timedelta(seconds=5):  # the two clocks: a few seconds apart
        replaced = Phase(name=PhaseName.NODE_REPLACED, clock=Clock.EVICTION,
                         measured_seconds=max(0.0, (ready - evicted_at).total_seconds()), source=f"Node/{node} Ready")
    else:
        replaced = Phase(name=PhaseName.NODE_REPLACED, clock=Clock.EVICTION, measured_seconds=None,
                         source=f"the run resumed on node {node}, which was there before the eviction")
    p.note(f"resumed in {pod} on {node}: {line}")
    return [replaced, resume]
