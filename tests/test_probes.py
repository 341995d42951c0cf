"""Acceptance probes: each kind passes and fails against fake kubectl and az executables answering with recorded
output (tests/fake_cli.py), a hung one times out, no verdict keeps a secret; every committed stack's scenario
declares probes that name only what its render has; and the patterns hold to what the workload code prints."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import time
from typing import Any

import pytest

from components.gpu.operator import NAMESPACE as GPU_OPERATOR_NAMESPACE
from components.monitoring.gpu_utilisation import WHOLE_GPU
from offline.docs import scenario_page
from offline.mocks import SUBSCRIPTION
from offline.render import Render
from offline.stack_files import REPO_ROOT, project_defaults
from ops.e2e.probes import run_probe, run_probes
from program.probes import (
    RUN,
    AllReduceVerdict,
    BlobsWritten,
    BlobUpload,
    ExistingJob,
    GpuMetricUnderLoad,
    HttpAnswers,
    JobCompletes,
    JobFromTemplate,
    JobSetFromTemplate,
    Probe,
    SpotDrill,
    problems,
)
from stacks import REGISTRY
from tests.docker_modules import import_from
from tests.e2e_fakes import RUN_ID, Fake, job_logs, rule, status
from tests.helpers import CRONJOB, DEPLOYMENT, JOB, SERVICE, STACKS, load, pod_spec, shape


def training_cfg():
    """A training-autoscale stack's config (tests/helpers.py SHAPES, as deployed)."""
    return load({**project_defaults(), **shape("training")}).for_deployment(SUBSCRIPTION)


def verdict(fake: Fake, probe: Probe, budget_s: float = 600, outputs: dict[str, Any] | None = None):
    return run_probe(probe, fake.tools, training_cfg(), outputs or {}, RUN_ID, budget_s)


TRAIN = JobCompletes("the training Job finishes", "training", ExistingJob("train"), log_pattern=r'"done": true')
SUMMARY = '{"device": "cuda", "step": 2000, "loss": 0.05, "done": true, "weights_sha256": "ab12"}\n'


# JobCompletes


def test_a_job_that_completes_with_its_pattern_passes_and_keeps_a_short_output(tmp_path):
    fake = Fake(tmp_path, [
        rule("get", "job", "train", answers=[status("Job", None), status("Job", None), status("Job", "Complete")]),
        *job_logs("train", "step 200/2000 loss 0.3 checkpointed\n" * 20 + SUMMARY, "Failed", "Succeeded"),
    ])
    found = verdict(fake, TRAIN)
    assert found.passed and found.name == TRAIN.name
    assert found.seconds == 30.0  # two looks 15 s apart on the probes' clock
    assert len(found.output.splitlines()) <= 3 and "job/train complete" in found.output
    assert ["-n", "training", "logs", "pod/train-1", "--tail=-1"] in [c[0] for c in fake.calls("kubectl")]


