"""The GPU node gate: a new GPU node takes workloads only once a check of its own GPUs has passed.

The ``gpu-node-gate`` Deployment runs this file with the standard library only (its ConfigMap holds it and
``kube_api.py``; see ``gate.py``), one pass every ``INTERVAL_SECONDS``. For each node of a GPU pool (``POOLS``):

1. A node without a verdict gets ``GATE_TAINT`` and the verdict ``pending``. NAP's nodes carry the taint from
   birth (the NodePool's ``startupTaints``); an agent pool's get it here, seconds after they register, while their
   driver and device plugin still start (minutes): no GPU pod can land before, as no GPU is advertised yet (the
   stack's GPU workloads also wait for this Deployment). The key is the cluster autoscaler's startup-taint prefix,
   so the autoscaler counts the node as coming, not as a failure to scale for.
2. Once the node advertises its GPUs, a check Job (``gpu_check.py`` in the jobs image, with the pool's figures) runs
   on it, tolerating the taint and taking every GPU the node has.
3. A passed check removes the taint and sets the verdict ``passed``; a failed one sets ``failed: <why>`` and keeps the
   taint: the GpuNodeNotAdmitted alert fires, and GPU node repair treats the node as sick (``node_repair_job.py``).
4. A node of a ``precompiled`` pool whose driver pod cannot pull NVIDIA's precompiled image for the node's kernel
   (NVIDIA builds it some days after the kernel ships) for ``FALLBACK_SECONDS`` is relabelled from ``aksgpu.io/driver=
   precompiled`` to ``compiled``: the GPU operator's compiled NVIDIADriver takes it over (the operator reacts to a
   change of a label its drivers select on), instead of leaving it without GPUs.

A node already running GPU work when the gate first sees it (a deployed stack the gate is added to) gets ``passed
(in service before the gate)`` and is left alone, as are nodes of no GPU pool. A verdict is an annotation:
``kubectl annotate node NAME aksgpu.io/gpu-check-`` runs the check again (the last check's Job is deleted first).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    from components.gpu.kube_api import Api
except ImportError:  # the Deployment runs this file with kube_api.py beside it
    from kube_api import Api  # type: ignore[import-not-found,no-redef]

VERDICT = "aksgpu.io/gpu-check"
"""The gate's verdict on a node: ``pending``, ``passed ...`` or ``failed: ...``."""
DRIVER_LABEL, COMPILED = "aksgpu.io/driver", "compiled"
FALLBACK_ANNOTATION = "aksgpu.io/driver-fallback"
PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff")
CONFLICT_RETRIES = 3


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def job_name(node: str) -> str:
    """The check Job's name: the node's, made short and safe (a Job name is a label value of at most 63)."""
    return f"gpu-check-{hashlib.sha256(node.encode()).hexdigest()[:12]}"


