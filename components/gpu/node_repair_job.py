"""Cordon and drain the GPU nodes that report sick, so the autoscaler replaces them; alert-only where it cannot.

The ``gpu-node-repair`` CronJob runs this file with the standard library only (its ConfigMap holds it and
``kube_api.py``; see ``node_repair.py``). AKS's node auto-repair acts on NotReady nodes only, so nothing else moves
the pods off a node whose GPU is gone. A node is sick when:

- one of ``CONDITIONS`` has been True for ``GRACE_SECONDS``: what AKS's Node Problem Detector sets on nodes where
  AKS installed the driver (AKS node-problem-detector, "Node conditions"; it runs no GPU checks on pools whose driver
  the GPU operator installs, gpu-health-monitoring: Limitations);
- its GPU operator's DCGM exporter (every GPU node runs one) reports a fatal XID (one NVIDIA's XID catalogue says
  needs a GPU reset, a node restart or support), a failed row remap, or fewer GPUs than the node's size has: the
  health signals of the pools NPD does not check;
- the GPU node gate's acceptance check failed on it (``node_gate_job.py``).

Each run, per pool (``POOLS``):
1. a sick node of a pool that can add a node (below its maximum, and its minimum not equal to it) is cordoned and
   marked with ``ANNOTATION``, at most ``MAX_REPAIRING`` per pool at once, so a misfiring detector cannot empty a
   pool; a node held longer than ``HOLD_TIMEOUT_SECONDS`` no longer counts against that limit (the alerts say it
   needs a person);
2. a sick node of a pool that cannot add one is not cordoned (its workloads would wait with nowhere to go): it is
   marked with ``BLOCKED``, and the alerts fire, which say how to replace it by hand;
3. every held node's pods are evicted through the Eviction API, as ``kubectl drain --ignore-daemonsets`` does:
   PodDisruptionBudgets hold, a refused or failed eviction is logged and asked again on the next run.

The evicted pods go Pending, the cluster autoscaler (or NAP) adds a node for them, and removes the empty, cordoned
node after its scale-down delay. A person hands a node back with ``kubectl uncordon``: a marked node that is no
longer cordoned is left alone while it stays sick, and unmarked once it is well, so a later fault repairs it again.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    from components.gpu.kube_api import Api
except ImportError:  # the CronJob runs this file with kube_api.py beside it
    from kube_api import Api  # type: ignore[import-not-found,no-redef]

ANNOTATION = "aksgpu.io/gpu-repair"
"""Set on the nodes this job cordoned: why, and since when (``<reason> at <time>``)."""
BLOCKED = "aksgpu.io/gpu-repair-blocked"
"""Set on a sick node of a pool that cannot add a node: why it was not cordoned."""
GATE_ANNOTATION = "aksgpu.io/gpu-check"
"""The GPU node gate's verdict on a node (``node_gate_job.py``): ``failed: ...`` makes it sick."""
FATAL_XIDS = frozenset({46, 48, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158})
"""XIDs NVIDIA's catalogue (docs.nvidia.com/deploy/xid-errors, analyzing-xid-catalog) lists with the immediate
action RESET_GPU, RESTART_BM or a workflow that ends in a reset (48: double-bit ECC; 74: NVLink; 79: fallen off the
bus; 95: uncontained error): the GPU is unusable until then."""
EXPORTER_PORT = 9400


@dataclass(frozen=True)
class Pool:
    """What the job needs of a GPU pool: how to find its nodes, its bounds, its GPUs per node."""

    name: str
    label: str
    """The node label whose value is the pool's name (agent pools' and NAP's differ)."""
    min_count: int
    max_count: int
    gpus: int

    def can_grow(self, nodes: int) -> bool:
        """Whether the autoscaler can add a node for the evicted pods: below the maximum, not fixed at a size."""
        return self.min_count != self.max_count and nodes < self.max_count


def sick_condition(node: Mapping[str, Any], conditions: Iterable[str], since: datetime) -> dict[str, Any] | None:
    """The first of ``conditions`` that is True on ``node`` and has been since ``since`` or earlier."""
    wanted = set(conditions)
    for condition in node.get("status", {}).get("conditions", []):
        if condition.get("type") in wanted and condition.get("status") == "True":
            changed = datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
            if changed <= since:
                return condition
    return None


