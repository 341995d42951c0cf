"""The spot eviction drill against recorded timelines: fake kubectl and az (tests/fake_cli.py) answer as a cluster
and Azure would while a training run's spot node is evicted, goes, is replaced and the run goes on; the drill turns
that into eviction-clock phases and a Drill. A stack without a spot GPU pool, or without a training run whose
checkpoints outlive its node, has none."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from offline.mocks import SUBSCRIPTION
from offline.runs import Clock, Drill, PhaseName
from offline.stack_files import project_defaults
from ops.e2e.drill import (
    CHECKPOINTED,
    CHECKPOINTS,
    EVICTION_POLL_S,
    EVICTION_SLACK_S,
    EVICTION_WITHIN_S,
    FIRST_STEP,
    PACE_S,
    DrillFailed,
    Instance,
    instance_of,
    job_from_template,
    spot_drill,
)
from tests.docker_modules import import_from
from tests.e2e_fakes import RUN_ID, Fake, rule, status
from tests.helpers import load, shape

NODE_GROUP = "mc_rg-training_aks-training_westeurope"
SUB = "6f1e9d2c-3b4a-4c5d-8e7f-001122334455"
OLD, NEW = "aks-gpu-12345678-vmss000000", "aks-gpu-12345678-vmss000001"
DRILLED, REFERENCE = f"train-run-drill-{RUN_ID}", f"train-run-reference-{RUN_ID}"
COMMAND = ["python", "train.py", "--checkpoints", "/mnt/checkpoints/runs/$(RUN)", "--steps", "2000", "--data", "auto"]
CRONJOB = {"apiVersion": "batch/v1", "kind": "CronJob",
           "metadata": {"name": "train-run", "namespace": "training", "uid": "5e0c1d2a-0b1c-4d2e-8f3a-4b5c6d7e8f90"},
           "spec": {"suspend": True, "schedule": "0 0 31 2 *", "jobTemplate": {
               "metadata": {"labels": {"app.kubernetes.io/component": "run",
                                       "kueue.x-k8s.io/queue-name": "training"}},
               "spec": {"backoffLimit": 6, "template": {
                   "metadata": {"labels": {"app.kubernetes.io/name": "train"}},
                   "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.azure.com/agentpool": "gpu"},
                            "containers": [{"name": "train", "image": "acr/jobs:1", "command": COMMAND}]}}}}}}
"""The run template as training-autoscale renders it, cut to what the drill reads (workloads.py _run_template)."""


def cfg_of(name: str, **changes: Any):
    return load({**project_defaults(), **shape(name), **changes}).for_deployment(SUBSCRIPTION)


def vmss_id(instance: str) -> str:
    return (f"azure:///subscriptions/{SUB}/resourceGroups/{NODE_GROUP}/providers/Microsoft.Compute/"
            f"virtualMachineScaleSets/aks-gpu-12345678-vmss/virtualMachines/{instance}")


def pods(*found: tuple[str, str | None, str]) -> dict[str, Any]:
    return {"stdout": json.dumps({"items": [
        {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}
        for name, node, phase in found]})}


def node(name: str, provider: str, created: str, ready: str, since: str | None = None) -> dict[str, Any]:
    """A Node: Ready since ``ready``, or, with ``since``, NotReady (Unknown: its kubelet stopped posting) since then."""
    condition = {"type": "Ready", "status": "True", "lastTransitionTime": ready, "reason": "KubeletReady"}
    if since:
        condition = {"type": "Ready", "status": "Unknown", "lastTransitionTime": since, "reason": "NodeStatusUnknown"}
    return {"stdout": json.dumps({"metadata": {"name": name, "creationTimestamp": created},
                                  "spec": {"providerID": provider}, "status": {"conditions": [condition]}})}


def pod(phase: str, terminated: str | None = None) -> dict[str, Any]:
    state = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": terminated}} if terminated else \
        {"running": {"startedAt": "2026-05-04T09:58:00Z"}}
    return {"stdout": json.dumps({"metadata": {"name": "drill-a"}, "status": {
        "phase": phase, "containerStatuses": [{"name": "train", "state": state}]}})}


def summary(digest: str, resumed_from: int = 100) -> str:
    return json.dumps({"device": "cuda", "processes": 1, "data": "synthetic", "resumed_from": resumed_from,
                       "step": 2000, "loss": 0.04, "done": True, "weights_sha256": digest}) + "\n"


def timeline(drilled_digest: str = "9f" * 32, reference_digest: str = "9f" * 32, provider: str = vmss_id("0"),
             went: list[dict[str, Any]] | None = None, gone: list[dict[str, Any]] | None = None,
             from_step: int = 100) -> list[dict[str, Any]]:
    """What kubectl says during one drill: the run checkpoints on node OLD; Azure is asked to evict it at 10:00:00;
    at the drill's third look (10:00:10) the pod's container has terminated (10:00:07) and the node is NotReady
    (10:00:40); a new node is Ready at 10:05:07 and the run's new pod takes its first step at 10:07:07.12; then both
    runs finish."""
    went = went or [pod("Running"), pod("Running"), pod("Failed", "2026-05-04T10:00:07Z")]
    gone = gone or [node(OLD, provider, "2026-05-04T09:50:00Z", "2026-05-04T09:55:00Z")] * 2 + [
        node(OLD, provider, "2026-05-04T09:50:00Z", "2026-05-04T09:55:00Z", since="2026-05-04T10:00:40Z")]
    return [
        rule("get", "cronjob", "train-run", stdout=json.dumps(CRONJOB)),
        rule("create", "-f"),
        rule("get", "pods", f"batch.kubernetes.io/job-name={DRILLED}", answers=[
            pods(("drill-a", OLD, "Running")),
            pods(("drill-a", OLD, "Failed"), ("drill-b", None, "Pending")),
            pods(("drill-a", OLD, "Failed"), ("drill-b", NEW, "Running")),
            pods(("drill-a", OLD, "Failed"), ("drill-b", NEW, "Succeeded"))]),
        rule("get", "pods", f"batch.kubernetes.io/job-name={REFERENCE}", **pods(("reference-a", NEW, "Succeeded"))),
        rule("get", "pod", "drill-a", "--ignore-not-found", answers=went),
        rule("get", "node", OLD, "--ignore-not-found", answers=gone),
        rule("logs", "pod/drill-a", "--timestamps",
             stdout="2026-05-04T09:58:30.000000001Z step 1/2000 first of this process, from step 0\n"
                    "2026-05-04T09:59:40.5Z step 100/2000 loss 0.3121 checkpointed\n"),
        rule("logs", "pod/drill-b", "--timestamps",
             stdout="2026-05-04T10:06:40.2Z resumed from step 100\n"
                    f"2026-05-04T10:07:07.123456789Z step {from_step + 1}/2000 first of this process, from step "
                    f"{from_step}\n"),
        rule("logs", "pod/drill-b", stdout="step 2000/2000 loss 0.0400 checkpointed\n" + summary(drilled_digest)),
        rule("logs", "pod/reference-a", stdout=summary(reference_digest, 0)),
        rule("get", "node", OLD, **node(OLD, provider, "2026-05-04T09:50:00Z", "2026-05-04T09:55:00Z")),
        rule("get", "node", NEW, **node(NEW, vmss_id("1"), "2026-05-04T10:01:10Z", "2026-05-04T10:05:07Z")),
        rule("get", "job", DRILLED, **status("Job", "Complete")),
        rule("get", "job", REFERENCE, **status("Job", "Complete")),
        rule("delete", "job"),
    ]


def created(fake: Fake) -> dict[str, dict[str, Any]]:
    """The Jobs the drill created, by name."""
    made = [json.loads(c[1]["file"]) for c in fake.calls("kubectl") if c[0][2:4] == ["create", "-f"]]
    return {job["metadata"]["name"]: job for job in made}


def test_a_recorded_eviction_is_timed_from_the_nodes_going_and_the_run_goes_on_from_its_checkpoint(tmp_path):
    """Audit 37 B2 and W3: the eviction clock started at the API call, which Azure carries out within 30 minutes.
    It starts when the node went as Kubernetes recorded it: here the pod's container terminating at 10:00:07, before
    the node turned NotReady (10:00:40); the call's 7 s to that moment are kept apart."""
    fake = Fake(tmp_path, timeline(), [rule("simulate-eviction", stdout="")])
    drill, phases = spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert drill == Drill(pool="gpu", node=OLD, weights_match=True, resumed_from=100, eviction_seconds=7.0)
    measured = {p.name: (p.clock, p.measured_seconds, p.source) for p in phases}
    assert measured == {
        PhaseName.NODE_REPLACED: (Clock.EVICTION, 300.0, f"Node/{NEW} Ready"),
        PhaseName.RUN_RESUMED: (Clock.EVICTION, 420.123456,
                                "Pod/drill-b log: step 101/2000 first of this process, from step 100")}
    (evicted,) = [c[0] for c in fake.calls("az")]
    assert evicted == ["vmss", "simulate-eviction", "--resource-group", NODE_GROUP, "--name", "aks-gpu-12345678-vmss",
                       "--instance-id", "0", "--output", "json"]
    kubectl = [c[0] for c in fake.calls("kubectl")]
    looks = [c for c in kubectl if c[:4] == ["get", "node", OLD, "--ignore-not-found"]]
    assert len(looks) == 3  # every EVICTION_POLL_S (5 s) from the call until it went
    # The reference run starts only once the evicted one has finished; both are removed at the end.
    assert kubectl.index(["-n", "training", "get", "job", DRILLED, "-o", "json"]) < max(
        i for i, c in enumerate(kubectl) if c[2:4] == ["create", "-f"])
    assert kubectl[-2:] == [["-n", "training", "delete", "job", job, "--ignore-not-found", "--wait=false"]
                            for job in (DRILLED, REFERENCE)]


