"""llm-serving: an OpenAI-compatible vLLM endpoint (or a KAITO preset) that fits its GPUs, scales on its queue,
is scraped, alerts, and admits only its load test and the metrics scraper."""

from __future__ import annotations

import re

import promql_parser
import pytest

from components.azure.node_pools import GPU_TAINT
from components.images import imported as imported_image
from components.vocabulary import SECURITY_EXCEPTION, SecurityException
from offline.estimates import timeline
from offline.report import manifest
from program import outputs
from program.config.errors import ConfigError
from stacks.llm_serving import settings as llm
from stacks.llm_serving import sizing
from stacks.llm_serving.deploy import (
    LLM_CHAT_EXAMPLE,
    LLM_MODEL,
    LLM_PORT_FORWARD,
    RUN_LLM_LOAD_TEST,
    UPLOAD_WEIGHTS,
)
from tests import upstream
from tests.helpers import IMDS, PUBLIC, VNET, allowed, pod_spec, render_with, stack_config_of
from tests.helpers import load as load_config

KEDA, KAITO, PROMETHEUS_COLLECTOR = "2.16.1", "0.6.0", "7.1.1-main-07-21-2026-39583fd5"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
WORKSPACE = "kubernetes:kaito.sh/v1beta1:Workspace"
T4 = {"name": "llm", "vmSize": "Standard_NC4as_T4_v3", "minCount": 1, "maxCount": 2}
A100_KAITO = {"name": "llm", "vmSize": "Standard_NC24ads_A100_v4", "priority": "regular", "minCount": 1,
              "maxCount": 1, "driver": "install"}
MODELS_ACCOUNT = {"accounts": [{"role": "models", "containers": ["weights"]}]}
KAITO_TOLERATED_TAINTS = {GPU_TAINT}
"""Of the taints AKS pools here carry, KAITO 0.6.0's inference pods tolerate only this one (besides any
``nvidia.com/gpu`` taint): not the spot taint (pkg/workspace/inference/preset_inferences.go)."""


def llm_config(**settings) -> dict:
    return {"scenario": "llm-serving", "gpuPools": [T4], "storage": MODELS_ACCOUNT, "llm": settings}


def server(render) -> dict:
    return manifest(render.named("llm-deployment", DEPLOYMENT))


def flags(render) -> dict[str, str]:
    args = pod_spec(server(render))["containers"][0]["args"]
    return dict(zip(args[::2], args[1::2], strict=True))


# The config: what vLLM would refuse at start is refused here, in one line ----------------------------------------

