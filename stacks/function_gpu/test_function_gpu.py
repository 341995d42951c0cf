"""The function-gpu scenario: a KEDA-scaled Deployment of the function image on the GPU pool, behind a
LoadBalancer on port 80 that only its sources reach."""

from __future__ import annotations

import re

import pytest

from components.images.context import load_context
from program import outputs
from program.config.errors import ConfigError
from stacks.function_gpu.deploy import BASE_URL, PORT_FORWARD, STATUS_URL
from tests.helpers import PUBLIC, VNET, allowed, load, render_with, stack_config_of

STACK = "function-gpu"
DOCKERFILE = (load_context("docker/function").path / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def r(render_of):
    return render_of(STACK)


@pytest.fixture(scope="module")
def pod(r):
    return r.named("function-deployment").inputs["spec"]["template"]["spec"]


def test_pods_run_on_the_gpu_pool_with_one_gpu_and_its_tolerations(r, pod):
    pool = r.named("gpu-t4-pool").inputs
    assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": pool["agentPoolName"]}
    tolerated = {(t["key"], t.get("value"), t["effect"]) for t in pod["tolerations"]}
    for taint in pool["nodeTaints"]:
        key, rest = taint.split("=")
        value, effect = rest.split(":")
        assert (key, value, effect) in tolerated
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"] == {k: v for k, v in container["resources"]["limits"].items()
                                                   if k != "nvidia.com/gpu"}


def test_pods_pull_the_built_image_by_digest_from_the_stacks_registry(r, pod):
    image = pod["containers"][0]["image"]
    assert re.fullmatch(rf"{r.cfg.naming.registry()}\.azurecr\.io/function@sha256:[0-9a-f]{{64}}", image)
    assert r.outputs[outputs.image("function")] == image


def test_the_deployment_waits_for_the_gpu_operator(r):
    assert "gpu-operator-release" in r.named("function-deployment").depends_on


def test_probes_hit_the_health_route_on_the_port_the_image_exposes(pod):
    (container,) = pod["containers"]
    exposed = re.search(r"^EXPOSE (\d+)$", DOCKERFILE, re.MULTILINE)[1]
    assert container["ports"] == [{"containerPort": int(exposed), "name": "http", "protocol": "TCP"}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/api/health", "port": "http"}
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300  # torch import + model load on a cold node


def test_pod_runs_as_the_images_non_root_user(pod):
    uid = re.search(r"^USER (\d+)$", DOCKERFILE, re.MULTILINE)[1]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    security = pod["containers"][0]["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}


def test_the_root_filesystem_is_read_only_with_empty_writable_home_and_tmp_beside_the_code(pod):
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    home = re.search(r"^\s*HOME=(\S+)", DOCKERFILE, re.MULTILINE)[1]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert set(mounts) == {home, "/tmp"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert all("emptyDir" in volumes[name] for name in mounts.values())
    # An emptyDir over the code would hide it: the script root and the copied files live outside both.
    root = re.search(r"AzureWebJobsScriptRoot=(\S+)", DOCKERFILE)[1]
    assert re.search(rf"^COPY .* {re.escape(root)}/$", DOCKERFILE, re.MULTILINE)
    assert not any(root.startswith(path) for path in mounts)


def test_loadbalancer_serves_port_80_to_the_function_pods(r):
    service = r.named("function-service").inputs
    deployment = r.named("function-deployment").inputs
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["externalTrafficPolicy"] == "Local"


def test_the_function_is_internal_by_default_and_reached_by_port_forward(r):
    service = r.named("function-service").inputs
    assert service["metadata"]["annotations"] == {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
    # Its sources are named even so: the VNet (no LoadBalancer Service without source ranges).
    assert service["spec"]["loadBalancerSourceRanges"] == [r.cfg.network.address_space]
    assert r.outputs[PORT_FORWARD] == ("echo 'open http://localhost:8080/api/status' && "
                                       "kubectl port-forward --namespace gpu-function service/gpu-function 8080:80")


def test_a_public_function_is_limited_to_its_source_ranges():
    r = render_with(**{**stack_config_of("function-gpu"),
                       "function": {"exposure": "public", "allowedSourceRanges": ["203.0.113.0/24"]}})
    service = r.named("function-service").inputs
    assert "service.beta.kubernetes.io/azure-load-balancer-internal" not in service["metadata"]["annotations"]
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]


def test_outputs_give_the_base_and_status_urls(r):
    base = r.outputs[BASE_URL]
    assert re.fullmatch(r"http://\d+\.\d+\.\d+\.\d+/", base)
    assert r.outputs[STATUS_URL] == f"{base}api/status"


def test_internal_exposure_keeps_the_ip_in_the_vnet_and_limits_sources():
    local = render_with(scenario=STACK, function={"exposure": "internal", "allowedSourceRanges": ["10.0.0.0/8"]})
    service = local.named("function-service").inputs
    assert service["metadata"]["annotations"] == {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]


@pytest.mark.parametrize("section, key, text", [
    ({"pool": "a100"}, "aksgpu:function.pool", "must name a GPU pool of this stack: t4"),
    ({"exposure": "private"}, "aksgpu:function.exposure", "allowed: internal, public"),
    ({"allowedSourceRanges": ["0.0.0.0/0"]}, "aksgpu:function.allowedSourceRanges[0]",
     "would open the function to the whole internet"),
    ({"allowedSourceRanges": ["203.0.113.7/24"]}, "aksgpu:function.allowedSourceRanges[0]", "must be a CIDR"),
    ({"exposure": "public"}, "aksgpu:function.allowedSourceRanges", "must list the CIDRs that may call a public"),
    ({"maxContextChars": 10}, "aksgpu:function.maxContextChars", "must be between 100 and 200000"),
    ({"targetGpuUtilisation": 5}, "aksgpu:function.targetGpuUtilisation", "must be between 10 and 100"),
])
def test_a_bad_function_section_is_one_line_naming_the_key(section, key, text):
    with pytest.raises(ConfigError) as e:
        load({**stack_config_of(STACK), "function": section})
    (problem,) = e.value.problems
    assert problem.key == key and text in str(problem)


def test_keda_scales_the_function_between_one_replica_per_gpu_at_rest_and_at_the_pools_maximum(r):
    (scaled,) = r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
    pool = r.cfg.gpu_pool("t4")  # one T4 per node, 1-2 nodes
    assert (scaled.revealed["spec"]["minReplicaCount"], scaled.revealed["spec"]["maxReplicaCount"]) == \
        (pool.min_count, pool.max_count)
    assert scaled.revealed["spec"]["triggers"][0]["metadata"]["threshold"] == "60"


def test_the_function_takes_http_from_its_load_balancer_and_calls_nothing(render_of):
    r = render_of("function-gpu")
    assert allowed(r, PUBLIC, "gpu-function", 8080) and allowed(r, VNET, "gpu-function", 8080)
    assert not allowed(r, PUBLIC, "gpu-function", 22)
    assert not allowed(r, "gpu-function", PUBLIC, 443)
