"""Every stack's Kubernetes objects on a real control plane (testcluster/): Kubernetes' own API server (admission,
Pod Security, CRD schemas, immutable fields), scheduler and controllers, the pinned Kueue and JobSet controllers,
and simulated AKS nodes (KWOK) for every pool at its maximum. Each stack lives once per run, in turn on one cluster
(``life``): its nodes join, its objects are applied as Pulumi creates them, then applied again, its workloads run,
its GPU node controllers act with their own ServiceAccounts, and its objects are deleted last first; the tests
read what happened. Marker ``cluster``: ``pytest -m "not cluster"`` runs the rest."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from components.autoscaling.kueue import manager_config
from components.gpu import node_gate_job, node_repair_job
from components.gpu.gate import GATE_TAINT_KEY
from components.training.jobset import API_VERSION as JOBSET_API
from components.vocabulary import SECURITY_EXCEPTION, SecurityException
from tests import cluster_support as cs
from tests.helpers import STACKS, jobset_templates, pod_spec

pytestmark = pytest.mark.cluster
CLUSTERS = 2
"""Control planes a run starts, each on its own xdist worker (``--dist loadgroup``) with every other stack: a
stack's life mostly waits on controllers, so two halve the wall time on 2 cores."""
STACK_PARAMS = [pytest.param(s, marks=pytest.mark.xdist_group(f"cluster-{i % CLUSTERS}")) for i, s in enumerate(STACKS)]

SETTLE_SECONDS = 60
"""How long a stack's workloads may take to run once applied (KWOK starts a scheduled pod at once)."""
PODS_READY_SECONDS = 20
"""Kueue's all-or-nothing timeout on the test cluster (the stacks' own is 30 or 60 minutes)."""


@pytest.fixture(scope="session")
def cluster(renders):
    testcluster = pytest.importorskip("testcluster.cluster")
    namespaces = sorted({ns for r in renders.values() for ns in kueue_namespaces(r)})
    config = manager_config(namespaces, job_sets=True)
    config["waitForPodsReady"]["timeout"] = f"{PODS_READY_SECONDS}s"
    with testcluster.Cluster(kueue_config=config) as c:
        cs.wait_for_garbage_collector(cs.Admin.of(c))
        yield c


def kueue_namespaces(render) -> list[str]:
    for release in render.of_type("kubernetes:helm.sh/v3:Release"):
        if release.inputs.get("chart", "").endswith("/kueue"):
            text = release.revealed["values"]["managerConfig"]["controllerManagerConfigYaml"]
            selector = yaml.safe_load(text)["managedJobsNamespaceSelector"]["matchExpressions"][0]
            return selector["values"]
    return []


@dataclass
class Life:
    """What happened to one stack on the cluster."""

    refused: list[str] = field(default_factory=list)
    """What the API server refused on apply (admission, schemas, Pod Security)."""
    second_apply: str = ""
    """What a second apply of the same objects changes (``kubectl diff``)."""
    not_running: dict[str, str] = field(default_factory=dict)
    """Workload → why its pods did not all run (the scheduler's reason)."""
    misplaced: dict[str, str] = field(default_factory=dict)
    """Pod → the node it landed on, where that node is not of the pool it asks for."""
    runs: dict[str, str] = field(default_factory=dict)
    """Each on-demand run (a Job from a suspended CronJob, a JobSet from a run template) → how it ended."""
    pull_ahead: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Pull-ahead DaemonSet → (pods scheduled, nodes of its pool)."""
    repair: dict[str, Any] = field(default_factory=dict)
    gate: list[str] = field(default_factory=list)
    """The gate controller's lines over a new node's admission."""
    changed_jobs: dict[str, str] = field(default_factory=dict)
    """Each Job → what the API server answers to its pod template changed (a dry-run apply)."""
    exception: dict[str, str] = field(default_factory=dict)
    """An InfiniBand namespace's pod as rendered, and each way past its exception → what admission answered."""
    left_behind: list[str] = field(default_factory=list)
    """What the deletion in Pulumi's order did not finish (a namespace stuck Terminating, a finalizer)."""
    owner_claims: dict[str, str] = field(default_factory=dict)
    """Each claim the runs are owned by → how its deletion went while runs it owns were there (``_ClaimWatch``)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Each phase's wall seconds."""


