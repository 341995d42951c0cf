"""The spot eviction drill against recorded timelines: fake kubectl and az (tests/fake_cli.py) answer as a cluster
and Azure would while a training run's spot node is evicted, replaced and the run resumes; the drill turns that into
eviction-clock phases and a Drill. A stack without a spot GPU pool, or without a training run to evict, has none."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest

from offline.mocks import SUBSCRIPTION
from offline.runs import Clock, Drill, PhaseName
from offline.stack_files import project_defaults
from ops.e2e.drill import CHECKPOINTED, FIRST_STEP, DrillFailed, Instance, copy_job, instance_of, spot_drill
from ops.e2e.probes import Probing
from program.probes import JobCopy
from tests.docker_modules import import_from
from tests.e2e_fakes import RUN_ID, Fake, rule, status
from tests.helpers import load, shape

NODE_GROUP = "mc_rg-training_aks-training_westeurope"
SUB = "6f1e9d2c-3b4a-4c5d-8e7f-001122334455"
OLD, NEW = "aks-gpu-12345678-vmss000000", "aks-gpu-12345678-vmss000001"
DRILLED, REFERENCE = f"train-run-drill-{RUN_ID}", f"train-run-reference-{RUN_ID}"


def cfg_of(name: str, **changes: Any):
    return load({**project_defaults(), **shape(name), **changes}).for_deployment(SUBSCRIPTION)


def vmss_id(instance: str) -> str:
    return (f"azure:///subscriptions/{SUB}/resourceGroups/{NODE_GROUP}/providers/Microsoft.Compute/"
            f"virtualMachineScaleSets/aks-gpu-12345678-vmss/virtualMachines/{instance}")


def pods(*found: tuple[str, str | None, str]) -> dict[str, Any]:
    return {"stdout": json.dumps({"items": [
        {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}
        for name, node, phase in found]})}


def node(name: str, provider: str, created: str, ready: str) -> dict[str, Any]:
    return {"stdout": json.dumps({"metadata": {"name": name, "creationTimestamp": created},
                                  "spec": {"providerID": provider},
                                  "status": {"conditions": [{"type": "Ready", "status": "True",
                                                             "lastTransitionTime": ready}]}})}


def summary(digest: str) -> str:
    return json.dumps({"device": "cuda", "processes": 1, "data": "mnist", "resumed_from": 200, "step": 2000,
                       "loss": 0.04, "done": True, "weights_sha256": digest}) + "\n"


def timeline(drilled_digest: str = "9f" * 32, reference_digest: str = "9f" * 32,
             provider: str = vmss_id("0")) -> list[dict[str, Any]]:
    """What kubectl says during one drill: the run checkpoints on node OLD; after the eviction at 10:00:00 a new
    node is Ready at 10:05:00 and the run's new pod takes its first step at 10:07:00.12; then both runs finish."""
    return [
        rule("create", "job", DRILLED, "--from=cronjob/train-run"),
        rule("create", "job", REFERENCE, "--from=cronjob/train-run"),
        rule("get", "pods", f"batch.kubernetes.io/job-name={DRILLED}", answers=[
            pods(("drill-a", OLD, "Running")),
            pods(("drill-b", None, "Pending")),
            pods(("drill-b", NEW, "Running")),
            pods(("drill-b", NEW, "Succeeded"))]),
        rule("get", "pods", f"batch.kubernetes.io/job-name={REFERENCE}", **pods(("reference-a", OLD, "Succeeded"))),
        rule("logs", "pod/drill-a", "--timestamps",
             stdout="2026-05-04T09:58:30.000000001Z step 1/2000 first of this process, from step 0\n"
                    "2026-05-04T09:59:40.5Z step 200/2000 loss 0.3121 checkpointed\n"),
        rule("logs", "pod/drill-b", "--timestamps",
             stdout="2026-05-04T10:06:40.2Z resumed from step 200\n"
                    "2026-05-04T10:07:00.123456789Z step 201/2000 first of this process, from step 200\n"),
        rule("logs", "pod/drill-b", stdout="step 2000/2000 loss 0.0400 checkpointed\n" + summary(drilled_digest)),
        rule("logs", "pod/reference-a", stdout=summary(reference_digest)),
        rule("get", "node", OLD, **node(OLD, provider, "2026-05-04T09:50:00Z", "2026-05-04T09:55:00Z")),
        rule("get", "node", NEW, **node(NEW, vmss_id("1"), "2026-05-04T10:01:10Z", "2026-05-04T10:05:00Z")),
        rule("get", "job", DRILLED, **status("Job", "Complete")),
        rule("get", "job", REFERENCE, **status("Job", "Complete")),
        rule("delete", "job"),
    ]


