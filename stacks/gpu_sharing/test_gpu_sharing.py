"""The gpu-sharing scenario (seed 001): services and a notebook each asking the scheduler for a GPU share, on
time-slicing, MPS or MIG."""

from __future__ import annotations

import re

import pytest
import yaml

from components.kubernetes.pods import NEVER
from program import outputs
from program.config.errors import ConfigError
from stacks.gpu_sharing.deploy import INFERENCE_SERVICES, NOTEBOOK_PORT_FORWARD, NOTEBOOK_TOKEN, RUN_LOAD_TEST
from tests import upstream
from tests.helpers import CRONJOB, DEPLOYMENT, PUBLIC, SERVICE, allowed, device_plugin_configs, gpus, load, pod_spec


def test_every_sharing_pod_asks_the_scheduler_for_a_gpu_share_instead_of_nvidia_visible_devices(render_of):
    r = render_of("gpu-sharing")
    deployments = {d.revealed["metadata"]["name"]: pod_spec(d.revealed) for d in r.of_type(DEPLOYMENT)
                   if d.revealed["metadata"]["namespace"] == "gpu-sharing"}
    assert sorted(deployments) == ["infer-1", "infer-2", "infer-3", "notebook"]
    for pod in deployments.values():
        assert gpus(pod) == 1
        assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "shared"}
        assert not [e for c in pod["containers"] for e in c.get("env", []) if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
    pool = r.cfg.gpu_pool("shared")
    assert len(deployments) <= pool.schedulable_gpus_per_node * pool.max_count


def test_inference_services_are_independent_and_run_the_function_image(render_of):
    r = render_of("gpu-sharing")
    image = r.outputs[outputs.image("function")]
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
    assert r.outputs[NOTEBOOK_TOKEN] == "[secret]"
    assert "port-forward deploy/notebook 8888" in r.outputs[NOTEBOOK_PORT_FORWARD]


def test_load_test_template_targets_every_service(render_of):
    r = render_of("gpu-sharing")
    template = r.named("sharing-load-test", CRONJOB).revealed
    assert template["spec"]["suspend"] is True and template["spec"]["schedule"] == NEVER
    (c,) = template["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert c["command"][:2] == ["python", "loadtest.py"]
    assert c["command"][c["command"].index("--targets") + 1].split(",") == r.outputs[INFERENCE_SERVICES]
    assert c["image"] == r.outputs[outputs.image("jobs")]
    assert "create job --from=cronjob/load-test" in r.outputs[RUN_LOAD_TEST]
def gpu_pods(render, pool_name):
    """(name, pod spec) of every workload whose pods ask for a GPU on ``pool_name``."""
    for r in render.resources:
        if r.type.rsplit(":", 1)[-1] not in ("Deployment", "Job", "CronJob") or r.type.endswith("Patch"):
            continue
        spec = r.revealed["spec"]
        spec = spec["jobTemplate"]["spec"] if "jobTemplate" in spec else spec
        pod = spec["template"]["spec"]
        if pod.get("nodeSelector", {}).get("kubernetes.azure.com/agentpool") == pool_name and any(
                "nvidia.com/gpu" in c["resources"]["limits"] for c in pod["containers"]):
            yield r.name, pod


def test_the_mps_stack_splits_each_t4_four_ways_for_clients_of_one_uid(render_of):
    """K6: the plugin's MPS daemon runs without multi-user mode, so a second UID would wait for the first's
    clients to exit; every pod on the pool runs as the same non-root user."""
    r = render_of("gpu-sharing-mps")
    (cm,) = device_plugin_configs(r)
    doc = yaml.safe_load(cm.inputs["data"]["mps"])
    assert upstream.device_plugin_config_errors(doc) == []
    assert doc["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    pods = dict(gpu_pods(r, "mps"))
    assert len(pods) == 5  # three services, the notebook and the pool's CUDA client check
    assert {p["securityContext"]["runAsUser"] for p in pods.values()} == {10001}
    assert all(p["securityContext"]["runAsNonRoot"] for p in pods.values())


def test_the_mig_stack_gives_each_pod_an_aks_made_instance_of_one_a100(render_of, tmp_path):
    from offline.report import write_render
    r = render_of("gpu-sharing-mig")
    pool = r.named("gpu-a100mig-pool").inputs
    assert pool["gpuInstanceProfile"] == "MIG1g" and pool["gpuProfile"] == {"driver": "Install"}
    assert pool["scaleSetPriority"] == "Regular"
    assert pool["nodeLabels"]["nvidia.com/gpu.deploy.mig-manager"] == "false"
    assert pool["nodeLabels"]["nvidia.com/gpu.deploy.driver"] == "false"
    values = r.named("gpu-operator-release").inputs["values"]
    assert values["operator"]["runtimeClass"] == "nvidia-container-runtime"  # K5: AKS's containerd runtime
    assert not device_plugin_configs(r)  # no time-slicing or MPS config: the instances are real devices
    assert len(dict(gpu_pods(r, "a100mig"))) == 4
    summary = (write_render(r, tmp_path) / "summary.md").read_text()
    assert "| AKS | mig | 7 |" in summary  # 7 schedulable nvidia.com/gpu per node


SHARED_T4 = {"name": "t4", "minCount": 1, "maxCount": 1, "sharing": {"mode": "time-slicing", "replicas": 4}}


@pytest.mark.parametrize("raw, key, text", [
    ({"gpuPools": [{"name": "t4"}]}, "aksgpu:gpuPools", "needs a pool whose nodes offer 3 or more GPU shares"),
    ({"gpuPools": [SHARED_T4], "inference": {"services": 4}}, "aksgpu:inference.services",
     "5 pods (services + notebook) each take one GPU share, but pool 't4' offers 4"),
    ({"gpuPools": [SHARED_T4], "inference": {"services": 17}}, "aksgpu:inference.services", "between 1 and 16"),
    ({"gpuPools": [SHARED_T4], "function": {"targetGpuUtilisation": 70}}, "aksgpu:function.targetGpuUtilisation",
     "moved to aksgpu:inference.targetGpuUtilisation"),
])
def test_a_pool_or_section_the_services_cannot_share_is_one_line(raw, key, text):
    with pytest.raises(ConfigError) as e:
        load({"scenario": "gpu-sharing", **raw})
    assert [p.key for p in e.value.problems] == [key] and text in str(e.value)


def test_each_service_scales_within_the_shares_its_pool_offers_after_the_notebook(render_of):
    r = render_of("gpu-sharing")
    pool = r.cfg.gpu_pool("shared")  # 4 shares a node, 1-2 nodes; one share is the notebook's
    bounds = {s.revealed["spec"]["scaleTargetRef"]["name"]: (s.revealed["spec"]["minReplicaCount"],
                                                             s.revealed["spec"]["maxReplicaCount"])
              for s in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")}
    shares_at_most = pool.schedulable_gpus_per_node * pool.max_count - 1
    assert bounds == {f"infer-{i}": (1, shares_at_most // 3) for i in (1, 2, 3)} == \
        {"infer-1": (1, 2), "infer-2": (1, 2), "infer-3": (1, 2)}


def test_only_the_load_test_calls_the_shared_inference_services(render_of):
    r = render_of("gpu-sharing")
    for i in (1, 2, 3):
        assert allowed(r, "load-test", f"infer-{i}", 8080)
        assert not allowed(r, "notebook", f"infer-{i}", 8080)
        assert not allowed(r, PUBLIC, f"infer-{i}", 8080)
    assert not allowed(r, "load-test", PUBLIC, 443)
    # Notebooks download models and datasets, from the internet only.
    assert allowed(r, "notebook", PUBLIC, 443) and not allowed(r, "notebook", "infer-1", 8080)