@pytest.mark.parametrize("settings, pools, key, fragment", [
    ({"model": "Qwen/Qwen2.5-7B-Instruct"}, [T4], "aksgpu:llm.model",
     "needs 15.4 GiB of GPU memory at maxModelLen 4096 but pool 'llm' (Standard_NC4as_T4_v3) lets vLLM use 14.4; "
     "a size that fits: Standard_NV36ads_A10_v5"),
    ({"model": "Qwen/Qwen2.5-0.5B-Instruct"}, [{**T4, "vmSize": "Standard_NC64as_T4_v3"}], "aksgpu:llm.model",
     "14 attention heads, which tensor parallelism over Standard_NC64as_T4_v3's 4 GPUs cannot split"),
    ({"dtype": "bfloat16"}, [T4], "aksgpu:llm.dtype", "T4 (compute capability 7.5) has no bfloat16"),
    ({"weights": "hub"}, [T4], "aksgpu:llm.revision", "needs the model repository's commit"),
    ({"weights": "hub", "revision": "main"}, [T4], "aksgpu:llm.revision", "40 hex characters"),
    ({"weights": "hub", "revision": "a" * 40, "model": "meta-llama/Llama-3.1-8B-Instruct"},
     [{**T4, "vmSize": "Standard_NC24ads_A100_v4"}], "aksgpu:llm.model", "is gated"),
    ({"weights": "image"}, [T4], "aksgpu:llm.revision", "weights: image needs the model repository's commit"),
    ({"weights": "image", "revision": "a" * 40, "model": "meta-llama/Llama-3.1-8B-Instruct"},
     [{**T4, "vmSize": "Standard_NC24ads_A100_v4"}], "aksgpu:llm.model", "weights: image downloads without a token"),
    ({"revision": "a" * 40}, [T4], "aksgpu:llm.revision", "only for weights: hub or image"),
    ({"model": "gpt-4"}, [T4], "aksgpu:llm.model", "not in the catalogue; allowed: Qwen/Qwen2.5-0.5B-Instruct"),
    ({"maxModelLen": 65536}, [T4], "aksgpu:llm.maxModelLen", "must be 256-32768"),
    ({"maxReplicas": 3}, [T4], "aksgpu:llm.maxReplicas", "must be 1-2: one replica per node of pool 'llm'"),
    ({"image": "docker.io/vllm/vllm-openai:latest"}, [T4], "aksgpu:llm.image", "not latest"),
    ({"image": "docker.io/vllm/vllm-openai"}, [T4], "aksgpu:llm.image", "registry/repository:tag or a @sha256:"),
    ({"pool": "nope"}, [T4], "aksgpu:llm.pool", "must name a GPU pool of this stack: llm"),
    ({"dockerHubUsername": "Me"}, [T4], "aksgpu:llm.dockerHubUsername", "4-30 lowercase letters and digits"),
    ({"dockerHubUsername": "mlteam", "image": "ghcr.io/org/vllm:v1"}, [T4], "aksgpu:llm.dockerHubUsername",
     "ghcr.io/org/vllm:v1 is not copied from there"),
    ({}, [{**T4, "sharing": {"mode": "time-slicing", "replicas": 2}}], "aksgpu:gpuPools", "sharing mode none"),
])
def test_a_pairing_vllm_would_refuse_is_a_one_line_config_error(settings, pools, key, fragment):
    with pytest.raises(ConfigError) as e:
        load_config({**llm_config(**settings), "gpuPools": pools})
    assert e.value.key == key and fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("pool, fragment", [
    ({**T4, "priority": "spot"}, "needs its pool's node up (minCount 1, priority regular)"),
    ({**T4, "priority": "regular", "minCount": 0}, "needs its pool's node up"),
    ({**T4, "priority": "regular"}, "needs 1 GPU(s) and 40 GiB of GPU memory; pool 'llm' has Standard_NC4as_T4_v3; "
                                    "a size that fits: Standard_NV72ads_A10_v5"),  # 2 x 24 GiB
])
def test_kaito_needs_a_preset_that_fits_on_a_node_it_will_not_replace(pool, fragment):
    config = {**llm_config(runtime="kaito", kaitoPreset="phi-4"), "gpuPools": [pool], "lifetime": "long-lived"}
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        load_config(config)


@pytest.mark.parametrize("change, key, fragment", [
    ({"lifetime": "demo"}, "aksgpu:lifetime", "runtime: kaito may leave node pools"),
    ({"gpuPools": [{**A100_KAITO, "driver": "precompiled"}]}, "aksgpu:gpuPools[0].driver",
     "runtime: kaito needs driver: install"),
    ({"addons": {"gpuNodeGate": True}}, "aksgpu:addons.gpuNodeGate", "does not tolerate the gate's taint"),
])
def test_kaito_is_refused_where_it_would_leak_pools_or_meet_a_second_device_plugin(change, key, fragment):
    """A demo's expiry cannot destroy the pools KAITO's provisioner makes. KAITO 0.6.0's workspace chart renders
    NVIDIA's device plugin on every node (kaito-project/kaito#1700; its switch is in release-0.8 only, #1739),
    tolerating its pools' taints only."""
    config = {**llm_config(runtime="kaito", kaitoPreset="phi-4-mini-instruct"), "lifetime": "long-lived",
              "gpuPools": [A100_KAITO], "addons": {"gpuNodeGate": False}}
    assert load_config(config).gpu_pools[0].gpu_driver == "install"
    with pytest.raises(ConfigError) as e:
        load_config({**config, **change})
    assert e.value.key == key and fragment in str(e.value) and "\n" not in str(e.value)


