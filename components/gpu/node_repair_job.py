"""Cordon and drain the GPU nodes that AKS's Node Problem Detector reports sick, so the autoscaler replaces them.

The ``gpu-node-repair`` CronJob runs this file with the standard library only (its ConfigMap holds it; see
``node_repair.py``). NPD's node conditions mark permanent problems that make a node unusable (AKS docs:
node-problem-detector, "Node conditions"); AKS's node auto-repair acts on NotReady nodes only, so nothing else
moves the pods off a node whose GPU is gone.

Each run:
1. cordons every node where one of ``CONDITIONS`` has been True for ``GRACE_SECONDS``, and marks it with
   ``ANNOTATION`` - but never holds more than ``MAX_REPAIRING`` nodes cordoned at once, so a detector that misfires on
   every node cannot empty the cluster (the GpuNodeProblem alert still fires for the rest);
2. evicts the pods of every node it holds through the Eviction API, as ``kubectl drain --ignore-daemonsets``
   does: PodDisruptionBudgets hold, and a pod whose budget refuses now is asked again on the next run.

The evicted pods go Pending, the cluster autoscaler (or NAP) adds a node for them, and removes the empty, cordoned
node after its scale-down delay. A person hands a node back with ``kubectl uncordon``: a marked node that is no
longer cordoned is left alone.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

ANNOTATION = "aksgpu.io/gpu-repair"
"""Set on the nodes this job cordoned: which condition, since when."""
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Api:
    """The few Kubernetes API calls this job makes, as JSON over HTTPS."""

    def __init__(self, base: str, token: str | None = None, context: ssl.SSLContext | None = None):
        self.base, self.token, self.context = base.rstrip("/"), token, context

    @classmethod
    def in_cluster(cls) -> Api:
        """The API server as the pod's service account sees it."""
        with open(f"{SERVICE_ACCOUNT}/token", encoding="utf-8") as f:
            token = f.read().strip()
        base = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
        return cls(base, token, ssl.create_default_context(cafile=f"{SERVICE_ACCOUNT}/ca.crt"))

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(self.base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def get(self, path: str) -> dict[str, Any]:
        status, body = self.call("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {body.get('message', body)}")
        return body


def sick_condition(node: Mapping[str, Any], conditions: Iterable[str], since: datetime) -> dict[str, Any] | None:
    """The first of ``conditions`` that is True on ``node`` and has been since ``since`` or earlier."""
    wanted = set(conditions)
    for condition in node.get("status", {}).get("conditions", []):
        if condition.get("type") in wanted and condition.get("status") == "True":
            changed = datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
            if changed <= since:
                return condition
    return None


def _annotations(node: Mapping[str, Any]) -> Mapping[str, str]:
    return node["metadata"].get("annotations") or {}


def _held(node: Mapping[str, Any]) -> bool:
    """Cordoned by this job and not handed back by a person."""
    return ANNOTATION in _annotations(node) and bool(node.get("spec", {}).get("unschedulable"))


def _evictable(pod: Mapping[str, Any]) -> bool:
    """What ``kubectl drain --ignore-daemonsets`` evicts: not DaemonSet or static pods, nor finished or leaving ones."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    return not any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or [])


def drain(api: Api, node: str) -> list[str]:
    """Ask the Eviction API for every evictable pod on ``node``; what happened, one line per pod."""
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
            raise RuntimeError(f"evicting {ns}/{name}: HTTP {status}: {body.get('message', body)}")
    return done


def repair(api: Api, conditions: Iterable[str], grace: timedelta, max_repairing: int,
           now: datetime | None = None) -> list[str]:
    """One run: cordon what is newly sick within the limit, then drain every node held. What it did, line by line."""
    now = now or datetime.now(UTC)
    conditions = tuple(conditions)
    nodes = api.get("/api/v1/nodes")["items"]
    held = [n["metadata"]["name"] for n in nodes if _held(n)]
    log = []
    for node in nodes:
        name = node["metadata"]["name"]
        if ANNOTATION in _annotations(node):
            continue  # held already, or handed back by a person
        condition = sick_condition(node, conditions, now - grace)
        if condition is None:
            continue
        if len(held) >= max_repairing:
            log.append(f"{name} has {condition['type']} but {len(held)} node(s) are being repaired already: left")
            continue
        mark = f"{condition['type']} since {condition['lastTransitionTime']}"
        status, body = api.call("PATCH", f"/api/v1/nodes/{name}",
                                {"metadata": {"annotations": {ANNOTATION: mark}}, "spec": {"unschedulable": True}},
                                content_type="application/merge-patch+json")
        if status != 200:
            raise RuntimeError(f"cordoning {name}: HTTP {status}: {body.get('message', body)}")
        log.append(f"cordoned {name}: {mark}")
        held.append(name)
    for name in held:
        log.extend(drain(api, name))
    return log


def main() -> int:
    conditions = [c for c in os.environ["CONDITIONS"].split(",") if c]
    lines = repair(Api.in_cluster(), conditions, timedelta(seconds=int(os.environ["GRACE_SECONDS"])),
                   int(os.environ["MAX_REPAIRING"]))
    for line in lines or ["no GPU node to repair"]:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
