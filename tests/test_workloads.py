"""Each scenario's workloads as rendered: where they run, what they ask for, how they survive evictions."""

from __future__ import annotations

import re

import pytest

from components.kubernetes.pods import NEVER
from program import outputs
from tests.helpers import pod_spec, render_with, stack_config_of

DEPLOYMENT, JOB, CRONJOB, SERVICE = ("kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job",
                                     "kubernetes:batch/v1:CronJob", "kubernetes:core/v1:Service")


def gpus(pod):
    return sum(int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) for c in pod["containers"])


def job_of(template):
    return template.revealed["spec"]["jobTemplate"]["spec"]


# gpu-sharing (seed 001)

def test_every_sharing_pod_asks_the_scheduler_for_a_gpu_share_instead_of_nvidia_visible_devices(render_of):
    r = render_of("gpu-sharing")
    deployments = {d.revealed["metadata"]["name"]: pod_spec(d.revealed) for d in r.of_type(DEPLOYMENT)}
    assert sorted(deployments) == ["infer-1", "infer-2", "infer-3", "notebook"]
    for pod in deployments.values():
        assert gpus(pod) == 1
        assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "shared"}
        assert not [e for c in pod["containers"] for e in c.get("env", []) if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
    pool = r.cfg.gpu_pool("shared")
    assert len(deployments) <= pool.schedulable_gpus_per_node * pool.pool.max_count


def test_inference_services_are_independent_and_run_the_function_image(render_of):
    r = render_of("gpu-sharing")
    image = r.outputs[outputs.FUNCTION_IMAGE]
    for i in (1, 2, 3):
        deployment = r.named(f"sharing-infer-{i}", DEPLOYMENT).revealed
        service = r.named(f"sharing-infer-{i}-service", SERVICE).revealed
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        assert service["spec"]["type"] == "ClusterIP"
    assert "gpu-operator-release" in r.named("sharing-infer-1", DEPLOYMENT).depends_on


def test_notebook_is_pinned_by_digest_reads_its_token_from_a_file_and_has_no_public_address(render_of):
    r = render_of("gpu-sharing")
    pod = pod_spec(r.named("sharing-notebook", DEPLOYMENT).revealed)
    (notebook,) = pod["containers"]
    assert re.fullmatch(r"quay\.io/jupyter/pytorch-notebook:cuda12-\d{4}-\d{2}-\d{2}@sha256:[0-9a-f]{64}",
                        notebook["image"])
    # The token is a file from the Secret, never an environment value (checkov CKV_K8S_35).
    assert {"name": "JUPYTER_TOKEN_FILE", "value": "/etc/jupyter-token/token"} in notebook["env"]
    assert not [e for e in notebook["env"] if "valueFrom" in e or e["name"] == "JUPYTER_TOKEN"]
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert token["secret"]["secretName"] == "notebook-token" and token["secret"]["defaultMode"] == 0o440
    assert {"name": "token", "mountPath": "/etc/jupyter-token", "readOnly": True} in notebook["volumeMounts"]
    assert r.named("sharing-notebook-token-secret").inputs["stringData"] == {"token": "[secret]"}
    assert len(r.named("sharing-notebook-token-secret").revealed["stringData"]["token"]) == 32
    assert {s.revealed["spec"]["type"] for s in r.of_type(SERVICE)} == {"ClusterIP"}
    assert not [s for s in r.of_type(SERVICE) if s.revealed["metadata"]["name"] == "notebook"]
    assert r.outputs[outputs.NOTEBOOK_TOKEN] == "[secret]"
    assert "port-forward deploy/notebook 8888" in r.outputs[outputs.NOTEBOOK_PORT_FORWARD]


def test_load_test_template_targets_every_service(render_of):
    r = render_of("gpu-sharing")
    template = r.named("sharing-load-test", CRONJOB).revealed
    assert template["spec"]["suspend"] is True and template["spec"]["schedule"] == NEVER
    (c,) = template["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert c["command"][:2] == ["python", "loadtest.py"]
    assert c["command"][c["command"].index("--targets") + 1].split(",") == r.outputs[outputs.INFERENCE_SERVICES]
    assert c["image"] == r.outputs[outputs.JOBS_IMAGE]
    assert "create job --from=cronjob/load-test" in r.outputs[outputs.RUN_LOAD_TEST]


# gpu-basics (seed 002)

def test_training_job_runs_on_the_gpu_pool_without_host_driver_mounts(render_of):
    r = render_of("gpu-basics")
    job = r.named("training-job", JOB)
    pod = pod_spec(job.revealed)
    assert gpus(pod) == 1 and pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "t4"}
    assert not [v for v in pod["volumes"] if "hostPath" in v]
    assert {v["name"]: v for v in pod["volumes"]}["checkpoints"] == {"name": "checkpoints",
                                                                      "emptyDir": {"sizeLimit": "5Gi"}}
    (c,) = pod["containers"]
    assert c["command"][:2] == ["python", "train.py"] and "--steps" in c["command"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert job.revealed["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert r.outputs["trainingLogs"] == "kubectl -n gpu-basics logs -f job/train"


# av-resim (seed 003)

def test_resim_is_one_indexed_job_with_a_shard_per_pod(render_of):
    r = render_of("av-resim")
    template = r.named("resim-gpu-io", CRONJOB).revealed
    assert template["spec"]["suspend"] is True
    job = job_of(r.named("resim-gpu-io", CRONJOB))
    n = r.cfg.workloads.resim_jobs
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", n, n)
    (c,) = job["template"]["spec"]["containers"]
    assert c["command"][c["command"].index("--shards") + 1] == str(n)


def test_resim_retries_spot_evictions_for_free_and_stops_on_unretryable_errors(render_of):
    job = job_of(render_of("av-resim").named("resim-gpu-io", CRONJOB))
    rules = job["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in rules
    assert {"action": "FailJob", "onExitCodes": {"containerName": "resim", "operator": "In", "values": [2]}} in rules
    assert job["backoffLimit"] >= job["completions"] and job["activeDeadlineSeconds"] > 0
    assert job["template"]["spec"]["restartPolicy"] == "Never"  # a pod failure policy requires it


def test_resim_reads_input_read_only_and_writes_output_through_the_blob_claims(render_of):
    r = render_of("av-resim")
    pod = pod_spec(r.named("resim-gpu-io", CRONJOB).revealed)
    volumes = {v["name"]: v for v in pod["volumes"]}
    claims = {c.revealed["metadata"]["name"] for c in r.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert volumes["input"]["persistentVolumeClaim"]["readOnly"] is True
    assert volumes["input"]["persistentVolumeClaim"]["claimName"].startswith("input-")
    assert volumes["output"]["persistentVolumeClaim"]["claimName"].startswith("output-")
    assert not volumes["output"]["persistentVolumeClaim"].get("readOnly")
    assert {v["persistentVolumeClaim"]["claimName"] for v in volumes.values() if "persistentVolumeClaim" in v} <= claims
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["input"]["readOnly"] is True and not mounts["output"].get("readOnly")
    assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "nc4ast4"} and gpus(pod) == 1


def test_gpu_test_is_an_indexed_job_of_the_seeds_ten(render_of):
    job = job_of(render_of("av-resim").named("resim-gpu-test", CRONJOB))
    assert (job["completionMode"], job["completions"]) == ("Indexed", 10)
    assert job["template"]["spec"]["containers"][0]["command"][:2] == ["python", "gpu_load.py"]


def test_two_gpu_job_is_off_until_an_image_is_configured(render_of, tmp_path):
    assert not [r for r in render_of("av-resim").resources if r.name == "resim-large-model"]
    assert "submitLargeModel" not in render_of("av-resim").outputs
    config = stack_config_of("av-resim")
    r = render_with(**config, workloads={"largeModelImage": "myregistry.azurecr.io/metaseq:2024.1"})
    pod = pod_spec(r.named("resim-large-model", CRONJOB).revealed)
    assert gpus(pod) == 2 and pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "nc48a100"}
    assert "command" not in pod["containers"][0]  # the user's image keeps its entrypoint
    assert "create job --from=cronjob/large-model" in r.outputs["submitLargeModel"]


def test_resim_outputs_say_how_to_move_data_and_submit_work(render_of):
    out = render_of("av-resim").outputs
    assert out[outputs.UPLOAD_INPUT].startswith("az storage blob upload-batch -d input")
    assert "from a machine in the VNet" in out[outputs.UPLOAD_INPUT]
    assert "create job --from=cronjob/gpu-io" in out["submitResim"]


# training-autoscale (seed 004)

def test_training_checkpoints_to_blob_on_the_pool_that_scales_from_zero(render_of):
    r = render_of("training-autoscale")
    pod = pod_spec(r.named("training-job", JOB).revealed)
    assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "gpu"}
    assert r.cfg.gpu_pool("gpu").pool.min_count == 0
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


def test_idle_gpu_nodes_go_away_after_five_minutes(render_of):
    (cluster,) = render_of("training-autoscale").of_type("azure-native:containerservice:ManagedCluster")
    profile = cluster.revealed["autoScalerProfile"]
    assert profile["scaleDownUnneededTime"] == "5m" and profile["scaleDownDelayAfterAdd"] == "5m"


@pytest.mark.parametrize("stack", ["gpu-sharing", "gpu-basics", "av-resim", "training-autoscale"])
def test_job_images_come_from_the_stacks_registry_by_digest(render_of, stack):
    r = render_of(stack)
    assert re.fullmatch(rf"{r.cfg.naming.registry()}\.azurecr\.io/jobs@sha256:[0-9a-f]{{64}}",
                        r.outputs[outputs.JOBS_IMAGE])
