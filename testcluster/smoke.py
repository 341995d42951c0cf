#!/usr/bin/env python3
"""End-to-end check that the test cluster behaves like a cluster: admission, scheduling, controllers.

1. Pod Security: a namespace labelled pod-security.kubernetes.io/enforce=restricted refuses a privileged pod.
2. Scheduling on a simulated AKS GPU node (agentpool label, taint sku=gpu:NoSchedule, nvidia.com/gpu: 1): a
   tolerating GPU pod is bound to it and Running/Ready; one without the toleration stays Pending.
3. Kueue: a Job labelled kueue.x-k8s.io/queue-name is suspended, admitted by a ClusterQueue through a LocalQueue,
   runs on the GPU node and completes.
4. JobSet: a JobSet creates its child Jobs, which complete; a queued JobSet is admitted by Kueue as one workload.

Run: ``python3 testcluster/smoke.py`` (exit status 0 when every check passes).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

try:
    from .cluster import GPU_TAINT, Cluster, aks_node
except ImportError:
    from cluster import GPU_TAINT, Cluster, aks_node

PAUSE = "registry.k8s.io/pause:3.10"  # never pulled: KWOK runs no containers
GPU_NODE, SYSTEM_NODE = "aks-gpu-12345678-vmss000000", "aks-system-12345678-vmss000000"
GPU_TOLERATION = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def wait_for(what: str, check, timeout: float = 90, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def get(c: Cluster, *args: str) -> dict:
    return json.loads(c.kubectl("get", *args, "-o", "json").stdout)


def namespace(c: Cluster, name: str, labels: dict | None = None) -> None:
    c.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
    c.wait_for_default_sa(name)


def pod(name: str, ns: str, *, gpus: int = 0, tolerate_gpu: bool = False, privileged: bool = False) -> dict:
    container = {"name": "main", "image": PAUSE, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    if gpus:
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    if privileged:
        container["securityContext"] = {"privileged": True}
    spec = {"containers": [container]}
    if tolerate_gpu:
        spec["tolerations"] = [GPU_TOLERATION]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def job_template(gpus: int = 0) -> dict:
    container = {"name": "main", "image": PAUSE, "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}
    if gpus:
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
        container["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


def check_pod_security(c: Cluster) -> str:
    namespace(c, "smoke-restricted", {"pod-security.kubernetes.io/enforce": "restricted",
                                      "pod-security.kubernetes.io/enforce-version": "latest"})
    p = c.kubectl("create", "-f", "-", input=json.dumps(pod("privileged", "smoke-restricted", privileged=True)),
                  check=False)
    assert p.returncode != 0 and "violates PodSecurity" in p.stderr, f"privileged pod not refused: {p.stderr}"
    return p.stderr.strip().splitlines()[-1][:160]


def check_gpu_scheduling(c: Cluster) -> str:
    namespace(c, "smoke-gpu")
    c.kubectl("create", "-f", "-", input=json.dumps(pod("gpu-pod", "smoke-gpu", gpus=1, tolerate_gpu=True)))
    c.kubectl("create", "-f", "-", input=json.dumps(pod("no-toleration", "smoke-gpu", gpus=1)))
    c.kubectl("wait", "--for=condition=Ready", "pod/gpu-pod", "-n", "smoke-gpu", "--timeout=60s", timeout=70)
    got = get(c, "pod", "gpu-pod", "-n", "smoke-gpu")
    assert got["spec"]["nodeName"] == GPU_NODE and got["status"]["phase"] == "Running", got["status"]
    pending = wait_for("the untolerating pod's Unschedulable condition", lambda: next(
        (cond for cond in get(c, "pod", "no-toleration", "-n", "smoke-gpu")["status"].get("conditions", [])
         if cond["type"] == "PodScheduled" and cond["reason"] == "Unschedulable"), None))
    c.kubectl("delete", "pod", "gpu-pod", "-n", "smoke-gpu", "--wait=true", "--timeout=60s", timeout=70)
    return f"gpu-pod Running on {GPU_NODE}; no-toleration Pending ({pending['message'][:90]})"


def check_kueue(c: Cluster) -> str:
    namespace(c, "team-a")
    c.apply([
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"},
         "spec": {"nodeLabels": {"kubernetes.azure.com/agentpool": "gpu"}, "tolerations": [GPU_TOLERATION]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpu"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
             "flavors": [{"name": "gpu", "resources": [
                 {"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "32Gi"},
                 {"name": "nvidia.com/gpu", "nominalQuota": "1"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "team-a", "namespace": "team-a"}, "spec": {"clusterQueue": "gpu"}},
    ])
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "queued", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
           "spec": {"completions": 1, "backoffLimit": 0, "template": job_template(gpus=1)}}
    # The object the API server stored, after admission (Kueue may unsuspend it moments later).
    created = json.loads(c.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(job)).stdout)
    assert created["spec"]["suspend"] is True, "Kueue's webhook did not suspend the queued Job"
    wl = wait_for("the Job's Workload to be admitted", lambda: next(
        (w for w in get(c, "workloads", "-n", "team-a")["items"]
         if any(cond["type"] == "Admitted" and cond["status"] == "True"
                for cond in w.get("status", {}).get("conditions", []))), None))
    c.kubectl("wait", "--for=condition=Complete", "job/queued", "-n", "team-a", "--timeout=90s", timeout=100)
    pods = get(c, "pods", "-n", "team-a", "-l", "job-name=queued")["items"]
    nodes = {p["spec"].get("nodeName") for p in pods}
    assert nodes == {GPU_NODE}, nodes
    return f"Job suspended on create, Workload {wl['metadata']['name']} admitted, ran on {GPU_NODE}, Complete"


def jobset(name: str, ns: str, replicas: int, queue: str | None = None) -> dict:
    meta = {"name": name, "namespace": ns}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": {
        "replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": job_template()}}}]}}


def check_jobset(c: Cluster) -> str:
    namespace(c, "smoke-jobset")
    c.kubectl("create", "-f", "-", input=json.dumps(jobset("plain", "smoke-jobset", 2)))
    jobs = wait_for("JobSet's child Jobs", lambda: [j["metadata"]["name"] for j in get(
        c, "jobs", "-n", "smoke-jobset", "-l", "jobset.sigs.k8s.io/jobset-name=plain")["items"]] or None)
    assert sorted(jobs) == ["plain-workers-0", "plain-workers-1"], jobs
    c.kubectl("wait", "--for=condition=Completed", "jobset/plain", "-n", "smoke-jobset", "--timeout=90s",
              timeout=100)
    # Through Kueue: the JobSet is one Workload, admitted whole (the GPU flavor's node label and toleration).
    c.kubectl("create", "-f", "-", input=json.dumps(jobset("queued", "team-a", 2, queue="team-a")))
    c.kubectl("wait", "--for=condition=Completed", "jobset/queued", "-n", "team-a", "--timeout=90s", timeout=100)
    wls = [w["metadata"]["name"] for w in get(c, "workloads", "-n", "team-a")["items"]
           if w["metadata"]["ownerReferences"][0]["kind"] == "JobSet"]
    assert len(wls) == 1, wls
    return f"child Jobs {sorted(jobs)} created and completed; queued JobSet admitted as Workload {wls[0]}, Completed"


def run(c: Cluster) -> dict:
    results = {}
    c.add_node(aks_node(SYSTEM_NODE, pool="system", mode="system", instance_type="Standard_D4ds_v5"))
    c.add_node(aks_node(GPU_NODE, pool="gpu", gpus=1, taints=[GPU_TAINT], cpu="24", memory="220Gi"))
    for name, check in (("pod_security", check_pod_security), ("gpu_scheduling", check_gpu_scheduling),
                        ("kueue", check_kueue), ("jobset", check_jobset)):
        t = time.monotonic()
        results[name] = {"result": check(c), "seconds": round(time.monotonic() - t, 1)}
        print(f"ok  {name:15} {results[name]['seconds']:5}s  {results[name]['result']}", flush=True)
    return results


def main() -> int:
    with Cluster() as c:
        version = json.loads(c.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
        print(f"cluster up in {c.timings['total']}s, server {version}, phases {c.timings}", flush=True)
        try:
            run(c)
        except (AssertionError, TimeoutError, subprocess.CalledProcessError) as e:
            detail = getattr(e, "stderr", "") or ""
            print(f"FAILED: {e!r} {detail}", file=sys.stderr)
            print(c.kubectl("get", "pods,jobs,workloads,jobsets", "-A", check=False).stdout, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