@pytest.mark.parametrize(("job", "logs", "why"), [
    (status("Job", "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
     "Traceback (most recent call last):\nRuntimeError: CUDA error: no kernel image\n",
     "job/train failed: BackoffLimitExceeded: Job has reached the specified backoff limit"),
    (status("Job", "Complete"), '{"done": false, "step": 1200}\n',
     "job/train finished, but its log has no match for '\"done\": true'"),
])
def test_a_job_that_fails_or_logs_no_match_fails_with_its_log(tmp_path, job, logs, why):
    fake = Fake(tmp_path, [rule("get", "job", "train", **job), *job_logs("train", logs, "Failed")])
    found = verdict(fake, TRAIN)
    assert not found.passed and found.output.endswith(f"failed: {why}")
    assert logs.strip().splitlines()[-1] in found.output  # the run's own words are kept


def test_a_run_from_a_template_gets_its_blobs_first_and_a_name_of_its_own(tmp_path):
    probe = JobCompletes("a run answers", "batch-inference", JobFromTemplate("batch-predict"), r'"answered": [1-9]',
                         given=(BlobUpload("input", "requests", f"e2e-{RUN}.json", b'{"images": [[0.5]]}'),
                                BlobUpload("input", "models", "ckpt-00000001.pt", b"weights")))
    job = f"batch-predict-e2e-{RUN_ID}"
    fake = Fake(tmp_path, [rule("create", "job", job, stdout=f"job.batch/{job} created\n"),
                           rule("get", "job", job, **status("Job", "Complete")),
                           *job_logs(job, '{"answered": 1, "pending": 1}\n')],
                [rule("upload-batch", stdout="[]")])
    found = verdict(fake, probe, outputs={"storageAccounts": {"input": "stinputabc"}})
    assert found.passed, found.output
    (requests, requests_files), (models, models_files) = [(c[0], c[1]["files"]) for c in fake.calls("az")]
    assert requests_files == {f"e2e-{RUN_ID}.json": '{"images": [[0.5]]}'} and models_files == {
        "ckpt-00000001.pt": "weights"}
    assert requests[:6] == ["storage", "blob", "upload-batch", "--auth-mode", "login", "--account-name"]
    assert requests[6:9] == ["stinputabc", "--destination", "requests"]
    assert requests[-4:] == ["--overwrite", "true", "--output", "json"]
    assert ["-n", "batch-inference", "create", "job", job, "--from=cronjob/batch-predict"] in [
        c[0] for c in fake.calls("kubectl")]


def test_an_upload_refused_before_its_data_role_takes_effect_is_tried_again(tmp_path):
    """Audit 37 NIT: a role assignment `pulumi up` just made takes minutes to take effect; the upload failed the
    probe at its first 403."""
    probe = JobCompletes("a run answers", "batch-inference", JobFromTemplate("batch-predict"),
                         given=(BlobUpload("input", "requests", "r.json", b"{}"),))
    job = f"batch-predict-e2e-{RUN_ID}"
    fake = Fake(tmp_path, [rule("create", "job", job), rule("get", "job", job, **status("Job", "Complete")),
                           *job_logs(job, "done\n")],
                [rule("upload-batch", answers=[{"stderr": "ERROR: This request is not authorized to perform this "
                                                          "operation using this permission.", "exit": 1},
                                               {"stdout": "[]"}])])
    found = verdict(fake, probe, outputs={"storageAccounts": {"input": "stinputabc"}})
    assert found.passed and len(fake.calls("az")) == 2


def test_a_jobset_run_is_made_from_its_kept_manifest_with_the_owner_claims_uid(tmp_path):
    manifest = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "nccl-allreduce", "namespace": "distributed",
                             "ownerReferences": [{"kind": "PersistentVolumeClaim", "name": "checkpoints-ab",
                                                  "uid": "OWNER_UID"}]}}
    probe = JobCompletes("all-reduce", "distributed", JobSetFromTemplate("nccl-allreduce", "nccl-allreduce-jobset",
                                                                          "jobset.json"),
                         leader="jobset.sigs.k8s.io/jobset-name=nccl-allreduce,jobset.sigs.k8s.io/job-index=0")
    fake = Fake(tmp_path, [
        rule("delete", "jobset", "nccl-allreduce"),
        rule("get", "jobset", "nccl-allreduce", "--ignore-not-found", answers=[
            {"stdout": "jobset.jobset.x-k8s.io/nccl-allreduce\n"}, {"stdout": ""}]),
        rule("get", "configmap", "nccl-allreduce-jobset",
             stdout=json.dumps({"data": {"jobset.json": json.dumps(manifest)}})),
        rule("get", "pvc", "checkpoints-ab", stdout="2f4c8e0a-1111-4222-8333-944455556666"),
        rule("create", "-f", stdout="jobset created\n"),
        rule("get", "jobset", "nccl-allreduce", **status("JobSet", "Completed")),
        rule("logs", "-l", stdout="ok\n"),
    ])
    assert verdict(fake, probe).passed
    (created,) = [c[1]["file"] for c in fake.calls("kubectl") if "create" in c[0]]
    owner = json.loads(created)["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "2f4c8e0a-1111-4222-8333-944455556666"
    deleted, gone, *_ = [c[0] for c in fake.calls("kubectl")]
    assert deleted == ["-n", "distributed", "delete", "jobset", "nccl-allreduce", "--ignore-not-found", "--wait=false"]
    assert gone == ["-n", "distributed", "get", "jobset", "nccl-allreduce", "--ignore-not-found", "-o", "name"]


# HttpAnswers


ANSWER = HttpAnswers("it answers", "training", "predict", 80, "/predict", r'"label": \d', method="POST",
                     body='{"images": [[0.0]]}')


def test_a_service_that_answers_through_its_port_forward_passes(tmp_path):
    body = '{"step": 2000, "predictions": [{"label": 1, "confidence": 0.93}]}'
    fake = Fake(tmp_path, [rule("port-forward", "service/predict", serve={"status": 200, "body": body})])
    found = verdict(fake, ANSWER)
    assert found.passed, found.output
    assert fake.requests() == [["POST", "/predict", '{"images": [[0.0]]}']]
    (call,) = [c[0] for c in fake.calls("kubectl")]
    assert call == ["-n", "training", "port-forward", "service/predict", ":80", "--address", "127.0.0.1"]


def test_an_endpoint_probe_says_when_it_got_no_answer_before_its_first_one(tmp_path):
    body = '{"step": 2000, "predictions": [{"label": 1, "confidence": 0.93}]}'
    fake = Fake(tmp_path, [rule("port-forward", "service/predict", answers=[
        {"serve": {"status": 503, "body": "no checkpoint yet"}}, {"serve": {"status": 200, "body": body}}])])
    found = verdict(fake, ANSWER)
    assert found.passed and found.answered is not None and found.unanswered is not None
    assert (found.answered - found.unanswered).total_seconds() == 15.0  # one look apart
    (tmp_path / "again").mkdir()
    at_once = verdict(Fake(tmp_path / "again", [rule("port-forward", serve={"status": 200, "body": body})]), ANSWER)
    assert at_once.answered is not None and at_once.unanswered is None


def test_a_service_that_is_not_ready_until_the_timeout_fails_with_its_last_answer(tmp_path):
    fake = Fake(tmp_path, [rule("port-forward", "service/predict",
                                serve={"status": 503, "body": '{"error": "no checkpoint yet"}'})])
    found = verdict(fake, ANSWER, budget_s=40)
    assert not found.passed
    assert "HTTP 503" in found.output and "timed out waiting for service/predict" in found.output
    assert len(fake.requests()) == 3  # at 0, 15 and 30 s


def test_a_port_forward_that_fails_is_retried_and_reported(tmp_path):
    fake = Fake(tmp_path, [rule("port-forward", stderr='error: services "predict" not found\n', exit=1)])
    found = verdict(fake, ANSWER, budget_s=20)
    assert not found.passed and 'error: services "predict" not found' in found.output
    assert len(fake.calls("kubectl")) == 2  # at 0 and 15 s


# BlobsWritten


CHECKPOINTS = BlobsWritten("checkpoints in blob", "ckpt", "checkpoints", "digitnet/ckpt-", count=2)


def test_blobs_that_appear_under_the_prefix_pass(tmp_path):
    listed = [{"name": "digitnet/ckpt-00000200.pt"}, {"name": "digitnet/ckpt-00000400.pt"}]
    fake = Fake(tmp_path, [], [rule("list", answers=[{"stdout": "[]"}, {"stdout": json.dumps(listed[:1])},
                                                     {"stdout": json.dumps(listed)}])])
    found = verdict(fake, CHECKPOINTS, outputs={"storageAccounts": {"ckpt": "stckptabc"}})
    assert found.passed and found.seconds == 30.0
    first = fake.calls("az")[0][0]
    assert first == ["storage", "blob", "list", "--auth-mode", "login", "--account-name", "stckptabc",
                     "--container-name", "checkpoints", "--prefix", "digitnet/ckpt-", "--output", "json"]


def test_too_few_blobs_by_the_timeout_fail_and_a_probe_after_a_failed_run_is_not_checked(tmp_path):
    fake = Fake(tmp_path, [rule("get", "job", "train", **status("Job", "Failed", "DeadlineExceeded")),
                           *job_logs("train", "")],
                [rule("list", stdout=json.dumps([{"name": "digitnet/ckpt-00000200.pt"}]))])
    found = verdict(fake, CHECKPOINTS, budget_s=60)
    assert not found.passed and "1 blob(s) under checkpoints/digitnet/ckpt-" in found.output


def with_probes(monkeypatch, stack: str, probes: tuple[Probe, ...]) -> None:
    monkeypatch.setitem(REGISTRY, stack, dataclasses.replace(REGISTRY[stack], probes=probes))


def test_probes_run_in_order_and_one_after_a_failed_run_fails_unchecked(tmp_path, monkeypatch):
    with_probes(monkeypatch, "training-autoscale",
                (TRAIN, BlobsWritten("its checkpoints", "ckpt", "checkpoints", "digitnet/", after=TRAIN.name)))
    fake = Fake(tmp_path, [rule("get", "job", "train", **status("Job", "Failed", "DeadlineExceeded")),
                           *job_logs("train", "killed\n", "Failed")])
    first, second = run_probes("training", training_cfg(), {}, fake.tools, 3600)
    assert not first.passed and not second.passed
    assert second.output == "not checked: 'the training Job finishes' failed" and fake.calls("az") == []


# GpuMetricUnderLoad


def pods_of(*names: str, phase: str = "Running") -> dict[str, Any]:
    return {"stdout": json.dumps({"items": [{"metadata": {"name": n}, "status": {"phase": phase}} for n in names]})}


LOAD = GpuMetricUnderLoad("each service's GPU series is above zero", "gpu-sharing",
                          ("app.kubernetes.io/name=infer-1", "app.kubernetes.io/name=infer-2"),
                          JobFromTemplate("load-test"))


def exporter_page(busy: dict[str, float]) -> str:
    """The DCGM exporter's /metrics as it writes a time-sliced T4 shared by pods (``KUBERNETES_VIRTUAL_GPUS``: the
    GPU's series once per pod using it, labelled with the pod's namespace, name and container: dcgm-exporter
    internal/pkg/transformation podAttribute/namespaceAttribute/containerAttribute)."""
    head = ['# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).', '# TYPE DCGM_FI_DEV_GPU_UTIL gauge']
    gpu = ('gpu="0",UUID="GPU-1c2d3e4f-5a6b-7c8d-9e0f-a1b2c3d4e5f6",pci_bus_id="00000001:00:00.0",device="nvidia0",'
           'modelName="Tesla T4",Hostname="aks-shared-23456789-vmss000000",DCGM_FI_DRIVER_VERSION="595.91.07"')
    rows = [f'{WHOLE_GPU}{{{gpu},container="function",namespace="gpu-sharing",pod="{pod}"}} {value:g}'
            for pod, value in busy.items()]
    memory = [f'DCGM_FI_DEV_FB_USED{{{gpu},container="function",namespace="gpu-sharing",pod="{pod}"}} 1893'
              for pod in busy]
    return "\n".join([*head, *rows, "# TYPE DCGM_FI_DEV_FB_USED gauge", *memory]) + "\n"


BUSY = {"infer-1-7c9f6d8b5-abcde": 41, "infer-2-5d8c7b6f4-fghij": 38, "notebook-6b7c8d9e0-klmno": 0}


def metric_rules(page: str) -> list[dict[str, Any]]:
    return [rule("-n", GPU_OPERATOR_NAMESPACE, "get", "pods", **pods_of("nvidia-dcgm-exporter-x7k2p")),
            rule("port-forward", "pod/nvidia-dcgm-exporter-x7k2p", ":9400", serve={"status": 200, "body": page}),
            rule("get", "pods", "app.kubernetes.io/name=infer-1", **pods_of("infer-1-7c9f6d8b5-abcde")),
            rule("get", "pods", "app.kubernetes.io/name=infer-2", **pods_of("infer-2-5d8c7b6f4-fghij"))]


def test_every_service_busy_on_the_exporters_page_passes_and_its_load_job_is_removed(tmp_path):
    fake = Fake(tmp_path, [*metric_rules(exporter_page(BUSY)), rule("create", "job"), rule("delete", "job")])
    found = verdict(fake, LOAD)
    assert found.passed, found.output
    calls = [c[0] for c in fake.calls("kubectl")]
    load = f"load-test-e2e-{RUN_ID}"
    assert calls[0] == ["-n", "gpu-sharing", "create", "job", load, "--from=cronjob/load-test"]
    assert calls[-1] == ["-n", "gpu-sharing", "delete", "job", load, "--ignore-not-found", "--wait=false"]
    assert ["GET", "/metrics", ""] in fake.requests()


def test_a_service_idle_while_the_load_runs_fails_naming_it_and_the_load_is_run_again(tmp_path):
    idle = exporter_page({**BUSY, "infer-2-5d8c7b6f4-fghij": 0})
    fake = Fake(tmp_path, [*metric_rules(idle), rule("create", "job"), rule("delete", "job"),
                           rule("get", "job", **status("Job", "Complete"))])
    found = verdict(fake, LOAD, budget_s=40)
    assert not found.passed
    assert "app.kubernetes.io/name=infer-2: {'infer-2-5d8c7b6f4-fghij': 0.0}" in found.output
    created = [c[0][4] for c in fake.calls("kubectl") if c[0][2:4] == ["create", "job"]]
    assert created[:2] == [f"load-test-e2e-{RUN_ID}", f"load-test-e2e-{RUN_ID}-2"]


# AllReduceVerdict


ALLREDUCE = AllReduceVerdict("all-reduce passes", "distributed",
                             JobSetFromTemplate("nccl-allreduce", "nccl-allreduce-jobset", "jobset.json"),
                             "jobset.sigs.k8s.io/jobset-name=nccl-allreduce,jobset.sigs.k8s.io/job-index=0",
                             warn_below=300.0, faulty_below=300.0)


def allreduce_rules(report: dict[str, Any], condition: str) -> list[dict[str, Any]]:
    sizes = "".join(f"{1 << n:>12} B  {100.0:>10} us  algbw {1.0:>8} GB/s  busbw {1.75:>8} GB/s\n"
                    for n in range(20, 35, 2))
    return [rule("delete", "jobset"), rule("get", "jobset", "--ignore-not-found", stdout=""),
            rule("get", "configmap", stdout=json.dumps({"data": {"jobset.json": "{}"}})),
            rule("create", "-f"), rule("get", "jobset", **status("JobSet", condition)),
            rule("logs", "-l", stdout=sizes + json.dumps(report) + "\n")]


REPORT = {"processes": 16, "backend": "nccl", "device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "sizes": [],
          "expected_busbw_gbps": 450.0, "warn_below_gbps": 300.0, "faulty_below_gbps": 300.0}


@pytest.mark.parametrize(("report", "condition", "passed", "said"), [
    ({**REPORT, "verdict": "pass", "best_busbw_gbps": 361.2}, "Completed", True, "pass: best 361.2 GB/s"),
    ({**REPORT, "verdict": "faulty", "best_busbw_gbps": 212.5}, "Failed", False,
     "verdict faulty: best 212.5 GB/s, below 300.0 GB/s"),
    ({**REPORT, "verdict": "pass", "best_busbw_gbps": 361.2, "warn_below_gbps": 100.0}, "Completed", False,
     "the check ran with thresholds (warn, faulty) (100.0, 300.0), the size's are (300.0, 300.0)"),
])
def test_the_all_reduce_verdict_is_held_to_the_sizes_thresholds(tmp_path, report, condition, passed, said):
    found = verdict(Fake(tmp_path, allreduce_rules(report, condition)), ALLREDUCE)
    assert found.passed is passed and said in found.output


def test_a_size_without_published_thresholds_passes_on_its_measured_figures(tmp_path):
    report = {"processes": 2, "verdict": "measured", "best_busbw_gbps": 21.3}
    probe = AllReduceVerdict(ALLREDUCE.name, ALLREDUCE.namespace, ALLREDUCE.run, ALLREDUCE.leader, None)
    found = verdict(Fake(tmp_path, allreduce_rules(report, "Completed")), probe)
    assert found.passed and "measured 21.3 GB/s" in found.output


# Timeouts and secrets


def test_a_hung_probe_times_out_on_its_own_budget(tmp_path):
    fake = Fake(tmp_path, [rule("get", "job", "train", sleep=60)])
    fake.tools.now, fake.tools.sleep = (lambda: dt.datetime.now(dt.UTC)), time.sleep
    began = time.monotonic()
    found = verdict(fake, TRAIN, budget_s=2)
    assert time.monotonic() - began < 20
    assert not found.passed and "timed out" in found.output


def test_the_probes_overall_budget_stops_the_ones_left(tmp_path, monkeypatch):
    with_probes(monkeypatch, "training-autoscale", (
        JobCompletes("slow", "training", ExistingJob("train"), timeout_s=600),
        JobCompletes("never run", "training", ExistingJob("train"))))
    fake = Fake(tmp_path, [rule("get", "job", "train", **status("Job", None))])
    first, second = run_probes("training", training_cfg(), {}, fake.tools, 300)
    assert not first.passed and first.seconds == 300.0 and "timed out waiting for job/train" in first.output
    assert second.output == "not run: the probes' 300 s were spent"


def test_no_verdict_keeps_a_credential_or_an_azure_id(tmp_path):
    leaked = ("DefaultEndpointsProtocol=https;AccountName=stckpt;AccountKey=c2VjcmV0a2V5c2VjcmV0a2V5c2VjcmV0a2V5"
              "c2VjcmV0a2V5Cg==;EndpointSuffix=core.windows.net\n"
              "token eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJodHRwcyJ9.c2lnbmF0dXJl\n"
              "https://stckpt.blob.core.windows.net/checkpoints?sv=2024-05-04&sig=AbCdEf0123456789%2Bxyz\n"
              "/subscriptions/6f1e9d2c-3b4a-4c5d-8e7f-001122334455/resourceGroups/mc_rg/providers/x\n")
    fake = Fake(tmp_path, [rule("get", "job", "train", **status("Job", "Failed")),
                           *job_logs("train", leaked, "Failed")])
    found = verdict(fake, TRAIN)
    assert not found.passed and "AccountName=stckpt" in found.output
    for secret in ("c2VjcmV0a2V5", "eyJhbGciOi", "AbCdEf0123456789", "6f1e9d2c-3b4a"):
        assert secret not in found.output
    assert "/subscriptions/<id>/resourceGroups/mc_rg" in found.output and "AccountKey=<hidden" in found.output


# What every committed stack declares, checked against its render.


def kubernetes_objects(render: Render) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    found = {}
    for r in render.resources:
        if r.type.startswith("kubernetes:"):
            meta = r.revealed.get("metadata") or {}
            found[(r.type, meta.get("namespace"), meta.get("name"))] = r.revealed
    return found


KAITO_WORKSPACE = "kubernetes:kaito.sh/v1beta1:Workspace"
"""KAITO writes a Service of its Workspace's name, port 80 ("http", to 5000): kaito-project/kaito
pkg/workspace/resources GenerateServiceManifest."""


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (pair.split("=", 1) for pair in selector.split(",")))