def test_the_drilled_run_is_paced_past_azures_eviction_and_the_reference_is_not(tmp_path):
    """Audit 37 B2: 2000 DigitNet steps take seconds on a GPU, and the drill evicted after a checkpoint it saw every
    15 s: the run had ended before Azure's eviction landed. The drilled run spreads its steps over PACE_S (train.py
    --pace-seconds) and checkpoints every twentieth of them; both runs train on synthetic digits."""
    fake = Fake(tmp_path, timeline(), [rule("simulate-eviction")])
    spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    jobs = created(fake)
    drilled, reference = (jobs[name]["spec"]["template"]["spec"]["containers"][0]["command"]
                          for name in (DRILLED, REFERENCE))
    assert drilled == [*COMMAND, "--checkpoint-every", "100", "--data", "synthetic", "--pace-seconds", str(PACE_S)]
    assert reference == [*COMMAND, "--checkpoint-every", "100", "--data", "synthetic"]
    # Paced from step 0: its first checkpoint, Azure's 30 minutes after the call, and time to spare.
    assert PACE_S / CHECKPOINTS + EVICTION_WITHIN_S + EVICTION_SLACK_S < PACE_S


def test_a_run_made_from_the_template_is_the_job_kubectl_create_job_from_makes(tmp_path):
    """kubectl pkg/cmd/create/create_job.go, createJobFromCronJob: the template's labels (Kueue's queue among them)
    and annotations, cronjob.kubernetes.io/instantiate: manual, and the CronJob as its controller."""
    job = job_from_template(CRONJOB, "train-run-drill-1", ["--pace-seconds", "9"])
    assert job["metadata"] == {
        "name": "train-run-drill-1", "namespace": "training",
        "labels": {"app.kubernetes.io/component": "run", "kueue.x-k8s.io/queue-name": "training"},
        "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "train-run",
                             "uid": CRONJOB["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]}
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [*COMMAND, "--pace-seconds", "9"]
    assert CRONJOB["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] == COMMAND


def test_weights_that_differ_from_the_uninterrupted_run_are_reported(tmp_path):
    fake = Fake(tmp_path, timeline(reference_digest="a0" * 32), [rule("simulate-eviction")])
    drill, _ = spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert drill is not None and drill.weights_match is False


def test_a_run_that_starts_again_from_step_0_is_a_restart_and_fails_the_drill(tmp_path):
    """Audit 37 W2: checkpoints that went with the node make the next pod start from nothing, and end with the same
    weights: the drill checks where the run went on from."""
    fake = Fake(tmp_path, timeline(from_step=0), [rule("simulate-eviction")])
    with pytest.raises(DrillFailed, match="started again from step 0: a restart, not a resume") as failed:
        spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert failed.value.drill is not None and failed.value.drill.resumed_from == 0
    assert REFERENCE not in created(fake)  # no reference run for a drill that already failed


def test_a_run_that_finishes_before_azure_evicts_it_fails_the_drill_saying_so(tmp_path):
    fake = Fake(tmp_path, timeline(went=[pod("Running"), pod("Succeeded")]), [rule("simulate-eviction")])
    with pytest.raises(DrillFailed, match="finished its run on node .* before Azure's eviction took effect"):
        spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)


def test_a_node_that_azure_does_not_evict_in_its_30_minutes_fails_the_drill_with_what_it_measured(tmp_path,
                                                                                                  monkeypatch):
    monkeypatch.setattr("ops.e2e.drill.EVICTION_POLL_S", 300.0)  # fewer looks (each is a process here)
    fake = Fake(tmp_path, timeline(went=[pod("Running")],
                                   gone=[node(OLD, vmss_id("0"), "2026-05-04T09:50:00Z", "2026-05-04T09:55:00Z")]),
                [rule("simulate-eviction")])
    with pytest.raises(DrillFailed, match=rf"timed out waiting for node {OLD} to go .*\(35 min\)") as failed:
        spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert failed.value.drill == Drill(pool="gpu", node=OLD, weights_match=None)
    looks = [c for c in fake.calls("kubectl") if c[0][:4] == ["get", "node", OLD, "--ignore-not-found"]]
    assert len(looks) == (EVICTION_WITHIN_S + EVICTION_SLACK_S) / 300  # from the call to 35 minutes after


def test_a_node_deleted_between_two_looks_counts_from_the_look_that_missed_it(tmp_path):
    fake = Fake(tmp_path, timeline(went=[{"stdout": ""}],
                                   gone=[node(OLD, vmss_id("0"), "2026-05-04T09:50:00Z", "2026-05-04T09:55:00Z"),
                                         {"stdout": ""}]), [rule("simulate-eviction")])
    drill, _ = spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert drill is not None and drill.eviction_seconds == EVICTION_POLL_S


def test_a_node_of_node_auto_provisioning_is_evicted_as_the_vm_it_is(tmp_path):
    vm = f"azure:///subscriptions/{SUB}/resourceGroups/{NODE_GROUP}/providers/Microsoft.Compute/virtualMachines/aks-t4-x1"
    fake = Fake(tmp_path, timeline(provider=vm), [rule("simulate-eviction")])
    spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    (evicted,) = [c[0] for c in fake.calls("az")]
    assert evicted[:6] == ["vm", "simulate-eviction", "--resource-group", NODE_GROUP, "--name", "aks-t4-x1"]


def test_a_run_that_does_not_go_on_in_time_fails_the_drill_with_what_it_measured(tmp_path):
    rules = timeline()
    rules[2] = rule("get", "pods", f"batch.kubernetes.io/job-name={DRILLED}",
                    answers=[pods(("drill-a", OLD, "Running")), pods(("drill-b", None, "Pending"))])
    fake = Fake(tmp_path, rules, [rule("simulate-eviction")])
    with pytest.raises(DrillFailed, match=rf"spot drill on pool gpu: timed out waiting for job/{DRILLED} to go on") \
            as failed:
        spot_drill("training", cfg_of("training"), {}, fake.tools, 1800)
    assert failed.value.drill == Drill(pool="gpu", node=OLD, weights_match=None, eviction_seconds=7.0)
    assert [(p.name, p.measured_seconds) for p in failed.value.phases] == [(PhaseName.NODE_REPLACED, None),
                                                                            (PhaseName.RUN_RESUMED, None)]
    assert len(fake.calls("az")) == 1 and fake.calls("kubectl")[-1][0][2:4] == ["delete", "job"]


@pytest.mark.parametrize(("name", "changes"), [
    ("training", {"gpuPools": [{"name": "gpu", "vmSize": "Standard_NC4as_T4_v3", "priority": "regular",
                                "minCount": 0, "maxCount": 3}]}),
    ("function", {}),
    ("spot-from-zero", {}),  # gpu-basics: its run keeps its checkpoints in its pod
])
def test_no_spot_pool_or_no_run_whose_checkpoints_outlive_its_node_means_no_drill(tmp_path, name, changes):
    fake = Fake(tmp_path, [], [])
    assert spot_drill("s", cfg_of(name, **changes), {}, fake.tools, 3600) == (None, [])
    assert fake.calls("kubectl") == fake.calls("az") == []


@pytest.mark.parametrize(("provider", "instance"), [
    (vmss_id("3"), Instance(NODE_GROUP, "aks-gpu-12345678-vmss", "3")),
    # The scale set's name in the instance id (cloud-provider-azure azure_vmss.go GetNodeNameByProviderID).
    (vmss_id("aks-gpu-12345678-vmss_7"), Instance(NODE_GROUP, "aks-gpu-12345678-vmss", "7")),
    (f"azure:///subscriptions/{SUB}/resourceGroups/MC_RG/providers/Microsoft.Compute/virtualMachines/aks-t4-x1",
     Instance("MC_RG", "aks-t4-x1")),
])
def test_a_nodes_provider_id_names_what_az_evicts(provider, instance):
    assert instance_of(provider) == instance


def test_a_provider_id_of_no_azure_vm_is_refused():
    with pytest.raises(DrillFailed, match="names no Azure VM or scale set instance"):
        instance_of("kind://docker/kind/kind-worker")


def test_the_lines_the_drill_reads_are_the_ones_train_py_prints(tmp_path, capsys):
    train = import_from("jobs", "train")
    args = ["--checkpoints", str(tmp_path), "--steps", "4", "--checkpoint-every", "2", "--batch-size", "8",
            "--data", "synthetic", "--device", "cpu"]
    train.train(train.parse_args([*args, "--stop-after", "3"]))
    train.train(train.parse_args(args))
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if FIRST_STEP.match(line)] == [
        "step 1/4 first of this process, from step 0", "step 3/4 first of this process, from step 2"]
    assert [re.sub(r"loss \S+", "loss x", line) for line in lines if CHECKPOINTED.match(line)] == [
        "step 2/4 loss x checkpointed", "step 4/4 loss x checkpointed"]
    assert "weights_sha256" in json.loads(lines[-1])
