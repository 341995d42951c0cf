"""GPU node repair: the CronJob as rendered, and its script's decisions against a stand-in API server."""

import json
import urllib.parse
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from components.gpu import kube_api
from components.gpu import node_repair_job as job
from components.gpu.kube_api import Api
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
    pools = json.loads(env["POOLS"])
    assert set(pools) == {"t4"} and (pools["t4"]["min_count"], pools["t4"]["gpus"]) == (0, 1)
    scripts = r.named("gpu-node-repair-script").inputs["data"]
    for module in (job, kube_api):
        assert scripts[module.__name__.rsplit(".", 1)[1] + ".py"] == open(module.__file__, encoding="utf-8").read()
    egress = r.named("gpu-node-repair-api-server").inputs["spec"]
    assert egress["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "gpu-node-repair"}
    assert egress["egress"][0]["ports"] == [{"protocol": "TCP", "port": 443}]


def test_repair_job_is_left_out_when_config_turns_it_off():
    r = render_with(addons={"gpuNodeRepair": False})
    assert not [x for x in r.of_type("kubernetes:batch/v1:CronJob") if x.name == "gpu-node-repair-job"]
    assert render_with().named("gpu-node-repair-job")


POOL = job.Pool(name="t4", label="agentpool", min_count=0, max_count=5, gpus=1)


def settings(max_repairing=1, hold_minutes=60, **pool):
    return job.Settings(conditions=NPD_GPU_CONDITIONS, grace=GRACE, max_repairing=max_repairing,
                        hold_timeout=timedelta(minutes=hold_minutes), pools={"t4": replace(POOL, **pool)})


def node(name, condition=None, minutes_ago=0, annotated=False, unschedulable=False, held_minutes=30, **annotations):
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T00:00:00Z"}]
    if condition:
        since = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions.append({"type": condition, "status": "True", "lastTransitionTime": since})
    if annotated:
        annotations[job.ANNOTATION] = f"XIDErrors since then at {(NOW - timedelta(minutes=held_minutes)).isoformat()}"
    return {"metadata": {"name": name, "labels": {"agentpool": "t4"}, "annotations": annotations},
            "spec": {"unschedulable": unschedulable}, "status": {"conditions": conditions}}


def pod(name, node_name, owner="ReplicaSet", **extra):
    meta = {"name": name, "namespace": "work", "ownerReferences": [{"kind": owner, "name": "x"}], **extra}
    return {"metadata": meta, "spec": {"nodeName": node_name}, "status": {"phase": "Running"}}


def exporter_page(*samples):
    """A DCGM exporter metrics page: (metric, gpu, value) per line."""
    return "\n".join(f'{m}{{gpu="{g}",UUID="GPU-{g}",Hostname="n"}} {v}' for m, g, v in samples)


class FakeApi:
    """Nodes, pods and one DCGM exporter pod per node as an API server holds them; records the patches and
    evictions it is sent."""

    def __init__(self, nodes, pods, eviction_status=None, pages=None):
        self.nodes, self.pods, self.pages = nodes, pods, pages or {}
        self.eviction_status = eviction_status or {}
        self.patches, self.evictions = [], []
        fake = self

        class Handler(QuietHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                if url.path == "/api/v1/nodes":
                    return self.reply(200, json.dumps({"items": fake.nodes}).encode())
                on = query["fieldSelector"][0].removeprefix("spec.nodeName=")
                if url.path == "/api/v1/namespaces/gpu-operator/pods":
                    assert query["labelSelector"] == ["app=nvidia-dcgm-exporter"]
                    exporters = [{"status": {"podIP": on, "phase": "Running"}}] if on in fake.pages else []
                    return self.reply(200, json.dumps({"items": exporters}).encode())
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

    def fetch(self, url):
        """The exporter page of the node whose 'pod IP' the URL names (the fake answers with the node's name)."""
        return self.pages[urllib.parse.urlsplit(url).hostname]

    def repair(self, **kwargs):
        with serving(self.handler) as server:
            return job.repair(Api(base_url(server), backoff=0), settings(**kwargs), now=NOW, fetch=self.fetch)


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


def test_no_more_nodes_of_a_pool_are_cordoned_than_the_limit_until_one_is_held_past_the_timeout():
    nodes = [node("held", "XIDErrors", 30, annotated=True, unschedulable=True), node("second", "GPUMissing", 10)]
    api = FakeApi(nodes, [pod("stuck", "held"), pod("work", "second")], eviction_status={"stuck": 429})
    log = api.repair(max_repairing=1)
    assert api.patches == [] and api.evictions == ["stuck"] * 3  # 429 is tried again: API throttling says it too
    assert any("second is sick (GPUMissing" in line and "1 node(s) of pool t4" in line for line in log)
    assert any("refused for now" in line for line in log)
    late = FakeApi(nodes, [pod("stuck", "held"), pod("work", "second")], eviction_status={"stuck": 429})
    log = late.repair(max_repairing=1, hold_minutes=20)
    assert [n for n, _ in late.patches] == ["second"] and late.evictions == ["stuck"] * 3 + ["work"]
    assert any("held has been cordoned longer than 0:20:00: replace it by hand" in line for line in log)


def test_a_sick_node_of_a_pool_that_cannot_add_one_is_marked_and_left_in_service():
    """Cordoning it would leave its pods nowhere to go: a pool at its maximum, or fixed at its size."""
    for bounds in ({"max_count": 1}, {"min_count": 1, "max_count": 1}):
        api = FakeApi([node("only", "XIDErrors", 6)], [pod("work", "only")])
        log = api.repair(**bounds)
        ((name, patch),) = api.patches
        assert name == "only" and "spec" not in patch and api.evictions == []
        assert "pool t4 cannot add a node" in patch["metadata"]["annotations"][job.BLOCKED] and log


def test_a_node_a_person_uncordoned_is_left_alone_while_sick_and_unmarked_once_well():
    sick = FakeApi([node("handed-back", "XIDErrors", 60, annotated=True)], [pod("work", "handed-back")])
    assert sick.repair() == [] and sick.patches == [] and sick.evictions == []
    well = FakeApi([node("handed-back", annotated=True)], [])
    assert well.repair() == ["handed-back is well again after it was handed back: unmarked"]
    assert well.patches == [("handed-back", {"metadata": {"annotations": {job.ANNOTATION: None}}})]


def test_a_failed_eviction_is_logged_and_the_other_pods_still_leave():
    api = FakeApi([node("sick", "XIDErrors", 6)], [pod("a", "sick"), pod("b", "sick")], eviction_status={"a": 500})
    log = api.repair()
    assert api.evictions == ["a", "a", "a", "b"]  # a 500 is tried again before it counts
    assert any("eviction of work/a from sick failed (HTTP 500" in line for line in log)
    assert "evicted work/b from sick" in log


@pytest.mark.parametrize("page, sick", [
    (exporter_page(("DCGM_FI_DEV_XID_ERRORS", 0, 0), ("DCGM_FI_DEV_XID_ERRORS", 1, 79)), "XID 79 on GPU 1"),
    # A program's fault: the GPU is fine.
    (exporter_page(("DCGM_FI_DEV_XID_ERRORS", 0, 13), ("DCGM_FI_DEV_XID_ERRORS", 1, 0)), None),
    (exporter_page(("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, 1), ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1, 0)),
     "row remapping failed on GPU 0"),
    (exporter_page(("DCGM_FI_DEV_GPU_TEMP", 0, 40), ("DCGM_FI_DEV_GPU_TEMP", 1, 40)), None),
    (exporter_page(("DCGM_FI_DEV_GPU_TEMP", 0, 40)), "GPUMissing: 1 of 2 GPUs report"),
], ids=["fatal-xid", "program-xid", "row-remap", "all-gpus", "gpu-missing"])
def test_the_dcgm_exporter_page_tells_a_sick_node_on_pools_npd_does_not_check(page, sick):
    api = FakeApi([node("n")], [], pages={"n": page})
    api.repair(gpus=2)
    marks = [p["metadata"]["annotations"].get(job.ANNOTATION, "") for _, p in api.patches]
    assert (marks[0].split(" at ")[0] if marks else None) == sick


def test_a_node_that_failed_the_gate_check_is_sick():
    api = FakeApi([node("n", **{job.GATE_ANNOTATION: "failed: GPU 0 computed 20 TFLOPS, below 23"})], [])
    api.repair()
    ((_, patch),) = api.patches
    assert patch["metadata"]["annotations"][job.ANNOTATION].startswith("GPU check failed: GPU 0 computed 20")