SAMPLE = re.compile(r'^(\w+)\{([^}]*)\}\s+(\S+)', re.MULTILINE)


def samples(metrics: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """Each labelled sample of an exporter's page (Prometheus text format): its name, labels and value."""
    for name, labels, value in SAMPLE.findall(metrics):
        yield name, dict(re.findall(r'(\w+)="([^"]*)"', labels)), float(value)


def dcgm_problem(metrics: str, gpus: int) -> str | None:
    """What the DCGM exporter's page says is wrong with the node's GPUs, or None."""
    seen: set[str] = set()
    for name, labels, number in samples(metrics):
        gpu = labels.get("gpu")
        if gpu is None:
            continue
        seen.add(gpu)
        if name == "DCGM_FI_DEV_XID_ERRORS" and int(number) in FATAL_XIDS:
            return f"XID {int(number)} on GPU {gpu}"
        if name == "DCGM_FI_DEV_ROW_REMAP_FAILURE" and number > 0:
            return f"row remapping failed on GPU {gpu}"
    if seen and len(seen) < gpus:
        return f"GPUMissing: {len(seen)} of {gpus} GPUs report"
    return None


def exporter_metrics(api: Api, node: str, namespace: str, selector: str,
                     fetch: Callable[[str], str]) -> str | None:
    """The metrics page of the DCGM exporter pod on ``node``, or None when none answers."""
    query = urllib.parse.urlencode({"labelSelector": selector, "fieldSelector": f"spec.nodeName={node}"})
    for pod in api.get(f"/api/v1/namespaces/{namespace}/pods?{query}")["items"]:
        ip = pod.get("status", {}).get("podIP")
        if ip and pod.get("status", {}).get("phase") == "Running":
            try:
                return fetch(f"http://{ip}:{EXPORTER_PORT}/metrics")
            except OSError:
                return None
    return None


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (a pod's address in the cluster)
        return answer.read().decode()


def _annotations(node: Mapping[str, Any]) -> Mapping[str, str]:
    return node["metadata"].get("annotations") or {}


def _held(node: Mapping[str, Any]) -> bool:
    """Cordoned by this job and not handed back by a person."""
    return ANNOTATION in _annotations(node) and bool(node.get("spec", {}).get("unschedulable"))


def _held_since(node: Mapping[str, Any]) -> datetime | None:
    mark = _annotations(node).get(ANNOTATION, "")
    try:
        return datetime.fromisoformat(mark.rsplit(" at ", 1)[1])
    except (IndexError, ValueError):
        return None


def _evictable(pod: Mapping[str, Any]) -> bool:
    """What ``kubectl drain --ignore-daemonsets`` evicts: not DaemonSet or static pods, nor finished or leaving ones."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    return not any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or [])


def drain(api: Api, node: str) -> list[str]:
    """Ask the Eviction API for every evictable pod on ``node``; what happened, one line per pod. A failed eviction
    is a line too (asked again next run): one pod under two budgets (HTTP 500) must not stop the others."""
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    done = []
    for pod in api.get(f"/api/v1/pods?fieldSelector={selector}")["items"]:
        if not _evictable(pod):
            continue
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        status, body = api.call("POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
        if status in (200, 201):
            done.append(f"evicted {ns}/{name} from {node}")
        elif status == 429:  # a PodDisruptionBudget says not now
            done.append(f"eviction of {ns}/{name} from {node} refused for now: {body.get('message', '')}")
        elif status != 404:  # 404: the pod left meanwhile
            done.append(f"eviction of {ns}/{name} from {node} failed (HTTP {status}: "
                        f"{body.get('message', body)}); asked again next run")
    return done


def _pool_of(node: Mapping[str, Any], pools: Mapping[str, Pool]) -> Pool | None:
    labels = node["metadata"].get("labels") or {}
    return next((p for p in pools.values() if labels.get(p.label) == p.name), None)


@dataclass(frozen=True)
class Settings:
    conditions: tuple[str, ...]
    grace: timedelta
    max_repairing: int
    """Nodes held cordoned at once, per pool."""
    hold_timeout: timedelta
    pools: Mapping[str, Pool]
    exporter_namespace: str = "gpu-operator"
    exporter_selector: str = "app=nvidia-dcgm-exporter"


def why_sick(api: Api, node: Mapping[str, Any], pool: Pool, settings: Settings, now: datetime,
             fetch: Callable[[str], str]) -> str | None:
    condition = sick_condition(node, settings.conditions, now - settings.grace)
    if condition is not None:
        return f"{condition['type']} since {condition['lastTransitionTime']}"
    verdict = _annotations(node).get(GATE_ANNOTATION, "")
    if verdict.startswith("failed"):
        return f"GPU check {verdict}"
    page = exporter_metrics(api, node["metadata"]["name"], settings.exporter_namespace, settings.exporter_selector,
                            fetch)
    return dcgm_problem(page, pool.gpus) if page else None


def repair(api: Api, settings: Settings, now: datetime | None = None,
           fetch: Callable[[str], str] = http_text) -> list[str]:
    """One run: mark, cordon within each pool's limit, drain every node held. What it did, line by line."""
    now = now or datetime.now(UTC)
    nodes = api.get("/api/v1/nodes")["items"]
    log = []
    members: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        pool = _pool_of(node, settings.pools)
        if pool is not None:
            members.setdefault(pool.name, []).append(node)
    held: list[str] = []
    for pool_name, group in members.items():
        pool = settings.pools[pool_name]
        counted = [n for n in group if _held(n) and not ((since := _held_since(n)) and now - since
                                                           > settings.hold_timeout)]
        held += [n["metadata"]["name"] for n in group if _held(n)]
        for node in group:
            name, annotations = node["metadata"]["name"], _annotations(node)
            if _held(node):
                if node not in counted:
                    log.append(f"{name} has been cordoned longer than {settings.hold_timeout}: replace it by hand "
                               "(docs/observability.md: Sick GPU nodes)")
                continue
            reason = why_sick(api, node, pool, settings, now, fetch)
            if ANNOTATION in annotations:  # handed back by a person
                if reason is None:
                    api.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {ANNOTATION: None}}})
                    log.append(f"{name} is well again after it was handed back: unmarked")
                continue
            if reason is None:
                if BLOCKED in annotations:
                    api.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {BLOCKED: None}}})
                continue
            if not pool.can_grow(len(group)):
                why = (f"{reason}; not cordoned: pool {pool.name} cannot add a node ({len(group)} of at most "
                       f"{pool.max_count}, at least {pool.min_count})")
                if annotations.get(BLOCKED) != why:
                    api.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {BLOCKED: why}}})
                log.append(f"{name}: {why}")
                continue
            if len(counted) >= settings.max_repairing:
                log.append(f"{name} is sick ({reason}) but {len(counted)} node(s) of pool {pool.name} are being "
                           "repaired already: left")
                continue
            mark = f"{reason} at {now.isoformat()}"
            status, body = api.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {ANNOTATION: mark,
                                                                                              BLOCKED: None}},
                                                               "spec": {"unschedulable": True}})
            if status != 200:
                log.append(f"cordoning {name} failed (HTTP {status}: {body.get('message', body)}); next run")
                continue
            log.append(f"cordoned {name}: {mark}")
            counted.append(node)
            held.append(name)
    for name in held:
        log.extend(drain(api, name))
    return log


def settings_from_environment() -> Settings:
    pools = {name: Pool(name=name, **spec) for name, spec in json.loads(os.environ["POOLS"]).items()}
    return Settings(conditions=tuple(c for c in os.environ["CONDITIONS"].split(",") if c),
                    grace=timedelta(seconds=int(os.environ["GRACE_SECONDS"])),
                    max_repairing=int(os.environ["MAX_REPAIRING"]),
                    hold_timeout=timedelta(seconds=int(os.environ["HOLD_TIMEOUT_SECONDS"])), pools=pools)


def main() -> int:
    for line in repair(Api.in_cluster(), settings_from_environment()) or ["no GPU node to repair"]:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