def run_problems(objects, cfg, namespace: str, run, leader: str | None) -> list[str]:
    if isinstance(run, ExistingJob):
        return [] if (JOB, namespace, run.name) in objects else [f"no Job {namespace}/{run.name}"]
    if isinstance(run, JobFromTemplate):
        return [] if (CRONJOB, namespace, run.template) in objects else [f"no CronJob {namespace}/{run.template}"]
    config_map = objects.get(("kubernetes:core/v1:ConfigMap", namespace, run.config_map))
    if config_map is None or run.key not in config_map.get("data", {}):
        return [f"no ConfigMap {namespace}/{run.config_map} with {run.key}"]
    manifest = json.loads(config_map["data"][run.key])
    found = [] if manifest["metadata"]["name"] == run.name else [f"{run.config_map} holds {manifest['metadata']}"]
    if leader is not None and f"jobset.sigs.k8s.io/jobset-name={run.name}" not in leader.split(","):
        found.append(f"leader {leader} is not of {run.name}")
    return found


def storage_problems(cfg, role: str, container: str) -> list[str]:
    accounts = {a.role: a.container_names for a in cfg.storage.accounts}
    return [] if container in accounts.get(role, ()) else [f"no container {container} in role {role}: {accounts}"]


def unknown_names(render: Render, probe: Probe) -> list[str]:
    """What ``probe`` names that the render does not declare."""
    objects, cfg = kubernetes_objects(render), render.cfg
    if isinstance(probe, JobCompletes):
        return [*run_problems(objects, cfg, probe.namespace, probe.run, probe.leader),
                *(p for b in probe.given for p in storage_problems(cfg, b.role, b.container))]
    if isinstance(probe, HttpAnswers):
        service = objects.get((SERVICE, probe.namespace, probe.service))
        if service is None:
            kaito = (KAITO_WORKSPACE, probe.namespace, probe.service) in objects
            return [] if kaito and probe.port == 80 else [f"no Service {probe.namespace}/{probe.service}"]
        ports = [p["port"] for p in service["spec"]["ports"]]
        return [] if probe.port in ports else [f"Service {probe.service} has ports {ports}, not {probe.port}"]
    if isinstance(probe, BlobsWritten):
        return storage_problems(cfg, probe.role, probe.container)
    if isinstance(probe, GpuMetricUnderLoad):
        templates = [o["spec"]["template"]["metadata"]["labels"] for (t, ns, _), o in objects.items()
                     if t == DEPLOYMENT and ns == probe.namespace]
        return [*run_problems(objects, cfg, probe.namespace, probe.load, None),
                *(f"no Deployment's pods match {s}" for s in probe.pods
                  if not any(selector_matches(s, labels) for labels in templates)),
                *([] if ("kubernetes:core/v1:Namespace", None, probe.exporter_namespace) in objects
                  else [f"no namespace {probe.exporter_namespace}"])]
    assert isinstance(probe, AllReduceVerdict)
    return run_problems(objects, cfg, probe.namespace, probe.run, probe.leader)


