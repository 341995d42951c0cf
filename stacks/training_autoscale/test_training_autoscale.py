"""The training-autoscale scenario (seed 004): checkpoints in blob storage from a pool that scales from zero, and
predictions on CPU."""

from __future__ import annotations

from stacks.training_autoscale.deploy import SUBMIT_TRAINING_RUNS, WATCH_GPU_NODES, WATCH_QUEUE
from tests.helpers import (
    DEPLOYMENT,
    JOB,
    PUBLIC,
    QUEUE_LABEL,
    SERVICE,
    allowed,
    direction_allows,
    gpu_jobs,
    gpus,
    manifests_of,
    pod_spec,
    pods,
    render_with,
    stack_config_of,
)


def test_training_checkpoints_to_blob_on_the_pool_that_scales_from_zero(render_of):
    r = render_of("training-autoscale")
    pod = pod_spec(r.named("training-job", JOB).revealed)
    assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "gpu"}
    assert r.cfg.gpu_pool("gpu").min_count == 0
    volumes = {v["name"]: v for v in pod["volumes"]}
    claim = volumes["checkpoints"]["persistentVolumeClaim"]["claimName"]
    assert claim.startswith("checkpoints-") and claim in {
        c.revealed["metadata"]["name"] for c in r.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    command = pod["containers"][0]["command"]
    assert command[command.index("--checkpoints") + 1] == "/mnt/checkpoints/digitnet"


def test_prediction_runs_on_the_cpu_pool_and_reads_checkpoints_read_only(render_of):
    r = render_of("training-autoscale")
    deployment = r.named("training-predict", DEPLOYMENT).revealed
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "cpu"} and gpus(pod) == 0
    assert {v["name"]: v for v in pod["volumes"]}["checkpoints"]["persistentVolumeClaim"]["readOnly"] is True
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["command"][c["command"].index("--checkpoints") + 1] == "/mnt/checkpoints/digitnet"
    service = r.named("training-predict-service", SERVICE).revealed
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


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
    submit = r.outputs[SUBMIT_TRAINING_RUNS]
    assert "seq 1 3" in submit and "create job --from=cronjob/train-run" in submit
    assert r.outputs[WATCH_QUEUE] == "kubectl -n training get workloads.kueue.x-k8s.io -w"
    assert r.outputs[WATCH_GPU_NODES] == "kubectl get nodes -l kubernetes.azure.com/agentpool=gpu -w"


def test_without_kueue_jobs_start_at_once():
    config = stack_config_of("training-autoscale")
    r = render_with("training-autoscale", **{**config, "addons": {**config.get("addons", {}), "kueue": False}})
    assert not [x for x in r.resources if "kueue" in x.type or x.name.startswith("kueue")]
    assert all(QUEUE_LABEL not in meta.get("labels", {}) for meta, _ in gpu_jobs(r).values())
    assert WATCH_QUEUE not in r.outputs
    assert "seq 1 3" in r.outputs[SUBMIT_TRAINING_RUNS]


def test_training_reaches_the_public_mnist_mirror_over_https_only(render_of):
    r = render_of("training-autoscale")
    assert allowed(r, "train", PUBLIC, 443) and not allowed(r, "train", PUBLIC, 80)


def test_prediction_admits_callers_of_its_namespace_only(render_of):
    r = render_of("training-autoscale")
    predict, policies = pods(r)["predict"], manifests_of(r, "NetworkPolicy")
    caller = ("training", {"app.kubernetes.io/name": "client"})
    assert direction_allows(policies, predict, "Ingress", caller, 8080, "TCP", predict)
    assert not direction_allows(policies, predict, "Ingress", ("gpu-basics", caller[1]), 8080, "TCP", predict)
    assert not allowed(r, PUBLIC, "predict", 8080) and not allowed(r, "predict", PUBLIC, 443)


def test_the_deployer_may_read_the_checkpoints_it_downloads(render_of):
    """Audit 37 W5: Owner and Contributor grant no blob data access, so `downloadCheckpoints` and the e2e run's
    probe that lists the checkpoints as the deployer answered 403 (learn.microsoft.com/azure/storage/blobs/
    authorize-data-operations-cli): the deployer gets Storage Blob Data Reader on the checkpoint account, no more."""
    from components.azure import roles
    from offline.mocks import DEPLOYER_OBJECT_ID
    from stacks.training_autoscale.deploy import DOWNLOAD_CHECKPOINTS
    r = render_of("training-autoscale")
    (grant,) = [a for a in r.of_type("azure-native:authorization:RoleAssignment") if a.name.endswith("-deployer-data")]
    assert grant.parent == "storage-ckpt" and grant.inputs["principalId"] == DEPLOYER_OBJECT_ID
    assert grant.inputs["roleDefinitionId"].endswith(f"/roleDefinitions/{roles.STORAGE_BLOB_DATA_READER}")
    account = r.cfg.storage_account_name(r.cfg.storage_account("ckpt"))
    assert r.outputs[DOWNLOAD_CHECKPOINTS] == (
        f"az storage blob download-batch --auth-mode login --account-name {account} --source checkpoints "
        "--pattern 'digitnet/*' --destination ./checkpoints")