def test_the_llm_section_is_refused_on_other_scenarios():
    with pytest.raises(ConfigError, match="is the section of llm-serving stacks; this stack runs gpu-basics"):
        load_config({"scenario": "gpu-basics", "llm": {"model": "Qwen/Qwen2.5-1.5B-Instruct"}})


def test_the_memory_check_counts_weights_one_full_sequence_of_kv_cache_and_activations():
    model = sizing.MODELS["Qwen/Qwen2.5-1.5B-Instruct"]
    # 1.54e9 parameters in 16 bits; 28 layers x 2 KV heads x 128 dims x (K, V) x 2 bytes per token.
    assert model.weights_gib() == pytest.approx(1.54e9 * 2 / 2**30)
    assert model.kv_gib(4096) == pytest.approx(4096 * 28 * 2 * 128 * 2 * 2 / 2**30)
    assert sizing.memory_needed_gib(model, 4096) == pytest.approx(model.weights_gib() + model.kv_gib(4096) + 1.0)


@pytest.mark.parametrize("driver, image", [("none", "docker.io/vllm/vllm-openai:v0.33.0"),
                                           ("install", "docker.io/vllm/vllm-openai:v0.33.0-cu129")])
def test_the_cuda_13_build_only_where_the_operators_new_driver_runs(driver, image):
    cfg = load_config({**llm_config(), "gpuPools": [{**T4, "driver": driver}]})
    assert llm.image_reference(cfg.settings, llm.server_pool(cfg, cfg.settings)) == image


# The vLLM server --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def blob():
    """The server with blob weights (the default): a models account with one container."""
    return render_with("llm-blob", **llm_config())


REVISION = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"


@pytest.fixture(scope="module")
def hub():
    """The server downloading the weights from Hugging Face at every pod start."""
    return render_with("llm-hub", **{**llm_config(weights="hub", revision=REVISION), "storage": {}})


def test_the_server_runs_the_configured_model_with_every_flag_explicit(render_of, hub):
    r = render_of("llm-serving")
    assert flags(r) == {
        "--model": "/models",  # the weights image's copy
        "--served-model-name": "qwen2.5-1.5b-instruct", "--max-model-len": "4096",
        "--gpu-memory-utilization": "0.9",
        "--dtype": "half",  # a bfloat16 model on a T4 (compute capability 7.5)
        "--tensor-parallel-size": "1", "--host": "0.0.0.0", "--port": "8000"}
    assert r.outputs[LLM_MODEL] == "qwen2.5-1.5b-instruct"
    # From the hub, weights and tokenizer both at the commit.
    assert {k: flags(hub)[k] for k in ("--model", "--revision", "--tokenizer-revision")} == {
        "--model": "Qwen/Qwen2.5-1.5B-Instruct", "--revision": REVISION, "--tokenizer-revision": REVISION}


def test_the_server_image_is_vllms_release_copied_into_the_stacks_registry_and_run_by_digest(render_of):
    r = render_of("llm-serving")
    (c,) = pod_spec(server(r))["containers"]
    login_server = r.outputs[outputs.REGISTRY_LOGIN_SERVER]
    assert re.fullmatch(rf"{re.escape(login_server)}/vllm/vllm-openai@sha256:[0-9a-f]{{64}}", c["image"])
    command = r.named("vllm-image-import", "command:local:Command")
    script = command.inputs["create"]
    # The stack's pool takes the operator's R595 driver: vLLM's default (CUDA 13) build.
    assert script.startswith(f"az acr import --name {r.cfg.registry_name} --source "
                             "docker.io/vllm/vllm-openai:v0.33.0 --image vllm/vllm-openai:v0.33.0 --force")
    assert script.endswith("--image vllm/vllm-openai:v0.33.0 --query digest --output tsv")
    assert command.inputs["triggers"] == ["docker.io/vllm/vllm-openai:v0.33.0"]
    # The import needs the registry: its name is an output of it, so Pulumi orders them.
    assert "registry-acr" in command.depends_on