def test_a_recorded_eviction_becomes_the_eviction_clocks_phases_and_a_drill(tmp_path):
    fake = Fake(tmp_path, timeline(), [rule("simulate-eviction", stdout="")])
    drill, phases = spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert drill == Drill(pool="gpu", node=OLD, weights_match=True)
    measured = {p.name: (p.clock, p.measured_seconds, p.source) for p in phases}
    assert measured == {
        PhaseName.NODE_REPLACED: (Clock.EVICTION, 300.0, f"Node/{NEW} Ready"),
        PhaseName.RUN_RESUMED: (Clock.EVICTION, 420.123456,
                                "Pod/drill-b log: step 201/2000 first of this process, from step 200")}
    (evicted,) = [c[0] for c in fake.calls("az")]
    assert evicted == ["vmss", "simulate-eviction", "--resource-group", NODE_GROUP, "--name", "aks-gpu-12345678-vmss",
                       "--instance-id", "0", "--output", "json"]
    kubectl = [c[0] for c in fake.calls("kubectl")]
    # The reference run starts only once the evicted one has finished; both are removed at the end.
    assert kubectl.index(["-n", "training", "get", "job", DRILLED, "-o", "json"]) < kubectl.index(
        ["-n", "training", "create", "job", REFERENCE, "--from=cronjob/train-run"])
    assert kubectl[-2:] == [["-n", "training", "delete", "job", job, "--ignore-not-found", "--wait=false"]
                            for job in (DRILLED, REFERENCE)]


def test_weights_that_differ_from_the_uninterrupted_run_are_reported(tmp_path):
    fake = Fake(tmp_path, timeline(reference_digest="a0" * 32), [rule("simulate-eviction")])
    drill, _ = spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    assert drill is not None and drill.weights_match is False


def test_a_node_of_node_auto_provisioning_is_evicted_as_the_vm_it_is(tmp_path):
    vm = f"azure:///subscriptions/{SUB}/resourceGroups/{NODE_GROUP}/providers/Microsoft.Compute/virtualMachines/aks-t4-x1"
    fake = Fake(tmp_path, timeline(provider=vm), [rule("simulate-eviction")])
    spot_drill("training", cfg_of("training"), {}, fake.tools, 4 * 3600)
    (evicted,) = [c[0] for c in fake.calls("az")]
    assert evicted[:6] == ["vm", "simulate-eviction", "--resource-group", NODE_GROUP, "--name", "aks-t4-x1"]


def test_a_run_that_does_not_resume_in_time_fails_the_drill_with_what_it_measured(tmp_path):
    rules = timeline()
    rules[2] = rule("get", "pods", f"batch.kubernetes.io/job-name={DRILLED}",
                    answers=[pods(("drill-a", OLD, "Running")), pods(("drill-b", None, "Pending"))])
    fake = Fake(tmp_path, rules, [rule("simulate-eviction")])
    with pytest.raises(DrillFailed, match=rf"spot drill on pool gpu: timed out waiting for job/{DRILLED} to resume") \
            as failed:
        spot_drill("training", cfg_of("training"), {}, fake.tools, 1800)
    assert failed.value.drill == Drill(pool="gpu", node=OLD, weights_match=None)
    assert [(p.name, p.measured_seconds) for p in failed.value.phases] == [(PhaseName.NODE_REPLACED, None),
                                                                            (PhaseName.RUN_RESUMED, None)]
    assert len(fake.calls("az")) == 1 and fake.calls("kubectl")[-1][0][2:4] == ["delete", "job"]


def test_a_copy_of_a_job_is_the_original_spec_without_what_its_controller_derived(tmp_path):
    original = {"metadata": {"name": "train", "namespace": "gpu-basics",
                             "labels": {"app.kubernetes.io/name": "train", "controller-uid": "u1"}},
                "spec": {"backoffLimit": 6, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                         "template": {"metadata": {"labels": {"app.kubernetes.io/name": "train", "job-name": "train",
                                                              "batch.kubernetes.io/job-name": "train",
                                                              "batch.kubernetes.io/controller-uid": "u1"}},
                                      "spec": {"containers": [{"name": "train"}], "restartPolicy": "Never"}}}}
    copy = f"train-drill-{RUN_ID}"
    rules = [rule("get", "job", "train", "-o", stdout=json.dumps(original)), rule("create", "-f")]
    fake = Fake(tmp_path, rules, [])
    p = Probing(fake.tools, cfg_of("spot-from-zero"), {}, RUN_ID, fake.tools.now() + dt.timedelta(hours=1))
    copy_job(p, "gpu-basics", JobCopy("train"), copy)
    (created,) = [json.loads(c[1]["file"]) for c in fake.calls("kubectl") if "create" in c[0]]
    assert created == {"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": copy, "namespace": "gpu-basics",
                                    "labels": {"app.kubernetes.io/name": "train"}},
                       "spec": {"backoffLimit": 6,
                                "template": {"metadata": {"labels": {"app.kubernetes.io/name": "train"}},
                                             "spec": {"containers": [{"name": "train"}], "restartPolicy": "Never"}}}}


@pytest.mark.parametrize(("name", "changes"), [
    ("training", {"gpuPools": [{"name": "gpu", "vmSize": "Standard_NC4as_T4_v3", "priority": "regular",
                                "minCount": 0, "maxCount": 3}]}),
    ("function", {}),
])
def test_no_spot_pool_or_no_training_run_means_no_drill(tmp_path, name, changes):
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