_lives: dict[str, Life | Exception] = {}


def life(stack: str, cluster, render) -> Life:
    """The stack's one life on the cluster (each test reads it; a failure to live fails each of them)."""
    if stack not in _lives:
        try:
            _lives[stack] = _live(cluster, render)
        except Exception as error:  # noqa: BLE001 (kept, and raised for every test of the stack)
            _lives[stack] = error
    found = _lives[stack]
    if isinstance(found, Exception):
        raise found
    return found


def _live(cluster, render) -> Life:
    found, admin = Life(), cs.Admin.of(cluster)
    clock = time.monotonic()

    def lap(phase: str) -> None:
        nonlocal clock
        found.seconds[phase], clock = round(time.monotonic() - clock, 1), time.monotonic()

    nodes = cs.pool_nodes(render, "max")
    for n in nodes:
        admin.call("POST", "/api/v1/nodes", n)
    admin.until("nodes Ready", lambda: all(_ready(x) for x in admin.items("/api/v1/nodes")))
    waves = [[cs.manifest(r) for r in wave] for wave in cs.kubernetes_objects(render)]
    crds = cs.crds_for(o for wave in waves for o in wave)
    found.refused += cs.apply_waves(cluster, [crds])
    if crds:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                        *[f"crd/{c['metadata']['name']}" for c in crds])
    lap("nodes and CRDs")
    try:
        found.refused += cs.apply_waves(cluster, waves)
        lap("apply")
        found.second_apply = cs.changed_on_second_apply(cluster, waves)
        found.changed_jobs = _change_job_templates(admin, waves)
        lap("second apply")
        found.exception = _exception_probe(admin, waves)
        found.not_running, found.misplaced = _settled(admin, waves)
        found.pull_ahead = _pull_ahead(admin, waves, nodes)
        lap("workloads")
        found.runs = _runs(admin, cluster, waves, render.outputs)
        lap("runs")
        found.repair = _repair(admin, render, nodes)
        lap("repair")
        found.gate = _gate(admin, render, waves)
        lap("gate")
    finally:
        watch = _ClaimWatch(admin, render)
        found.left_behind = cs.delete_waves(cluster, waves)
        found.owner_claims = watch.stopped()
        found.left_behind += [f"namespace {n} still {_phase(admin, n)}" for n in _namespaces(waves)
                              if _phase(admin, n) != "gone"]
        for n in admin.items("/api/v1/nodes"):
            _remove_node(admin, n["metadata"]["name"])
        lap("delete")
    return found


def _remove_node(admin: cs.Admin, name: str) -> None:
    """A node scaled away: the node, then its pods with its VM (no DaemonSet puts one back on a node that is gone;
    the pod GC would take 40 s to notice them)."""
    admin.call("DELETE", f"/api/v1/nodes/{name}")
    for pod in admin.items("/api/v1/pods", fieldSelector=f"spec.nodeName={name}"):
        meta = pod["metadata"]
        admin.call("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}?gracePeriodSeconds=0")


def _ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))


HELD = "kept foregroundDeletion while runs it owns were there"
DELETE_DEPENDENTS = "foregroundDeletion"
"""The finalizer a foreground deletion puts on the owner (metav1.FinalizerDeleteDependents)."""


