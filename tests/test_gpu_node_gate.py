"""The GPU node gate's controller: its decisions, one pass at a time, against a stand-in API server."""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime, timedelta

from components.gpu import node_gate_job as gate
from components.gpu.gate import GATE_TAINT, GATE_TOLERATION
from components.gpu.kube_api import Api
from tests.local_http import QuietHandler, base_url, serving

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
SPOT = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
POOLS = {"t4": {"label": "agentpool", "resource": "nvidia.com/gpu", "request": 1,
                "tolerations": [SPOT, GATE_TOLERATION], "args": ["python", "gpu_check.py", "--gpus", "1"]}}
CHECK_POD = {"containers": [{"name": "gpu-check", "image": "jobs@sha256:00",
                             "resources": {"limits": {"cpu": "2", "memory": "8Gi"}}}]}


def node(name, pool="t4", gpus=0, verdict=None, tainted=False, labels=None):
    annotations = {gate.VERDICT: verdict} if verdict else {}
    return {"metadata": {"name": name, "resourceVersion": "7", "labels": {"agentpool": pool, **(labels or {})},
                         "annotations": annotations},
            "spec": {"taints": [SPOT, *([GATE_TAINT] if tainted else [])]},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


class FakeApi:
    """Nodes, pods, the check Jobs and the operator's driver pods as an API server holds them; records what the
    gate sends."""

    def __init__(self, nodes, pods=(), jobs=None, driver_pods=(), said=None, conflicts=0):
        self.nodes, self.pods, self.jobs, self.driver_pods = nodes, list(pods), jobs or {}, list(driver_pods)
        self.said, self.conflicts = said or {}, conflicts
        self.patches, self.created, self.deleted = [], [], []
        fake = self

        class Handler(QuietHandler):
            def answer(self, status, body):
                self.reply(status, json.dumps(body).encode())

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                if url.path == "/api/v1/nodes":
                    return self.answer(200, {"items": fake.nodes})
                if url.path.startswith("/api/v1/nodes/"):
                    (found,) = [n for n in fake.nodes if n["metadata"]["name"] == url.path.rsplit("/", 1)[-1]]
                    return self.answer(200, {**found, "metadata": {**found["metadata"], "resourceVersion": "8"}})
                if url.path == "/api/v1/pods":
                    on = query["fieldSelector"].removeprefix("spec.nodeName=")
                    return self.answer(200, {"items": [p for p in fake.pods if p["spec"]["nodeName"] == on]})
                if url.path == "/api/v1/namespaces/gpu-operator/pods":
                    assert query["labelSelector"] == ("nvidia.com/precompiled=true,"
                                                      "app.kubernetes.io/component=nvidia-driver")
                    return self.answer(200, {"items": fake.driver_pods})
                if url.path == "/api/v1/namespaces/gpu-node-gate/pods":
                    job = query["labelSelector"].removeprefix("batch.kubernetes.io/controller-uid=uid-")
                    message = fake.said.get(job, "")
                    return self.answer(200, {"items": [{"status": {"containerStatuses": [
                        {"state": {"terminated": {"message": message}}}]}}]})
                job = url.path.rsplit("/", 1)[-1]
                if job not in fake.jobs:
                    return self.answer(404, {"message": "not found"})
                meta = {"uid": f"uid-{job}"}
                if fake.jobs[job] == "Deleting":
                    return self.answer(200, {"metadata": {**meta, "deletionTimestamp": "2026-01-01T00:00:00Z"},
                                             "status": {"conditions": [{"type": "Failed", "status": "True"}]}})
                return self.answer(200, {"metadata": meta, "status": {"conditions": [
                    {"type": fake.jobs[job], "status": "True"}]} if fake.jobs[job] else {}})

            def do_PATCH(self):
                assert self.headers["Content-Type"] == "application/merge-patch+json"
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.patches.append((self.path.rsplit("/", 1)[-1], body))
                if fake.conflicts:
                    fake.conflicts -= 1
                    return self.answer(409, {"message": "the object has been modified"})
                self.answer(200, {})

            def do_POST(self):
                fake.created.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.answer(201, {})

            def do_DELETE(self):
                fake.deleted.append(urllib.parse.urlsplit(self.path).path.rsplit("/", 1)[-1])
                self.answer(200, {})

        self.handler = Handler

    def run_once(self, now=NOW):
        with serving(self.handler) as server:
            return gate.Gate(Api(base_url(server), backoff=0), "gpu-node-gate", POOLS, GATE_TAINT, CHECK_POD,
                             timedelta(minutes=5), "gpu-operator").run_once(now)


def test_a_new_node_is_held_and_checked_only_once_it_advertises_its_gpus():
    api = FakeApi([node("fresh"), node("cpu-node", pool="system")])
    assert api.run_once() == ["fresh joined: held until its GPU check passes"]
    ((name, patch),) = api.patches
    assert name == "fresh" and patch["spec"]["taints"] == [SPOT, GATE_TAINT]
    assert patch["metadata"] == {"resourceVersion": "7", "annotations": {gate.VERDICT: "pending"}}
    waiting = FakeApi([node("fresh", verdict="pending", tainted=True, gpus=0)])
    assert waiting.run_once() == [] and waiting.created == []


def test_a_held_node_with_its_gpus_gets_a_check_job_pinned_to_it_that_tolerates_its_taints():
    api = FakeApi([node("ready", verdict="pending", tainted=True, gpus=1)])
    assert api.run_once() == ["started the GPU check of ready"]
    (job,) = api.created
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["name"] == gate.job_name("ready") and job["spec"]["backoffLimit"] == 0
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "ready"} and pod["restartPolicy"] == "Never"
    assert GATE_TOLERATION in pod["tolerations"] and SPOT in pod["tolerations"]
    (check,) = pod["containers"]
    assert check["args"] == POOLS["t4"]["args"]
    assert check["resources"]["limits"] == {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}


