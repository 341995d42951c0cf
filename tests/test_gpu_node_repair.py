"""GPU node repair: the CronJob as rendered, and its script's decisions against a stand-in API server."""

import json
import urllib.parse
from datetime import UTC, datetime, timedelta

import pytest

from components.gpu import node_repair_job as job
from components.monitoring.alert_rules import NPD_GPU_CONDITION_MINUTES, NPD_GPU_CONDITIONS
from tests.helpers import pod_spec, render_with
from tests.local_http import QuietHandler, base_url, serving

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=NPD_GPU_CONDITION_MINUTES)


def test_repair_job_may_only_list_and_cordon_nodes_and_evict_pods(render_shape):
    r = render_shape("spot-from-zero")
    assert r.named("gpu-node-repair-role").inputs["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    ]
    (subject,) = r.named("gpu-node-repair-binding").inputs["subjects"]
    assert subject == {"kind": "ServiceAccount", "name": "gpu-node-repair", "namespace": "gpu-node-repair"}


def test_repair_job_runs_its_script_off_the_gpu_nodes_with_the_alerts_conditions(render_shape):
    r = render_shape("spot-from-zero")
    cron = r.named("gpu-node-repair-job").inputs
    assert cron["spec"]["schedule"] == "*/5 * * * *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = pod_spec(cron)
    # No node selector or toleration: GPU nodes are tainted, so the job never runs on a node it drains.
    assert "nodeSelector" not in pod and "tolerations" not in pod
    assert pod["automountServiceAccountToken"] is True and pod["serviceAccountName"] == "gpu-node-repair"
    (c,) = pod["containers"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["CONDITIONS"].split(",") == list(NPD_GPU_CONDITIONS)
    assert env["GRACE_SECONDS"] == str(NPD_GPU_CONDITION_MINUTES * 60) and env["MAX_REPAIRING"] == "1"
    assert "@sha256:" in c["image"] and c["command"] == ["python", "/script/node_repair_job.py"]
    script = r.named("gpu-node-repair-script").inputs["data"]["node_repair_job.py"]
    assert script == open(job.__file__, encoding="utf-8").read()
    egress = r.named("gpu-node-repair-api-server").inputs["spec"]
    assert egress["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "gpu-node-repair"}
    assert egress["egress"][0]["ports"] == [{"protocol": "TCP", "port": 443}]


def test_repair_job_is_left_out_when_config_turns_it_off():
    r = render_with(addons={"gpuNodeRepair": False})
    assert not [x for x in r.of_type("kubernetes:batch/v1:CronJob") if x.name == "gpu-node-repair-job"]
    assert render_with().named("gpu-node-repair-job")


def node(name, condition=None, minutes_ago=0, annotated=False, unschedulable=False):
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T00:00:00Z"}]
    if condition:
        since = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions.append({"type": condition, "status": "True", "lastTransitionTime": since})
    return {"metadata": {"name": name, "annotations": {job.ANNOTATION: "XIDErrors since then"} if annotated else {}},
            "spec": {"unschedulable": unschedulable}, "status": {"conditions": conditions}}


def pod(name, node_name, owner="ReplicaSet", **extra):
    meta = {"name": name, "namespace": "work", "ownerReferences": [{"kind": owner, "name": "x"}], **extra}
    return {"metadata": meta, "spec": {"nodeName": node_name}, "status": {"phase": "Running"}}


class FakeApi:
    """Nodes and pods as an API server holds them; records the patches and evictions it is sent."""

    def __init__(self, nodes, pods, eviction_status=None):
        self.nodes, self.pods = nodes, pods
        self.eviction_status = eviction_status or {}
        self.patches, self.evictions = [], []
        fake = self

        class Handler(QuietHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/api/v1/nodes":
                    return self.reply(200, json.dumps({"items": fake.nodes}).encode())
                on = urllib.parse.parse_qs(url.query)["fieldSelector"][0].removeprefix("spec.nodeName=")
                self.reply(200, json.dumps({"items": [p for p in fake.pods if p["spec"]["nodeName"] == on]}).encode())

            def do_PATCH(self):
                assert self.headers["Content-Type"] == "application/merge-patch+json"
                fake.patches.append((self.path.rsplit("/", 1)[-1], json.loads(self.rfile.read(
                    int(self.headers["Content-Length"])))))
                self.reply(200, b"{}")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert body["kind"] == "Eviction" and self.path.endswith(f"/pods/{body['metadata']['name']}/eviction")
                fake.evictions.append(body["metadata"]["name"])
                self.reply(fake.eviction_status.get(body["metadata"]["name"], 201), b'{"message": "budget"}')

        self.handler = Handler

    def repair(self, max_repairing=1):
        with serving(self.handler) as server:
            return job.repair(job.Api(base_url(server)), NPD_GPU_CONDITIONS, GRACE, max_repairing, now=NOW)


def test_a_node_sick_past_the_grace_period_is_cordoned_and_drained_as_kubectl_drain_would():
    api = FakeApi(
        [node("sick", "XIDErrors", minutes_ago=6), node("new", "GPUMissing", minutes_ago=2), node("healthy")],
        [pod("train", "sick"), pod("exporter", "sick", owner="DaemonSet"),
         pod("static", "sick", annotations={"kubernetes.io/config.mirror": "x"}), pod("other", "healthy")])
    log = api.repair()
    ((name, patch),) = api.patches
    assert name == "sick" and patch["spec"] == {"unschedulable": True}
    assert patch["metadata"]["annotations"][job.ANNOTATION].startswith("XIDErrors since 2026-11-24T11:54")
    assert api.evictions == ["train"]  # DaemonSet and static pods stay; the healthy node's pod too
    assert log[0].startswith("cordoned sick")


def test_no_more_nodes_are_cordoned_than_the_limit_while_the_held_one_keeps_draining():
    api = FakeApi([node("held", "XIDErrors", 30, annotated=True, unschedulable=True),
                   node("second", "GPUMissing", minutes_ago=10)],
                  [pod("stuck", "held"), pod("work", "second")], eviction_status={"stuck": 429})
    log = api.repair(max_repairing=1)
    assert api.patches == [] and api.evictions == ["stuck"]
    assert any("second has GPUMissing but 1 node(s)" in line for line in log)
    assert any("refused for now" in line for line in log)
    two = FakeApi([node("a", "XIDErrors", 9), node("b", "XIDErrors", 9)], [])
    two.repair(max_repairing=2)
    assert [n for n, _ in two.patches] == ["a", "b"]


def test_a_node_a_person_uncordoned_is_left_alone():
    api = FakeApi([node("handed-back", "XIDErrors", 60, annotated=True, unschedulable=False)],
                  [pod("work", "handed-back")])
    assert api.repair() == [] and api.patches == [] and api.evictions == []


def test_an_eviction_the_api_server_fails_fails_the_run():
    api = FakeApi([node("sick", "XIDErrors", 6)], [pod("train", "sick")], eviction_status={"train": 500})
    with pytest.raises(RuntimeError, match="evicting work/train: HTTP 500"):
        api.repair()
