"""Kueue queues the GPU Job fan-outs (av-resim's batches, training-autoscale's runs) within what their pools hold
at their maximum size, so a batch larger than the pools waits instead of pending pods forever."""

from __future__ import annotations

import pytest
import yaml

from components.autoscaling.kueue import manager_config
from offline.report import helm_release, manifest
from program import outputs
from tests import upstream
from tests.helpers import render_with, stack_config_of

KUEUE = "0.19.2"
QUEUED_STACKS = ("av-resim", "training-autoscale")
KINDS = {"ResourceFlavor": "resourceflavors.kueue.x-k8s.io", "ClusterQueue": "clusterqueues.kueue.x-k8s.io",
         "LocalQueue": "localqueues.kueue.x-k8s.io"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
QUOTAS = {
    # 5 NC4as_T4_v3 (4 vCPUs, 28 GiB, one T4 time-sliced in 2) and 2 NC48ads_A100_v4 (48 vCPUs, 440 GiB, 2 A100s).
    "av-resim": {"nc4ast4": {"cpu": "20", "memory": "140Gi", "nvidia.com/gpu": "10"},
                 "nc48a100": {"cpu": "96", "memory": "880Gi", "nvidia.com/gpu": "4"}},
    # 3 NC4as_T4_v3: the train Job and the default 3 runs ask for 4 GPUs, so one run waits for a free T4.
    "training-autoscale": {"gpu": {"cpu": "12", "memory": "84Gi", "nvidia.com/gpu": "3"}},
}


def kueue_objects(render, kind: str) -> list[dict]:
    return [manifest(r) for r in render.resources
            if r.type == f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}"]


def gpu_jobs(render) -> dict[str, tuple[dict, dict]]:
    """Every GPU Job and Job template: name -> (the Job's metadata, its pod spec)."""
    found = {}
    for r in render.resources:
        if r.type == "kubernetes:batch/v1:Job":
            job = manifest(r)
            meta, spec = job["metadata"], job["spec"]
        elif r.type == "kubernetes:batch/v1:CronJob":
            cron = manifest(r)
            meta, spec = cron["spec"]["jobTemplate"]["metadata"], cron["spec"]["jobTemplate"]["spec"]
            meta = {**meta, "name": cron["metadata"]["name"], "namespace": cron["metadata"]["namespace"]}
        else:
            continue
        pod = spec["template"]["spec"]
        if any("nvidia.com/gpu" in c["resources"].get("limits", {}) for c in pod["containers"]):
            found[meta["name"]] = (meta, spec)
    return found


@pytest.mark.parametrize("stack", QUEUED_STACKS)
def test_kueues_objects_fit_the_pinned_crds(render_of, stack):
    r = render_of(stack)
    for kind, crd in KINDS.items():
        found = kueue_objects(r, kind)
        assert found, kind
        for obj in found:
            upstream.validate_against_crd(obj, upstream.operator_crd("kueue", KUEUE, crd))


@pytest.mark.parametrize("stack", QUEUED_STACKS)
def test_the_cluster_queue_holds_what_each_gpu_pool_holds_at_its_maximum_size(render_of, stack):
    (queue,) = kueue_objects(render_of(stack), "ClusterQueue")
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert {f["name"]: {q["name"]: q["nominalQuota"] for q in f["resources"]} for f in group["flavors"]} == \
        QUOTAS[stack]
    # A batch that does not fit must not hold back smaller Jobs queued after it.
    assert queue["spec"]["queueingStrategy"] == "BestEffortFIFO"


@pytest.mark.parametrize("stack", QUEUED_STACKS)
def test_each_flavor_is_its_pool_labels_and_taints(render_of, stack):
    r = render_of(stack)
    pools = {p.inputs["agentPoolName"]: p.inputs for p in r.of_type("azure-native:containerservice:AgentPool")}
    for flavor in kueue_objects(r, "ResourceFlavor"):
        pool = pools[flavor["metadata"]["name"]]
        assert flavor["spec"]["nodeLabels"] == {"kubernetes.azure.com/agentpool": pool["agentPoolName"]}
        taints = {f"{t['key']}={t['value']}:{t['effect']}" for t in flavor["spec"]["nodeTaints"]}
        assert taints == set(pool.get("nodeTaints", []))


@pytest.mark.parametrize("stack", QUEUED_STACKS)
def test_every_gpu_job_is_queued_and_admissible_to_its_pools_flavor(render_of, stack):
    """Kueue gives a Job a flavor only when its pods select the flavor's labels and tolerate its taints, and
    refuses resources the ClusterQueue does not cover: a Job failing either would wait forever."""
    r = render_of(stack)
    (local,) = kueue_objects(r, "LocalQueue")
    (queue,) = kueue_objects(r, "ClusterQueue")
    covered = set(queue["spec"]["resourceGroups"][0]["coveredResources"])
    flavors = {f["metadata"]["name"]: f["spec"] for f in kueue_objects(r, "ResourceFlavor")}
    jobs = gpu_jobs(r)
    assert jobs
    for name, (meta, spec) in jobs.items():
        assert meta["labels"][QUEUE_LABEL] == local["metadata"]["name"], name
        assert meta["namespace"] == local["metadata"]["namespace"], name
        pod = spec["template"]["spec"]
        # The queue is the Job's: on a pod template Kueue would manage each pod on its own.
        assert QUEUE_LABEL not in spec["template"]["metadata"].get("labels", {}), name
        fitting = [f for f, s in flavors.items()
                   if s["nodeLabels"].items() <= pod["nodeSelector"].items()
                   and all(any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"]
                               and t.get("value", taint["value"]) == taint["value"]
                               for t in pod.get("tolerations", []))
                           for taint in s["nodeTaints"])]
        assert len(fitting) == 1, (name, fitting)
        for c in pod["containers"] + pod.get("initContainers", []):
            assert set(c["resources"]["requests"]) | set(c["resources"]["limits"]) <= covered, (name, c["name"])