def drill_problems(render: Render, drill: SpotDrill) -> list[str]:
    """The drill's run exists, takes its pool, keeps its checkpoints where they outlive the evicted node (a
    persistent volume, not its pod's emptyDir: audit 37 W2), and starts from nothing each time (a folder named after
    its Job)."""
    found = kubernetes_objects(render).get((CRONJOB, drill.namespace, drill.run.template))
    if found is None:
        return [f"no run {drill.run} in {drill.namespace}"]
    pod = pod_spec(found)
    (trainer,) = pod["containers"]
    folder = trainer["command"][trainer["command"].index("--checkpoints") + 1]
    fresh_folder = "$(" in folder and any(
        e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "").endswith("['batch.kubernetes.io/job-name']")
        for e in trainer.get("env", []))
    mount = next(m for m in trainer["volumeMounts"] if folder.startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    return [*([] if drill.pool in set(pod["nodeSelector"].values()) else [f"its pods take {pod['nodeSelector']}"]),
            *([] if "persistentVolumeClaim" in volume else ["its checkpoints would go with the evicted node"]),
            *([] if fresh_folder else ["it would resume from an earlier run's checkpoints"])]


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_declares_probes_that_name_what_its_render_has(render_of, stack):
    render = render_of(stack)
    scenario = REGISTRY[render.cfg.scenario]
    probes = scenario.probes_of(render.cfg, render.cfg.settings)
    assert problems(probes) == []
    assert {probe.name: unknown_names(render, probe) for probe in probes} == {probe.name: [] for probe in probes}
    # Endpoint probes first: they ask from the end of `pulumi up`, so the run can see when the endpoint came up.
    kinds = [isinstance(probe, HttpAnswers) for probe in probes]
    assert kinds == sorted(kinds, reverse=True)
    drill = scenario.drill_of(render.cfg, render.cfg.settings)
    if drill is not None:
        assert drill_problems(render, drill) == []
    elif render.cfg.scenario == "gpu-basics":  # decided from the render: its run's checkpoints are in its pod
        volumes = pod_spec(render.named("training-job", JOB).revealed)["volumes"]
        assert [v for v in volumes if v["name"] == "checkpoints"] == [{"name": "checkpoints",
                                                                       "emptyDir": {"sizeLimit": "5Gi"}}]


def test_the_render_check_catches_a_probe_naming_what_the_stack_lacks(render_shape):
    render = render_shape("training")
    assert unknown_names(render, JobCompletes("x", "training", ExistingJob("trian"))) == ["no Job training/trian"]
    assert unknown_names(render, HttpAnswers("x", "training", "predict", 8080, "/", ".")) == [
        "Service predict has ports [80], not 8080"]
    assert unknown_names(render, BlobsWritten("x", "ckpt", "checkpoint", "")) == [
        "no container checkpoint in role ckpt: {'ckpt': ('checkpoints',)}"]
    assert drill_problems(render, SpotDrill("training", "gpu", JobFromTemplate("train-run"))) == []
    in_pod = render_shape("spot-from-zero")  # gpu-basics: its training keeps its checkpoints in an emptyDir
    assert in_pod.named("training-job", JOB) is not None
    assert REGISTRY["gpu-basics"].drill_of(in_pod.cfg, in_pod.cfg.settings) is None


def test_every_scenario_page_says_what_its_acceptance_is_and_where_it_is_declared():
    for name in REGISTRY:
        page = REPO_ROOT / scenario_page(name)
        assert "**Acceptance** ([`probes.py`](probes.py)" in page.read_text(), name
        assert page.with_name("probes.py").is_file(), name


def test_every_scenario_must_declare_its_probes():
    from program.scenario import Scenario
    with pytest.raises(TypeError, match="probes"):
        Scenario(name="x", summary="x", seed="-", deploy=lambda cfg, st, platform: {})  # type: ignore[call-arg]
    assert problems(()) == ["no acceptance probe declared"]


# The patterns hold to what the workload code prints.


def test_the_training_probes_look_for_what_train_py_writes(tmp_path, capsys):
    from stacks.training_autoscale.probes import CHECKPOINT_PREFIX, TRAINING_DONE
    train = import_from("jobs", "train")
    train.train(train.parse_args(["--checkpoints", str(tmp_path), "--steps", "4", "--checkpoint-every", "2",
                                  "--batch-size", "8", "--data", "synthetic", "--device", "cpu"]))
    assert re.search(TRAINING_DONE, capsys.readouterr().out.splitlines()[-1])
    assert sorted(p.name for p in tmp_path.glob(f"{CHECKPOINT_PREFIX}*")) == ["ckpt-00000002.pt", "ckpt-00000004.pt"]


def test_the_committed_checkpoint_is_one_the_batch_job_loads_and_a_run_needs_no_torch_to_upload_it(tmp_path):
    """Audit 37 W4: batch-inference's probe made its checkpoint with train.py, which needs torch, on a machine
    `make e2e` gives none. The committed one (scripts/e2e_checkpoint.py) is read as bytes, and loads as the batch
    job loads the model it is given."""
    import subprocess
    import sys

    import torch

    from ops.e2e.probes import DIGITNET_CHECKPOINT
    batch_predict = import_from("jobs", "batch_predict")
    (tmp_path / DIGITNET_CHECKPOINT.name).write_bytes((REPO_ROOT / DIGITNET_CHECKPOINT).read_bytes())
    step, model = batch_predict.load_model(tmp_path, torch.device("cpu"))
    assert step == 1 and type(model).__name__ == "DigitNet"
    without_torch = ("import sys; sys.modules['torch'] = None; from program.probes import Content; "
                     "from ops.e2e.probes import MAKERS; print(len(MAKERS[Content.DIGITNET_CHECKPOINT]()))")
    made = subprocess.run([sys.executable, "-c", without_torch], cwd=REPO_ROOT, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert int(made.stdout) == (REPO_ROOT / DIGITNET_CHECKPOINT).stat().st_size


def test_the_prediction_probe_is_a_body_the_service_parses_and_its_answer_matches(tmp_path):
    from stacks.training_autoscale.probes import ONE_IMAGE, PREDICTED
    model, predict = import_from("jobs", "model"), import_from("jobs", "predict")
    checkpoints = import_from("jobs", "checkpoints")
    import torch
    checkpoints.save_atomic({"model": model.DigitNet().state_dict(), "step": 7}, checkpoints.checkpoint_path(
        tmp_path, 7))
    answer = predict.Predictor(tmp_path).predict(model.parse_images(ONE_IMAGE.encode()))
    assert re.search(PREDICTED, json.dumps({"step": 7, "predictions": answer})) and torch.is_tensor(
        model.parse_images(ONE_IMAGE.encode()))


def test_the_function_status_probe_matches_the_seeds_text_on_cuda_only(monkeypatch):
    from stacks.function_gpu.probes import ON_CUDA
    status_module = import_from("function", "device_status")
    monkeypatch.setattr(status_module.torch.cuda, "is_available", lambda: True)
    assert re.search(ON_CUDA, status_module.status_line())
    monkeypatch.setattr(status_module.torch.cuda, "is_available", lambda: False)
    assert not re.search(ON_CUDA, status_module.status_line())


def test_the_all_reduce_probe_reads_the_verdict_allreduce_py_writes():
    allreduce = import_from("jobs", "allreduce")
    rows = [{"busbw_gbps": 361.2}]
    report = allreduce.verdict(rows, 450.0, 300.0, 300.0, True)
    assert set(report) >= {"verdict", "best_busbw_gbps", "warn_below_gbps", "faulty_below_gbps"}
    assert allreduce.verdict(rows, None, None, None, True)["verdict"] == "measured"


def test_the_gpu_sharing_answer_probe_is_a_body_the_function_parses():
    from stacks.gpu_sharing.probes import ANSWERED, QUESTION
    request = import_from("function", "answer_request")
    queries, batch = request.parse_queries(QUESTION.encode())
    assert len(queries) == 1 and not batch
    assert re.search(ANSWERED, json.dumps([{"answer": "x", "score": 0.5123, "start": 0, "end": 1}]))