@pytest.mark.parametrize("source, image", [("docker.io/vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.33.0"),
                                           ("vllm/vllm-openai:v0.33.0-cu129", "vllm/vllm-openai:v0.33.0-cu129"),
                                           ("ghcr.io/org/team/server:1.2", "org/team/server:1.2")])
def test_an_imported_image_keeps_its_repository_and_tag(source, image):
    assert imported_image.target(source) == image


def test_a_docker_hub_account_signs_in_the_copy_with_a_token_the_environment_holds_never_state():
    """Round-3 audit #9: anonymous imports share Docker Hub's pull limits (container-registry-import-images:
    "If you have a Docker Hub account, we recommend that you use the credentials")."""
    r = render_with("llm-hub", **{**llm_config(weights="hub", revision="0" * 40, dockerHubUsername="mlteam"),
                                  "storage": {}})
    script = r.named("vllm-image-import").inputs["create"]
    assert ' --username mlteam --password "${DOCKERHUB_TOKEN:?set DOCKERHUB_TOKEN to the access token of mlteam}"' \
        in script
    assert "--username" not in render_with("llm-anon", **{**llm_config(weights="hub", revision="0" * 40),
                                                        "storage": {}}).named("vllm-image-import").inputs["create"]


def test_a_configured_digest_is_run_as_given():
    digest = "docker.io/vllm/vllm-openai@sha256:" + "a" * 64
    r = render_with("llm-digest", **{**llm_config(weights="hub", revision="0" * 40, image=digest), "storage": {}})
    assert pod_spec(server(r))["containers"][0]["image"] == digest
    assert not [c for c in r.of_type("command:local:Command") if c.name.startswith("vllm-")]


def test_a_hub_download_is_pinned_waited_for_and_may_reach_only_https(hub):
    r = hub
    deployment = server(r)
    # The weights come with the first deploy, so pulumi up waits for a server that answers.
    assert deployment["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": "1800"}
    pod = pod_spec(deployment)
    assert "weights" not in {v["name"] for v in pod["volumes"]} and "initContainers" not in pod
    cache = next(v for v in pod["volumes"] if v["name"] == "cache")
    assert int(cache["emptyDir"]["sizeLimit"].removesuffix("Gi")) >= sizing.MODELS[
        "Qwen/Qwen2.5-1.5B-Instruct"].weights_gib() + 8
    egress = manifest(r.named("llm-allow-hub"))
    assert egress["spec"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 443}]
    assert UPLOAD_WEIGHTS not in r.outputs and not r.of_type("kubernetes:core/v1:PersistentVolume")