def test_indexed_batches_start_at_the_parallelism_that_fits(render_of):
    """Partial admission (beta, on by default since Kueue 0.5): a batch larger than the quota runs in waves."""
    jobs = gpu_jobs(render_of("av-resim"))
    for name in ("gpu-test", "gpu-io"):
        meta, spec = jobs[name]
        assert spec["completionMode"] == "Indexed"
        assert meta["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "1"


@pytest.mark.parametrize("stack", QUEUED_STACKS)
def test_kueue_manages_only_jobs_and_only_in_the_queued_namespace(render_of, stack):
    r = render_of(stack)
    release = helm_release(r.named("kueue-release"))
    assert release["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and release["version"] == KUEUE
    image = release["values"]["controllerManager"]["manager"]["image"]
    assert (image["repository"], image["tag"]) == ("registry.k8s.io/kueue/kueue", f"v{KUEUE}")
    config = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["integrations"] == {"frameworks": ["batch/job"]}
    (local,) = kueue_objects(r, "LocalQueue")
    namespaces = [local["metadata"]["namespace"]]
    (selector,) = config["managedJobsNamespaceSelector"]["matchExpressions"]
    assert selector == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
    (queue,) = kueue_objects(r, "ClusterQueue")
    assert queue["spec"]["namespaceSelector"]["matchExpressions"] == [selector]


def test_the_manager_config_is_the_charts_but_for_what_it_manages():
    """Replacing the chart's config string must not drop its ports, leader election or rate limits."""
    chart = yaml.safe_load(upstream.chart_values("kueue")["managerConfig"]["controllerManagerConfigYaml"])
    ours = manager_config(["training"])
    changed = {"integrations", "managedJobsNamespaceSelector"}
    assert {k: v for k, v in ours.items() if k not in changed} == {k: v for k, v in chart.items() if k not in changed}
    assert set(chart["integrations"]["frameworks"]) >= {"batch/job", "pod", "deployment", "statefulset"}


def test_the_train_job_waits_for_its_queue(render_of):
    """Kueue's webhook suspends a queued Job at creation: one created before the webhook and LocalQueue exist
    would start at once, outside the quota."""
    job = render_of("training-autoscale").named("training-job", "kubernetes:batch/v1:Job")
    assert {"kueue-release", "kueue-local-queue-training", "kueue-cluster-queue"} <= set(job.depends_on)


def test_training_runs_checkpoint_under_their_own_job_name(render_of):
    r = render_of("training-autoscale")
    meta, spec = gpu_jobs(r)["train-run"]
    assert meta["labels"]["app.kubernetes.io/component"] == "run"
    (trainer,) = spec["template"]["spec"]["containers"]
    command = trainer["command"]
    assert command[command.index("--checkpoints") + 1] == "/mnt/checkpoints/runs/$(RUN)"
    assert {"name": "RUN", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}} in trainer["env"]
    submit = r.outputs[outputs.SUBMIT_TRAINING_RUNS]
    assert "seq 1 3" in submit and "create job --from=cronjob/train-run" in submit
    assert r.outputs[outputs.WATCH_QUEUE] == "kubectl -n training get workloads.kueue.x-k8s.io -w"
    assert r.outputs[outputs.WATCH_GPU_NODES] == "kubectl get nodes -l kubernetes.azure.com/agentpool=gpu -w"


def test_without_kueue_jobs_start_at_once():
    config = stack_config_of("training-autoscale")
    r = render_with("training-autoscale", **{**config, "addons": {**config.get("addons", {}), "kueue": False}})
    assert not [x for x in r.resources if "kueue" in x.type or x.name.startswith("kueue")]
    assert all(QUEUE_LABEL not in meta.get("labels", {}) for meta, _ in gpu_jobs(r).values())
    assert outputs.WATCH_QUEUE not in r.outputs
    assert "seq 1 3" in r.outputs[outputs.SUBMIT_TRAINING_RUNS]


@pytest.mark.parametrize("stack", QUEUED_STACKS)
def test_kueues_objects_wait_for_the_release_that_defines_their_kinds(render_of, stack):
    r = render_of(stack)
    queued = [x for x in r.resources if x.type.startswith("kubernetes:kueue.x-k8s.io/")]
    assert queued
    for obj in queued:
        # The ClusterQueue also waits for its flavors, the LocalQueue for the ClusterQueue (and so the release).
        assert "kueue-release" in obj.depends_on or "kueue-cluster-queue" in obj.depends_on, obj.name