class _ClaimWatch:
    """Watches, while the stack is deleted, each claim its run templates name as the runs' owner: whether it keeps
    ``foregroundDeletion`` while runs it owns are there (``HELD``) or lets it go with one there.

    The harness holds each run with a finalizer of its own (``FINALIZER``) until the collector has marked it deleting
    and ``GRACE`` has passed, so the claim is always seen deleting with its runs there, and a collector that would
    drop the claim's finalizer early has the time to."""

    FINALIZER = "aksgpu.test/claim-watch"
    GRACE = 1.0
    EVERY = 0.1

    def __init__(self, admin: cs.Admin, render):
        self.admin, self.stop = admin, threading.Event()
        claims = {(j["metadata"]["namespace"], ref["name"]) for j in jobset_templates(render).values()
                  for ref in j["metadata"].get("ownerReferences", []) if ref["kind"] == "PersistentVolumeClaim"}
        self.seen: dict[str, str] = {}
        self.held: dict[tuple[str, str], list[str]] = {}
        for ns, name in sorted(claims):
            status, claim = admin.call("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
            runs = self._runs(ns, claim["metadata"]["uid"]) if status == 200 else []
            self.seen[f"{ns}/{name}"] = "not seen deleting with a run it owns there" if runs else \
                "owned no run when the stack was deleted"
            self.held[(ns, name)] = [f"/apis/{JOBSET_API}/namespaces/{ns}/jobsets/{r['metadata']['name']}"
                                     for r in runs]
            for path in self.held[(ns, name)]:
                self._finalizer(path, keep=True)
        self.thread = threading.Thread(target=self._look, daemon=True)
        self.thread.start()

    def _runs(self, ns: str, uid: str) -> list[dict[str, Any]]:
        return [j for j in self.admin.items(f"/apis/{JOBSET_API}/namespaces/{ns}/jobsets")
                if any(r["uid"] == uid for r in j["metadata"].get("ownerReferences", []))]

    def _finalizer(self, path: str, keep: bool) -> None:
        """Add or remove ``FINALIZER`` (at the read resourceVersion: the collector adds its own meanwhile)."""
        for _ in range(20):
            status, run = self.admin.call("GET", path)
            if status == 404:
                return
            meta = run["metadata"]
            finalizers = [f for f in meta.get("finalizers", []) if f != self.FINALIZER] + ([self.FINALIZER] * keep)
            status, body = self.admin.call("PATCH", path, {"metadata": {
                "finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}},
                content_type="application/merge-patch+json")
            if status != 409:
                assert status == 200, body
                return
        raise RuntimeError(f"{path}: its finalizers kept changing")

    def _look(self) -> None:
        acted: dict[tuple[str, str], float] = {}
        try:
            while not self.stop.is_set():
                for (ns, name), paths in self.held.items():
                    status, claim = self.admin.call("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
                    if paths and status == 404:  # gone with runs held: only a collector that let go early
                        self._release(ns, name)
                    meta = claim.get("metadata", {}) if status == 200 else {}
                    if not paths or not meta.get("deletionTimestamp"):
                        continue
                    runs = self._runs(ns, meta["uid"])
                    if runs and DELETE_DEPENDENTS not in meta.get("finalizers", []):
                        self.seen[f"{ns}/{name}"] = (f"let {DELETE_DEPENDENTS} go while "
                                                     f"jobset/{runs[0]['metadata']['name']} it owns was there")
                    elif runs and not self.seen[f"{ns}/{name}"].startswith("let"):
                        self.seen[f"{ns}/{name}"] = HELD
                    if all(r["metadata"].get("deletionTimestamp") for r in runs):
                        if time.monotonic() - acted.setdefault((ns, name), time.monotonic()) > self.GRACE:
                            self._release(ns, name)
                self.stop.wait(self.EVERY)
        except Exception as error:  # noqa: BLE001 (told as the verdict, where a dead thread would say nothing)
            self.seen = dict.fromkeys(self.seen, f"the watch failed: {error!r}")

    def _release(self, ns: str, name: str) -> None:
        for path in self.held[(ns, name)]:
            self._finalizer(path, keep=False)
        self.held[(ns, name)] = []

    def stopped(self) -> dict[str, str]:
        """Stop watching, let go of every run still held; what was seen."""
        self.stop.set()
        self.thread.join()
        for ns, name in list(self.held):
            self._release(ns, name)
        return self.seen


def _namespaces(waves) -> list[str]:
    return [o["metadata"]["name"] for wave in waves for o in wave if o["kind"] == "Namespace"]


def _phase(admin: cs.Admin, namespace: str) -> str:
    status, body = admin.call("GET", f"/api/v1/namespaces/{namespace}")
    return "gone" if status == 404 else body.get("status", {}).get("phase", "?")


WORKLOADS = {"Deployment": "deployments", "DaemonSet": "daemonsets", "Job": "jobs"}


def _settled(admin: cs.Admin, waves) -> tuple[dict[str, str], dict[str, str]]:
    """Wait until every Deployment is ready, every DaemonSet's pods run and every Job completed; then why not,
    for what did not, and the pods on a node outside the pool they ask for."""
    workloads = [o for wave in waves for o in wave if o["kind"] in WORKLOADS]
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        waiting = {f"{o['kind']}/{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in workloads
                   if not _done(admin, o)}
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in admin.items("/api/v1/nodes")}
    misplaced = {}
    for o in workloads:
        for pod in _pods_of(admin, o):
            selector = pod["spec"].get("nodeSelector") or {}
            on = pod["spec"].get("nodeName")
            if on and any(nodes.get(on, {}).get(k) != v for k, v in selector.items()):
                misplaced[pod["metadata"]["name"]] = on
    return {name: _why(admin, o) for name, o in waiting.items()}, misplaced


def _get(admin: cs.Admin, o: dict) -> dict:
    return admin.get(cs.path_of(o, WORKLOADS[o["kind"]]))


def _done(admin: cs.Admin, o: dict) -> bool:
    status = _get(admin, o).get("status", {})
    if o["kind"] == "Deployment":
        return status.get("readyReplicas", 0) == o["spec"].get("replicas", 1)
    if o["kind"] == "DaemonSet":
        return status.get("numberReady", -1) == status.get("desiredNumberScheduled", -2)
    return any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", []))


def _pods_of(admin: cs.Admin, o: dict) -> list[dict]:
    namespace = o["metadata"]["namespace"]
    if o["kind"] == "Job":
        selector = f"batch.kubernetes.io/job-name={o['metadata']['name']}"
    else:
        selector = ",".join(f"{k}={v}" for k, v in o["spec"]["selector"]["matchLabels"].items())
    return admin.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)


def _why(admin: cs.Admin, o: dict) -> str:
    """The scheduler's or Kueue's reason a workload has not all run."""
    reasons = []
    for pod in _pods_of(admin, o):
        for c in pod.get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False":
                reasons.append(c.get("message", c.get("reason", "")))
    if not reasons and o["kind"] == "Job":
        job = _get(admin, o)
        reasons.append("suspended (not admitted)" if job["spec"].get("suspend") else json.dumps(job.get("status")))
    return "; ".join(sorted(set(reasons))) or "no pod"


def _runs(admin: cs.Admin, cluster, waves, outputs) -> dict[str, str]:
    """Start every on-demand run as the stack's outputs tell users to (``kubectl create job --from=cronjob/...``;
    the JobSet a run-template ConfigMap holds), with Kueue admitting the queued ones; how each ended."""
    ended = {}
    for o in (o for wave in waves for o in wave):
        namespace, name = o["metadata"].get("namespace"), o["metadata"]["name"]
        if o["kind"] == "CronJob" and o["spec"].get("suspend"):
            made = [j for j in admin.items(f"/apis/batch/v1/namespaces/{namespace}/jobs")
                    if any(r.get("name") == name for r in j["metadata"].get("ownerReferences", []))]
            if made:
                ended[f"CronJob/{name}"] = f"a suspended template started {len(made)} Job(s) by itself"
                continue
            job = f"{name}-run"[:52]
            cluster.kubectl("-n", namespace, "create", "job", f"--from=cronjob/{name}", job)
            ended[f"CronJob/{name}"] = _ended(admin, f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}")
        elif o["kind"] == "ConfigMap" and "jobset.json" in o.get("data", {}):
            # The stack's own submit command, as a user runs it (the built kubectl first on PATH).
            (submit,) = [v for v in outputs.values() if isinstance(v, str) and f"get configmap {name} " in v]
            kubectl = cluster.layout.bin["kubectl"]
            subprocess.run(["bash", "-euo", "pipefail", "-c", submit], check=True, capture_output=True, text=True,
                           env={**cluster.env, "PATH": f"{kubectl.parent}:{os.environ['PATH']}"})
            jobset = json.loads(o["data"]["jobset.json"])["metadata"]["name"]
            path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{jobset}"
            ended[f"JobSet/{jobset}"] = _ended(admin, path)
    return ended


def _ended(admin: cs.Admin, path: str) -> str:
    """``Completed`` or ``Complete`` once the run is done, else its conditions after the wait."""
    def done():
        conditions = admin.get(path).get("status", {}).get("conditions", [])
        return next((c["type"] for c in conditions if c["status"] == "True" and c["type"] in
                     ("Complete", "Completed", "Failed")), None)
    try:
        return admin.until(path, done, timeout=SETTLE_SECONDS)
    except TimeoutError:
        return json.dumps(admin.get(path).get("status", {}))[:400]


def _change_job_templates(admin: cs.Admin, waves) -> dict[str, str]:
    """Each Job applied again (dry run, as Pulumi's field manager) with an environment variable added to its pod
    template, as a new image or argument would change it: what the API server answers."""
    found = {}
    for job in (o for wave in waves for o in wave if o["kind"] == "Job"):
        changed = json.loads(json.dumps(job))
        container = changed["spec"]["template"]["spec"]["containers"][0]
        container["env"] = [*container.get("env", []), {"name": "CHANGED", "value": "1"}]
        status, body = admin.call(
            "PATCH", f"{cs.path_of(job, 'jobs')}?fieldManager={cs.FIELD_MANAGER}&force=true&dryRun=All", changed,
            content_type="application/apply-patch+yaml")
        found[f"{job['metadata']['namespace']}/{job['metadata']['name']}"] = (
            "accepted" if status == 200 else body.get("message", str(status)))
    return found


def _privileged(pod: dict) -> None:
    # The API server itself refuses privileged without privilege escalation (an invalid pair), before admission.
    pod["containers"][0]["securityContext"].update(privileged=True, allowPrivilegeEscalation=True)


def _set(path: str, value: Any):
    """A change to the pod spec at ``path`` (dots; a digit indexes a list)."""
    def change(pod: dict) -> None:
        *parents, last = path.split(".")
        for key in parents:
            pod = pod[int(key)] if key.isdigit() else pod.setdefault(key, {})
        pod[last] = value
    return change


PAST_THE_EXCEPTION = {
    "privileged container": _privileged,
    "privileged init container": lambda pod: pod.setdefault("initContainers", []).append(
        {**pod["containers"][0], "name": "init", "securityContext": {
            **pod["containers"][0]["securityContext"], "privileged": True, "allowPrivilegeEscalation": True}}),
    "SYS_ADMIN": _set("containers.0.securityContext.capabilities.add", ["IPC_LOCK", "SYS_ADMIN"]),
    "privilege escalation": _set("containers.0.securityContext.allowPrivilegeEscalation", True),
    "host network": _set("hostNetwork", True),
    "host PID": _set("hostPID", True),
    "hostPath volume": lambda pod: pod.setdefault("volumes", []).append({"name": "host", "hostPath": {"path": "/"}}),
    "host port": _set("containers.0.ports", [{"containerPort": 8080, "hostPort": 8080}]),
    "unconfined seccomp": _set("securityContext.seccompProfile", {"type": "Unconfined"}),
    "unconfined container AppArmor": _set("containers.0.securityContext.appArmorProfile", {"type": "Unconfined"}),
    "sysctl": _set("securityContext.sysctls", [{"name": "kernel.shm_rmid_forced", "value": "0"}]),
    "SELinux role": _set("securityContext.seLinuxOptions", {"role": "sysadm_r"}),
}
"""What the rdma-memory-lock exception must not let through (Pod Security baseline, the namespace enforcing
privileged), each a change to the namespace's own InfiniBand pod."""


def _exception_probe(admin: cs.Admin, waves) -> dict[str, str]:
    """The InfiniBand pod of each rdma-memory-lock namespace, as rendered and with each change of
    ``PAST_THE_EXCEPTION``, created with ``dryRun=All`` (admission runs, nothing is stored), and a privileged
    ephemeral container added to the pod as ``kubectl debug`` does: what admission answered."""
    found: dict[str, str] = {}
    for ns in (o for wave in waves for o in wave if o["kind"] == "Namespace"
               and o["metadata"].get("labels", {}).get(SECURITY_EXCEPTION) == SecurityException.RDMA_MEMORY_LOCK):
        name = ns["metadata"]["name"]
        template = next(json.loads(o["data"]["jobset.json"]) for wave in waves for o in wave
                        if o["kind"] == "ConfigMap" and o["metadata"].get("namespace") == name
                        and "jobset.json" in o.get("data", {}))
        spec = template["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pods = f"/api/v1/namespaces/{name}/pods"

        def create(pod_spec_: dict, dry: bool = True, name: str = name, pods: str = pods) -> tuple[int, dict]:
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "exception-probe", "namespace": name},
                   "spec": pod_spec_}
            return admin.call("POST", f"{pods}?dryRun=All" if dry else pods, pod)

        status, body = create(json.loads(json.dumps(spec)))
        found["as rendered"] = str(status) if status != 201 else "admitted"
        for what, change in PAST_THE_EXCEPTION.items():
            changed = json.loads(json.dumps(spec))
            change(changed)
            status, body = create(changed)
            found[what] = "admitted" if status == 201 else body.get("message", str(status))
        status, body = create(json.loads(json.dumps(spec)), dry=False)
        assert status == 201, body
        debug = {**spec["containers"][0], "name": "debug", "securityContext": {"privileged": True}}
        for key in ("resources", "ports", "readinessProbe", "livenessProbe", "startupProbe"):
            debug.pop(key, None)
        status, body = admin.call("PATCH", f"{pods}/exception-probe/ephemeralcontainers?dryRun=All",
                                  {"spec": {"ephemeralContainers": [debug]}},
                                  content_type="application/strategic-merge-patch+json")
        found["privileged ephemeral container"] = "admitted" if status == 200 else body.get("message", str(status))
        # A pod admitted earlier is not judged again on a metadata update (a controller's finalizer, a label).
        status, body = admin.call("PATCH", f"{pods}/exception-probe", {"metadata": {"labels": {"probe": "updated"}}},
                                  content_type="application/merge-patch+json")
        found["metadata update"] = "admitted" if status == 200 else body.get("message", str(status))
        admin.call("DELETE", f"{pods}/exception-probe?gracePeriodSeconds=0")
    return found


def _pull_ahead(admin: cs.Admin, waves, nodes) -> dict[str, tuple[int, int]]:
    found = {}
    for o in (o for wave in waves for o in wave):
        if o["kind"] == "DaemonSet" and o["metadata"]["namespace"].startswith("pull-ahead-"):
            selector = pod_spec(o)["nodeSelector"]
            pool = sum(all(n["metadata"]["labels"].get(k) == v for k, v in selector.items()) for n in nodes)
            found[o["metadata"]["name"]] = (_get(admin, o)["status"].get("numberReady", 0), pool)
    return found


def _repair(admin: cs.Admin, render, nodes) -> dict[str, Any]:
    """The repair script, as its ServiceAccount, on a GPU node that reports XIDErrors: cordoned and drained where
    its pool can add a node, marked and left in service where it cannot."""
    cron = next((r.revealed for r in render.of_type("kubernetes:batch/v1:CronJob")
                 if r.name == "gpu-node-repair-job"), None)
    if cron is None:
        return {}
    env = {e["name"]: e["value"] for e in pod_spec(cron)["containers"][0]["env"] if "value" in e}
    pools = {name: node_repair_job.Pool(name=name, **spec) for name, spec in json.loads(env["POOLS"]).items()}
    settings = node_repair_job.Settings(conditions=tuple(env["CONDITIONS"].split(",")), grace=timedelta(0),
                                        max_repairing=int(env["MAX_REPAIRING"]), hold_timeout=timedelta(hours=1),
                                        pools=pools)
    pool = next(iter(pools.values()))
    members = [n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get(pool.label) == pool.name]
    if not members:
        return {}
    if len(members) > max(pool.min_count, 1) and pool.min_count != pool.max_count:
        _remove_node(admin, members.pop())  # below its maximum: the autoscaler may add one
    sick = members[0]
    since = (datetime.now(UTC) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, body = admin.call("PATCH", f"/api/v1/nodes/{sick}/status", {"status": {"conditions": [
        {"type": "XIDErrors", "status": "True", "reason": "XIDErrors", "message": "XID 79",
         "lastTransitionTime": since, "lastHeartbeatTime": since}]}},
        content_type="application/strategic-merge-patch+json")
    assert status == 200, body
    namespace = cron["metadata"]["namespace"]
    api = admin.as_service_account(namespace, pod_spec(cron)["serviceAccountName"])
    log = node_repair_job.repair(api, settings, fetch=lambda url: "")
    after = admin.get(f"/api/v1/nodes/{sick}")
    evictable = [p for p in admin.items("/api/v1/pods", fieldSelector=f"spec.nodeName={sick}")
                 if node_repair_job._evictable(p)]
    return {"pool": pool, "can_grow": pool.can_grow(len(members)), "log": log,
            "cordoned": bool(after["spec"].get("unschedulable")),
            "annotations": after["metadata"].get("annotations", {}), "left_on_node": len(evictable)}


def _gate(admin: cs.Admin, render, waves) -> list[str]:
    """The gate controller, as its ServiceAccount, over a new GPU node: held, checked, admitted."""
    deployment = next((o for wave in waves for o in wave if o["kind"] == "Deployment"
                       and o["metadata"]["name"] == "gpu-node-gate"), None)
    if deployment is None:
        return []
    spec = pod_spec(deployment)
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"] if "value" in e}
    pools = json.loads(env["POOLS"])
    name, pool = next(iter(pools.items()))
    vm_size = next(r.revealed["vmSize"] for r in render.resources if r.type.endswith(":AgentPool")
                   and r.revealed["agentPoolName"] == name) if pool["label"].endswith("agentpool") else None
    if vm_size is None:
        vm_size = next(q["values"][0] for r in render.of_type("kubernetes:karpenter.sh/v1:NodePool")
                       for q in r.revealed["spec"]["template"]["spec"]["requirements"]
                       if q["key"] == "karpenter.azure.com/sku-name")
    # It joins as a node does, its GPUs advertised only once the driver and device plugin run (minutes later).
    new = cs.node(f"aks-{name}-new-vmss000099", name, vm_size, pool_label=pool["label"],
                  taints=[{k: t[k] for k in ("key", "value", "effect") if k in t} for t in pool["tolerations"]
                          if t["key"] != GATE_TAINT_KEY and t.get("operator") == "Equal"])
    node_name = new["metadata"]["name"]
    admin.call("POST", "/api/v1/nodes", new)
    admin.until("the new node Ready", lambda: _ready(admin.get(f"/api/v1/nodes/{node_name}")))
    namespace = deployment["metadata"]["namespace"]
    api = admin.as_service_account(namespace, spec["serviceAccountName"])
    controller = node_gate_job.Gate(api, env["NAMESPACE"], pools, json.loads(env["TAINT"]),
                                    json.loads(env["CHECK_POD"]), timedelta(seconds=int(env["FALLBACK_SECONDS"])),
                                    env["OPERATOR_NAMESPACE"])
    lines = controller.run_once()
    # A patch on a node changed meanwhile (the kubelet's status updates do it) is refused as a conflict; the gate
    # reads the node afresh, as its ServiceAccount, and patches again.
    stale = admin.get(f"/api/v1/nodes/{node_name}")
    admin.call("PATCH", f"/api/v1/nodes/{node_name}", {"metadata": {"labels": {"aksgpu.io/changed": "meanwhile"}}},
               content_type="application/merge-patch+json")
    controller.set_taint(stale, True, "pending")
    gpus = cs.gpu_resources(render, name, vm_size)
    status, body = admin.call("PATCH", f"/api/v1/nodes/{node_name}/status", {"status": {
        "capacity": gpus, "allocatable": gpus}}, content_type="application/strategic-merge-patch+json")
    assert status == 200, body
    deadline, verdict = time.monotonic() + SETTLE_SECONDS, ""
    while time.monotonic() < deadline:
        lines += controller.run_once()
        verdict = admin.get(f"/api/v1/nodes/{node_name}")["metadata"]["annotations"].get(node_gate_job.VERDICT, "")
        if verdict.startswith(("passed", "failed")):
            break
        time.sleep(0.5)
    lines.append(f"verdict: {verdict}")
    _remove_node(admin, node_name)
    return lines


# What each stack must show ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_every_object_is_accepted_by_the_api_server_with_pod_security_enforced(stack, cluster, render_of):
    assert life(stack, cluster, render_of(stack)).refused == []


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_a_second_apply_of_the_same_render_changes_nothing(stack, cluster, render_of):
    assert life(stack, cluster, render_of(stack)).second_apply == ""


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_a_changed_job_template_is_refused_by_the_api_server_and_replaced_by_pulumi(stack, cluster, render_of):
    """The API server refuses a Job's pod template changed in place (immutable). Pulumi replaces a Job whose
    ``.spec.template`` changed (pulumi-kubernetes provider/pkg/provider/diff.go ``forceNew``, batch/v1 Job) instead of
    patching it; under its fixed name the old one must go first, or ``pulumi up`` fails on the name."""
    render = render_of(stack)
    answers = life(stack, cluster, render).changed_jobs
    assert {job: said for job, said in answers.items() if "field is immutable" not in said} == {}
    jobs = render.of_type("kubernetes:batch/v1:Job")
    assert [j.name for j in jobs if not j.delete_before_replace] == []


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_every_workload_runs_on_its_pool_when_the_pools_are_at_their_maximum(stack, cluster, render_of):
    found = life(stack, cluster, render_of(stack))
    assert found.not_running == {} and found.misplaced == {}


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_every_on_demand_run_is_admitted_and_runs_and_no_template_starts_one_by_itself(stack, cluster, render_of):
    """Suspended CronJobs are templates (``kubectl create job --from=cronjob/...``), run templates hold JobSets:
    each run, queued in Kueue where the stack has a queue, is admitted and completes on the pools at their maximum
    (KWOK completes a Job's pods once they run); JobSets start all their pods."""
    runs = life(stack, cluster, render_of(stack)).runs
    assert {run: how for run, how in runs.items() if how not in ("Complete", "Completed")} == {}


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_the_pull_ahead_daemon_sets_land_on_every_node_of_their_pool(stack, cluster, render_of):
    for daemon_set, (scheduled, nodes) in life(stack, cluster, render_of(stack)).pull_ahead.items():
        assert scheduled == nodes > 0, daemon_set


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_node_repair_as_its_service_account_drains_a_sick_node_only_where_its_pool_can_replace_it(
        stack, cluster, render_of):
    found = life(stack, cluster, render_of(stack)).repair
    if not found:
        pytest.skip("no GPU node repair in this stack")
    if not found["can_grow"]:  # at its maximum, or fixed at one size
        assert not found["cordoned"] and "cannot add a node" in found["annotations"][node_repair_job.BLOCKED]
    else:
        assert found["cordoned"] and found["annotations"][node_repair_job.ANNOTATION].startswith("XIDErrors")
        assert found["left_on_node"] == 0, found["log"]


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_the_gate_as_its_service_account_holds_a_new_gpu_node_checks_it_and_admits_it(stack, cluster, render_of):
    lines = life(stack, cluster, render_of(stack)).gate
    if not lines:
        pytest.skip("no GPU node gate in this stack")
    assert any(line.endswith("held until its GPU check passes") for line in lines), lines
    assert any(line.startswith("started the GPU check") for line in lines), lines
    assert lines[-1].startswith("verdict: passed at"), lines


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_an_infiniband_namespace_admits_its_own_pods_and_nothing_past_ipc_lock(stack, cluster, render_of):
    """The namespace enforces privileged Pod Security so its pods may add IPC_LOCK; its ValidatingAdmissionPolicy
    holds every other pod there to baseline (components/kubernetes/security.py RDMA_POD_RULES), ``kubectl debug``
    included."""
    found = life(stack, cluster, render_of(stack)).exception
    if not found:
        pytest.skip("no rdma-memory-lock namespace in this stack")
    assert (found.pop("as rendered"), found.pop("metadata update")) == ("admitted", "admitted")
    assert {what: said for what, said in found.items() if "ValidatingAdmissionPolicy" not in said} == {}


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_a_claim_that_owns_runs_is_deleted_only_after_them(stack, cluster, render_of):
    """Pulumi deletes the claim in the foreground, and its runs block that (components/training/jobset.py): it keeps
    its foregroundDeletion finalizer until they are gone. Let go earlier, the garbage collector may count the claim,
    still there for its protection finalizer, as a live owner, and never delete the runs that hold it."""
    claims = life(stack, cluster, render_of(stack)).owner_claims
    if not claims:
        pytest.skip("no claim owns runs in this stack")
    assert claims == dict.fromkeys(claims, HELD)


@pytest.mark.parametrize("stack", STACK_PARAMS)
def test_deleting_in_pulumis_reverse_order_leaves_nothing_behind(stack, cluster, render_of):
    assert life(stack, cluster, render_of(stack)).left_behind == []