def test_image_weights_are_built_once_per_model_and_commit_and_copied_from_the_nodes_image(render_of):
    """Issue 23 item 4: a second replica or a restarted pod on a node starts without downloading the weights."""
    r = render_of("llm-serving")
    pod = pod_spec(server(r))
    (copy,) = pod["initContainers"]
    login_server = r.outputs[outputs.REGISTRY_LOGIN_SERVER]
    assert re.fullmatch(rf"{re.escape(login_server)}/llm-weights@sha256:[0-9a-f]{{64}}", copy["image"])
    assert copy["command"] == ["cp", "-r", "/weights/.", "/models"]
    weights = next(v for v in pod["volumes"] if v["name"] == "weights")
    assert int(weights["emptyDir"]["sizeLimit"].removesuffix("Gi")) >= sizing.MODELS[
        "Qwen/Qwen2.5-1.5B-Instruct"].weights_gib()
    (c,) = pod["containers"]
    assert {"name": "weights", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
    assert {e["name"]: e["value"] for e in c["env"]}["HF_HUB_OFFLINE"] == "1"
    build = r.named("image-weights-image", "docker:index/image:Image").inputs
    assert build["build"]["context"] == ".image-contexts/docker/weights"
    assert build["build"]["args"] == {"MODEL": "Qwen/Qwen2.5-1.5B-Instruct", "REVISION": REVISION}
    # Another commit is another tag, and so another build; the same config never rebuilds.
    other = render_with("llm-other", **{**stack_config_of("llm-serving"),
                                        "llm": {**stack_config_of("llm-serving")["llm"], "revision": "1" * 40}})
    def tag(render):
        return render.named("image-weights-image").inputs["imageName"].rsplit(":", 1)[1]

    assert tag(other) != tag(r)
    assert tag(render_with("llm-same", **stack_config_of("llm-serving"))) == tag(r)


def test_blob_weights_are_read_only_with_the_servers_own_identity_and_never_downloaded(blob):
    deployment = server(blob)
    pod = pod_spec(deployment)
    (c,) = pod["containers"]
    assert dict(zip(c["args"][::2], c["args"][1::2], strict=True))["--model"] == "/models/Qwen--Qwen2.5-1.5B-Instruct"
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
    weights = next(v for v in pod["volumes"] if v["name"] == "weights")
    assert weights["persistentVolumeClaim"]["readOnly"] is True
    assert {"name": "weights", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
    assert pod["serviceAccountName"] == llm.SERVER
    grants = [g for g in blob.of_type("azure-native:authorization:RoleAssignment") if "server" in g.name]
    assert grants and all(g.revealed["roleDefinitionId"].endswith("2a2b9908-6ea1-4ae2-8e65-a410df84e7d1")
                          for g in grants)  # Storage Blob Data Reader
    assert not [p for p in blob.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy") if "hub" in p.name]
    upload = blob.outputs[UPLOAD_WEIGHTS]
    assert upload.startswith("hf download Qwen/Qwen2.5-1.5B-Instruct --local-dir ./Qwen--Qwen2.5-1.5B-Instruct")
    assert "--destination weights --destination-path Qwen--Qwen2.5-1.5B-Instruct" in upload


def test_blob_weights_arrive_after_the_first_deploy_so_the_server_waits_for_them(blob):
    deployment = server(blob)
    # pulumi up cannot wait for a server whose weights are uploaded after it: it would time out.
    assert deployment["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    (wait,) = pod_spec(deployment)["initContainers"]
    script = wait["command"][-1]
    assert "/models/Qwen--Qwen2.5-1.5B-Instruct/config.json" in script and "time.sleep" in script
    compile(script, "wait-for-weights", "exec")
    assert wait["securityContext"]["readOnlyRootFilesystem"] is True and "nvidia.com/gpu" not in wait["resources"][
        "limits"]


def test_the_server_is_restricted_and_gets_the_nodes_gpus_shm_and_time_to_load(render_of):
    pod = pod_spec(server(render_of("llm-serving")))
    (c,) = pod["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True and pod["securityContext"]["runAsUser"] >= 10000
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    shm = next(v for v in pod["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert c["startupProbe"]["httpGet"]["path"] == "/health"
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 1800
    assert {c["readinessProbe"]["httpGet"]["path"], c["livenessProbe"]["httpGet"]["path"]} == {"/health"}


def test_the_endpoint_is_internal_with_a_port_forward_and_a_chat_example(render_of):
    r = render_of("llm-serving")
    (service,) = [manifest(s) for s in r.of_type("kubernetes:core/v1:Service")]
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 80
    assert r.outputs[LLM_PORT_FORWARD] == "kubectl -n llm-serving port-forward service/llm 8000:80"
    example = r.outputs[LLM_CHAT_EXAMPLE]
    assert "localhost:8000/v1/chat/completions" in example and '"model": "qwen2.5-1.5b-instruct"' in example


# Scaling, metrics, alert ------------------------------------------------------------------------------------------

def test_keda_scales_the_server_on_its_queue_between_one_and_the_pools_nodes(render_of):
    r = render_of("llm-serving")
    (scaled,) = [manifest(s) for s in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")]
    upstream.validate_against_crd(scaled, upstream.operator_crd("keda", KEDA, "scaledobjects.keda.sh"))
    spec = scaled["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 2)
    (trigger,) = spec["triggers"]
    query = trigger["metadata"]["query"]
    assert query == 'sum(vllm:num_requests_waiting{namespace="llm-serving", pod=~"llm-.*"})'
    promql_parser.parse(query)
    assert trigger["metadata"]["threshold"] == "4"
    assert "replicas" not in server(r)["spec"]


def test_managed_prometheus_scrapes_the_server_and_its_network_policy_admits_the_scraper(render_of):
    r = render_of("llm-serving")
    monitor = manifest(r.named("llm-podmonitor"))
    upstream.validate_against_crd(monitor, upstream.operator_crd(
        "prometheus-collector", PROMETHEUS_COLLECTOR, "podmonitors.azmonitoring.coreos.com"))
    labels = server(r)["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    # The port by name: older add-on CRDs have no portNumber and would drop it (round-4 k8s audit #13).
    (port,) = [p for p in pod_spec(server(r))["containers"][0]["ports"] if p["name"] == endpoint["port"]]
    assert (port["containerPort"], endpoint["path"], "portNumber" in endpoint) == (8000, "/metrics", False)
    # The namespace denies all ingress by default: without this rule the scrape would time out.
    policy = manifest(r.named("llm-allow-scraping"))["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                             "podSelector": {"matchLabels": {"rsName": "ama-metrics"}}}]


def test_an_alert_fires_when_requests_wait_longer_than_the_threshold(render_of):
    (group,) = render_of("llm-serving").of_type("azure-native:alertsmanagement:PrometheusRuleGroup")
    rule = next(x for x in group.revealed["rules"] if x["alert"] == "LlmRequestsWaiting")
    assert rule["expression"].endswith("> 30") and "vllm:request_queue_time_seconds_bucket" in rule["expression"]
    assert rule["for"] == "PT10M"


def test_the_load_test_reaches_only_the_server(render_of):
    r = render_of("llm-serving")
    cron = manifest(r.named("llm-load-test", "kubernetes:batch/v1:CronJob"))
    (c,) = pod_spec(cron)["containers"]
    assert c["command"][:2] == ["python", "llm_loadtest.py"]
    args = dict(zip(c["command"][2::2], c["command"][3::2], strict=True))
    assert args["--url"] == "http://llm.llm-serving.svc.cluster.local/v1" and args["--model"] == "qwen2.5-1.5b-instruct"
    egress = manifest(r.named("llm-load-test-allow-server"))["spec"]["egress"][0]
    assert egress["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert "create job --from=cronjob/llm-load-test" in r.outputs[RUN_LLM_LOAD_TEST]


def test_the_timeline_counts_the_model_load_when_pulumi_waits_for_it(render_of, blob):
    table = timeline.load_durations()
    seconds, source = timeline.duration(render_of("llm-serving").named("llm-deployment", DEPLOYMENT), table)
    assert seconds >= 600 and "vLLM" in source
    assert timeline.duration(blob.named("llm-deployment", DEPLOYMENT), table)[0] == 5


# KAITO ------------------------------------------------------------------------------------------------------------

def test_the_kaito_workspace_fits_its_crd_and_selects_the_stacks_own_pool(render_of):
    r = render_of("llm-serving-kaito")
    (workspace,) = [manifest(w) for w in r.of_type(WORKSPACE)]
    upstream.validate_against_crd(workspace, upstream.operator_crd("kaito", KAITO, "workspaces.kaito.sh"))
    assert workspace["resource"] == {"instanceType": "Standard_NC24ads_A100_v4", "count": 1,
                                     "labelSelector": {"matchLabels": {"kubernetes.azure.com/agentpool": "kaito"}}}
    assert workspace["inference"] == {"preset": {"name": "phi-4-mini-instruct"}}
    cluster = r.named("aks-aks", "azure-native:containerservice:ManagedCluster").inputs
    assert cluster["aiToolchainOperatorProfile"] == {"enabled": True} and cluster["oidcIssuerProfile"]["enabled"]
    assert not r.of_type(DEPLOYMENT) or all("llm" not in d.name for d in r.of_type(DEPLOYMENT))


def test_kaitos_pods_tolerate_the_pools_taints_and_land_in_a_baseline_namespace(render_of):
    r = render_of("llm-serving-kaito")
    pool = r.named("gpu-kaito-pool", "azure-native:containerservice:AgentPool").inputs
    assert set(pool.get("nodeTaints", [])) <= KAITO_TOLERATED_TAINTS, "KAITO 0.6.0's pods would stay Pending"
    (ns,) = [manifest(n) for n in r.of_type("kubernetes:core/v1:Namespace")
             if n.inputs["metadata"]["name"] == "llm-serving"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert ns["metadata"]["labels"][SECURITY_EXCEPTION] == SecurityException.BASELINE_OPERATOR_PODS
    # KAITO's device plugin serves the pool; a second one would replace it at the kubelet.
    operator = r.named("gpu-operator-release", "kubernetes:helm.sh/v3:Release").inputs["values"]
    assert operator["devicePlugin"] == {"enabled": False} and pool["gpuProfile"] == {"driver": "Install"}
    assert not r.of_type("aksgpu:gpu:GpuNodeGate")
    monitor = manifest(r.named("llm-podmonitor"))
    assert monitor["spec"]["selector"]["matchLabels"] == {"kaito.sh/workspace": "llm"}
    assert monitor["spec"]["podMetricsEndpoints"][0]["portNumber"] == 5000


def test_kaitos_pods_may_pull_the_presets_weights_over_https_and_nothing_else(render_of):
    """Round-3 k8s audit #1: KAITO 0.6.0 gives every preset pod an init container that runs `oras pull` of the
    weights from mcr.microsoft.com (kaito v0.6.0 pkg/workspace/manifests/manifests.go:351-376,
    charts/kaito/workspace/values.yaml:25 presetRegistryName); the default deny let it reach only DNS."""
    r = render_of("llm-serving-kaito")
    policies = [manifest(p) for p in r.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    egress = [p for p in policies if p["spec"]["podSelector"] == {"matchLabels": {"kaito.sh/workspace": "llm"}}
              and "Egress" in p["spec"]["policyTypes"]]
    assert [p["metadata"]["name"] for p in egress] == ["llm-to-registry"]
    (rule,) = egress[0]["spec"]["egress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 443}]
    (block,) = rule["to"]
    assert block["ipBlock"]["cidr"] == "0.0.0.0/0" and "10.0.0.0/8" in block["ipBlock"]["except"]


def test_the_vllm_stacks_namespace_stays_restricted_and_its_cluster_has_no_kaito(render_of):
    r = render_of("llm-serving")
    (ns,) = [manifest(n) for n in r.of_type("kubernetes:core/v1:Namespace")
             if n.inputs["metadata"]["name"] == "llm-serving"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert "aiToolchainOperatorProfile" not in r.named("aks-aks", "azure-native:containerservice:ManagedCluster").inputs


def test_the_committed_stacks_render_their_variants():
    assert stack_config_of("llm-serving")["llm"]["model"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert stack_config_of("llm-serving-kaito")["llm"]["runtime"] == "kaito"


def test_the_llm_server_takes_only_its_load_test(render_of, hub):
    r = render_of("llm-serving")
    assert allowed(r, "llm-load-test", "llm", 8000)
    assert not allowed(r, "llm-load-test", "llm", 22) and not allowed(r, PUBLIC, "llm", 8000)
    assert not allowed(r, "llm", PUBLIC, 443), "image weights: nothing to download"
    assert allowed(hub, "llm", PUBLIC, 443), "the pinned hub download"
    assert not allowed(hub, "llm", VNET, 443) and not allowed(hub, "llm", IMDS, 80)