class Gate:
    """One gate pass at a time against the API server, with the settings the Deployment gives it."""

    def __init__(self, api: Api, namespace: str, pools: Mapping[str, Mapping[str, Any]], taint: Mapping[str, str],
                 job: Mapping[str, Any], fallback: timedelta, operator_namespace: str):
        self.api, self.namespace, self.pools, self.taint = api, namespace, pools, dict(taint)
        self.job, self.fallback, self.operator_namespace = job, fallback, operator_namespace

    # Nodes -------------------------------------------------------------------------------------------------

    def pool_of(self, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
        labels = node["metadata"].get("labels") or {}
        return next((p for name, p in self.pools.items() if labels.get(p["label"]) == name), None)

    def tainted(self, node: Mapping[str, Any]) -> bool:
        return any(t.get("key") == self.taint["key"] for t in node.get("spec", {}).get("taints") or [])

    def set_taint(self, node: Mapping[str, Any], on: bool, verdict: str) -> None:
        """Add or remove the gate's taint and set the verdict, in one patch that replaces the taint list only if no
        one changed the node meanwhile (its resourceVersion); on a conflict (the kubelet's status updates change it
        too), again on the node as it is now."""
        for _ in range(CONFLICT_RETRIES):
            meta = node["metadata"]
            others = [t for t in node.get("spec", {}).get("taints") or [] if t.get("key") != self.taint["key"]]
            status, body = self.api.call("PATCH", f"/api/v1/nodes/{meta['name']}", {
                "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {VERDICT: verdict}},
                "spec": {"taints": [*others, self.taint] if on else others}},
                content_type="application/merge-patch+json")
            if status != 409:
                break
            node = self.api.get(f"/api/v1/nodes/{meta['name']}")
        if status != 200:
            raise RuntimeError(f"node {meta['name']}: HTTP {status}: {body.get('message', body)}")

    def in_service(self, node: str, pool: Mapping[str, Any]) -> bool:
        """Whether a pod on ``node`` other than a check already uses the pool's GPUs."""
        query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={node}"})
        for pod in self.api.get(f"/api/v1/pods?{query}")["items"]:
            if pod["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "gpu-check":
                continue
            if pod.get("status", {}).get("phase") not in ("Pending", "Running"):
                continue
            if any(pool["resource"] in (c.get("resources", {}).get("limits") or {})
                   for c in pod.get("spec", {}).get("containers", [])):
                return True
        return False

    def gpus_advertised(self, node: Mapping[str, Any], pool: Mapping[str, Any]) -> bool:
        allocatable = node.get("status", {}).get("allocatable") or {}
        return int(allocatable.get(pool["resource"], "0")) >= pool["request"]

    # The check Job -----------------------------------------------------------------------------------------

    def check_job(self, node: Mapping[str, Any], pool: Mapping[str, Any]) -> dict[str, Any]:
        name = node["metadata"]["name"]
        pod = json.loads(json.dumps(self.job))  # a fresh copy of the template
        pod["nodeSelector"] = {"kubernetes.io/hostname": name}
        pod["tolerations"] = [*pod.get("tolerations", []), *pool["tolerations"]]
        container = pod["containers"][0]
        container["args"] = list(pool["args"])
        limits = container.get("resources", {}).get("limits", {})
        container["resources"] = {**container.get("resources", {}),
                                  "limits": {**limits, pool["resource"]: str(pool["request"])}}
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job_name(name), "labels": {"app.kubernetes.io/name": "gpu-check"},
                             "annotations": {"aksgpu.io/node": name}},
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 900, "ttlSecondsAfterFinished": 3600,
                         "template": {"metadata": {"labels": {"app.kubernetes.io/name": "gpu-check"}},
                                      "spec": {**pod, "restartPolicy": "Never"}}}}

    def job_state(self, node: str) -> tuple[str, str]:
        """(``none``, ``running``, ``passed`` or ``failed``, what it said)."""
        status, body = self.api.call("GET", f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{job_name(node)}")
        if status == 404:
            return "none", ""
        if status != 200:
            raise RuntimeError(f"check Job of {node}: HTTP {status}: {body.get('message', body)}")
        if body.get("metadata", {}).get("deletionTimestamp"):
            return "none", ""  # an earlier check on its way out (a new one is created once it is gone)
        for condition in body.get("status", {}).get("conditions") or []:
            if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
                state = "passed" if condition["type"] == "Complete" else "failed"
                return state, self.job_says(body["metadata"]["uid"]) or condition.get("message", "")
        return "running", ""

    def job_says(self, job_uid: str) -> str:
        """The last line the check printed (its JSON report's failures), from its pod's termination message: the
        pods of this Job (its uid), not of an earlier Job of the same name."""
        query = urllib.parse.urlencode({"labelSelector": f"batch.kubernetes.io/controller-uid={job_uid}"})
        status, body = self.api.call("GET", f"/api/v1/namespaces/{self.namespace}/pods?{query}")
        for pod in body.get("items", []) if status == 200 else []:
            for container in pod.get("status", {}).get("containerStatuses") or []:
                message = (container.get("state", {}).get("terminated") or {}).get("message", "")
                try:
                    return "; ".join(json.loads(message).get("failures", [])) or "passed"
                except ValueError:
                    return message.strip()[-300:]
        return ""

    def start_check(self, node: Mapping[str, Any], pool: Mapping[str, Any]) -> str:
        status, body = self.api.call("POST", f"/apis/batch/v1/namespaces/{self.namespace}/jobs",
                                     self.check_job(node, pool))
        if status == 409:
            return f"the last GPU check of {node['metadata']['name']} is still on its way out: next pass"
        if status not in (200, 201):
            raise RuntimeError(f"check Job of {node['metadata']['name']}: HTTP {status}: "
                               f"{body.get('message', body)}")
        return f"started the GPU check of {node['metadata']['name']}"

    def delete_job(self, node: str) -> None:
        """Delete the node's check Job and its pod, if there is one."""
        self.api.call("DELETE", f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{job_name(node)}"
                                "?propagationPolicy=Background")

    # The precompiled driver's fallback ---------------------------------------------------------------------

    def unpullable_driver_nodes(self, now: datetime) -> dict[str, str]:
        """Nodes whose precompiled driver pod has failed to pull its image for ``fallback``: node → image."""
        query = urllib.parse.urlencode({"labelSelector": "nvidia.com/precompiled=true,"
                                                         "app.kubernetes.io/component=nvidia-driver"})
        stuck = {}
        for pod in self.api.get(f"/api/v1/namespaces/{self.operator_namespace}/pods?{query}")["items"]:
            node, started = pod.get("spec", {}).get("nodeName"), pod["metadata"].get("creationTimestamp")
            if not node or not started or now - _parse_time(started) < self.fallback:
                continue
            for container in pod.get("status", {}).get("containerStatuses") or []:
                waiting = container.get("state", {}).get("waiting") or {}
                if waiting.get("reason") in PULL_ERRORS:
                    stuck[node] = container.get("image", "")
        return stuck

    def fall_back(self, node: str, image: str, now: datetime) -> str:
        self.to_compiled(node, {FALLBACK_ANNOTATION: f"no precompiled driver {image} at {now.isoformat()}"})
        return f"{node}: no precompiled driver ({image}) after {self.fallback}: moved to the compiled driver"

    def to_compiled(self, node: str, annotations: Mapping[str, str] | None = None) -> None:
        self.api.call("PATCH", f"/api/v1/nodes/{node}", {"metadata": {
            "labels": {DRIVER_LABEL: COMPILED}, **({"annotations": dict(annotations)} if annotations else {})}},
            content_type="application/merge-patch+json")

    # One pass ----------------------------------------------------------------------------------------------

    def run_once(self, now: datetime | None = None) -> list[str]:
        now, log = now or datetime.now(UTC), []
        nodes = self.api.get("/api/v1/nodes")["items"]
        stuck = self.unpullable_driver_nodes(now)
        for node in nodes:
            pool = self.pool_of(node)
            if pool is None:
                continue
            name, annotations = node["metadata"]["name"], node["metadata"].get("annotations") or {}
            verdict = annotations.get(VERDICT)
            on_compiled = (node["metadata"].get("labels") or {}).get(DRIVER_LABEL) == COMPILED
            if name in stuck and not on_compiled:
                log.append(self.fall_back(name, stuck[name], now))
            elif FALLBACK_ANNOTATION in annotations and not on_compiled:
                # AKS puts a pool's own labels back on its nodes (a scale or an upgrade of the pool): a node that
                # fell back goes straight back to the compiled driver instead of failing to pull again.
                self.to_compiled(name)
                log.append(f"{name}: its pool's driver label came back; kept on the compiled driver "
                           f"({annotations[FALLBACK_ANNOTATION]})")
            if verdict is None:
                if self.in_service(name, pool):
                    self.set_taint(node, False, "passed (in service before the gate)")
                else:
                    # A verdict taken off to run the check again: the last check's Job (kept an hour) must not
                    # stand for the new one.
                    self.delete_job(name)
                    self.set_taint(node, True, "pending")
                    log.append(f"{name} joined: held until its GPU check passes")
                continue
            if verdict.startswith("passed"):
                if self.tainted(node):
                    self.set_taint(node, False, verdict)
                continue
            if not self.tainted(node):
                continue  # a person took the taint off: the verdict stands as it is
            state, said = self.job_state(name)
            if state == "none" and verdict == "pending" and self.gpus_advertised(node, pool):
                log.append(self.start_check(node, pool))
            elif state == "passed":
                self.set_taint(node, False, f"passed at {now.isoformat()}")
                self.delete_job(name)
                log.append(f"{name} passed its GPU check: admitted")
            elif state == "failed" and verdict == "pending":
                self.set_taint(node, True, f"failed: {said or 'the check failed'}"[:500])
                log.append(f"{name} failed its GPU check ({said}): kept out of service")
        return log


def gate_from_environment() -> Gate:
    return Gate(Api.in_cluster(), os.environ["NAMESPACE"], json.loads(os.environ["POOLS"]),
                json.loads(os.environ["TAINT"]), json.loads(os.environ["CHECK_POD"]),
                timedelta(seconds=int(os.environ["FALLBACK_SECONDS"])), os.environ["OPERATOR_NAMESPACE"])


HEARTBEAT = "/tmp/heartbeat"  # noqa: S108 (the controller pod's own /tmp)
"""Touched after every pass that reached the API server: the liveness probe restarts a controller stuck longer."""


def main() -> int:
    gate, interval = gate_from_environment(), int(os.environ["INTERVAL_SECONDS"])
    while True:
        try:
            for line in gate.run_once():
                print(line, flush=True)
            with open(HEARTBEAT, "w", encoding="utf-8") as beat:
                beat.write(datetime.now(UTC).isoformat())
        except (RuntimeError, OSError, KeyError, ValueError) as error:
            print(f"gate pass failed, next in {interval} s: {error}", flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