def test_a_passed_check_admits_the_node_and_a_failed_one_keeps_it_out_saying_why():
    name = gate.job_name("n")
    passed = FakeApi([node("n", verdict="pending", tainted=True, gpus=1)], jobs={name: "Complete"})
    assert passed.run_once() == ["n passed its GPU check: admitted"]
    ((_, patch),) = passed.patches
    assert patch["spec"]["taints"] == [SPOT] and patch["metadata"]["annotations"][gate.VERDICT].startswith("passed")
    assert passed.deleted == [name]
    report = json.dumps({"verdict": "fail", "failures": ["cuda:0 (Tesla T4): 3.1 TFLOPS fp16, below 23.0"]})
    failed = FakeApi([node("n", verdict="pending", tainted=True, gpus=1)], jobs={name: "Failed"},
                     said={name: report})
    failed.run_once()
    ((_, patch),) = failed.patches
    assert patch["spec"]["taints"] == [SPOT, GATE_TAINT]
    assert patch["metadata"]["annotations"][gate.VERDICT] == "failed: cuda:0 (Tesla T4): 3.1 TFLOPS fp16, below 23.0"
    again = FakeApi([node("n", verdict=patch["metadata"]["annotations"][gate.VERDICT], tainted=True, gpus=1)],
                    jobs={name: "Failed"})
    assert again.run_once() == [] and again.patches == [] and again.created == []


def test_a_node_already_running_gpu_work_is_admitted_without_a_check():
    """A stack the gate is added to: its nodes are in service already."""
    work = {"metadata": {"labels": {}}, "spec": {"nodeName": "busy", "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}}
    api = FakeApi([node("busy", gpus=1)], pods=[work])
    api.run_once()
    ((_, patch),) = api.patches
    assert patch["spec"]["taints"] == [SPOT]
    assert patch["metadata"]["annotations"][gate.VERDICT] == "passed (in service before the gate)"


def test_a_node_a_person_untainted_keeps_its_verdict_and_is_left_alone():
    api = FakeApi([node("n", verdict="failed: GPU 0 memory read back wrong", tainted=False, gpus=1)])
    assert api.run_once() == [] and api.patches == [] and api.created == []


def test_a_node_without_its_precompiled_driver_for_five_minutes_moves_to_the_compiled_one():
    def driver_pod(on, minutes):
        return {"metadata": {"creationTimestamp": (NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")},
                "spec": {"nodeName": on}, "status": {"containerStatuses": [
                    {"image": "nvcr.io/nvidia/driver:595-6.8.0-1044-azure-ubuntu24.04",
                     "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}

    nodes = [node("late", verdict="pending", tainted=True), node("young", verdict="pending", tainted=True)]
    api = FakeApi(nodes, driver_pods=[driver_pod("late", 6), driver_pod("young", 2)])
    (line,) = api.run_once()
    assert line.startswith("late: no precompiled driver (nvcr.io/nvidia/driver:595-6.8.0-1044-azure-ubuntu24.04)")
    ((name, patch),) = api.patches
    assert name == "late" and patch["metadata"]["labels"] == {"aksgpu.io/driver": "compiled"}
    moved = FakeApi([node("late", verdict="pending", tainted=True, labels={"aksgpu.io/driver": "compiled"})],
                    driver_pods=[driver_pod("late", 9)])
    assert moved.run_once() == [] and moved.patches == []


def test_a_node_changed_meanwhile_is_read_again_and_patched_on_its_new_version():
    """The kubelet's status updates change a node's resourceVersion too: found on the test control plane, where a
    conflict failed the whole pass."""
    api = FakeApi([node("fresh")], conflicts=1)
    assert api.run_once() == ["fresh joined: held until its GPU check passes"]
    assert [p["metadata"]["resourceVersion"] for _, p in api.patches] == ["7", "8"]


def test_taking_the_verdict_off_runs_a_new_check_instead_of_rereading_the_last_one():
    """The last check's Job is kept an hour (ttlSecondsAfterFinished): its failure must not stand for the new check."""
    name = gate.job_name("n")
    rerun = FakeApi([node("n", gpus=1)], jobs={name: "Failed"})
    assert rerun.run_once() == ["n joined: held until its GPU check passes"] and rerun.deleted == [name]
    going = FakeApi([node("n", verdict="pending", tainted=True, gpus=1)], jobs={name: "Deleting"})
    assert going.run_once() == ["started the GPU check of n"] and going.patches == []


def test_a_node_that_fell_back_stays_on_the_compiled_driver_when_its_pool_label_comes_back():
    """AKS puts a pool's own node labels back on a scale or an upgrade of the pool (Azure/AKS#1515)."""
    back = node("late", verdict="passed at then", labels={"aksgpu.io/driver": "precompiled"})
    back["metadata"]["annotations"][gate.FALLBACK_ANNOTATION] = "no precompiled driver x at then"
    api = FakeApi([back])
    assert api.run_once()[0].startswith("late: its pool's driver label came back")
    ((name, patch),) = api.patches
    assert name == "late" and patch["metadata"] == {"labels": {"aksgpu.io/driver": "compiled"}}
