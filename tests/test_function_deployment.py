"""The function-gpu stack: image built into the stack's ACR, a KEDA-scaled Deployment on the GPU pool, a
LoadBalancer on port 80."""

from __future__ import annotations

import json
import re

import pytest

from components.build.context import load_context
from program import outputs
from tests.helpers import render_with, stack_config_of

STACK = "function-gpu"
TAG = load_context("docker/function").tag
DOCKERFILE = (load_context("docker/function").path / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def r(render_of):
    return render_of(STACK)


@pytest.fixture(scope="module")
def pod(r):
    return r.named("function-deployment").inputs["spec"]["template"]["spec"]


def test_acr_task_builds_the_function_folder_for_amd64_and_pushes_a_content_tag(r):
    run = r.named("image-function-build", "azure-native:containerregistry:TaskRun")
    assert run.inputs["taskRunName"] == f"function-{TAG}"
    assert run.inputs["registryName"] == r.cfg.naming.registry()
    # The request carries the SAS URL, so the whole request is a secret in state; the render masks its values.
    assert run.inputs["runRequest"]["sourceLocation"] == "[secret]"
    assert "sig=" not in json.dumps(run.inputs)
    request = run.revealed["runRequest"]
    assert request["type"] == "DockerBuildRequest" and request["dockerFilePath"] == "Dockerfile"
    assert request["platform"] == {"architecture": "amd64", "os": "Linux"}
    assert request["imageNames"] == [f"function:{TAG}"] and request["isPushEnabled"] is True
    account = r.cfg.naming.storage_account("build")
    assert re.fullmatch(rf"https://{account}\.blob\.core\.windows\.net/contexts/function/[0-9a-f]{{64}}\.tar\.gz"
                        r"\?.*sr=b&sp=r&.*", request["sourceLocation"])


def test_acr_task_reruns_only_for_a_new_context(r):
    run = r.named("image-function-build")
    assert run.ignore_changes == ["runRequest"]  # a re-signed SAS alone never rebuilds
    assert "image-function-context" in run.depends_on  # the run reads the uploaded blob by URL


def test_context_upload_is_named_by_its_digest_from_a_relative_path(r):
    blob = r.named("image-function-context", "azure-native:storage:Blob")
    digest = load_context("docker/function").digest
    assert blob.inputs["blobName"] == f"function/{digest}.tar.gz"
    assert blob.inputs["containerName"] == "contexts"
    assert blob.inputs["source"] == {"fileAsset": "build/contexts/function.tar.gz"}


def test_build_context_account_is_private_https_only_with_short_sas(r):
    account = r.named("build-contexts-account").inputs
    assert account["allowBlobPublicAccess"] is False
    assert account["enableHttpsTrafficOnly"] is True and account["minimumTlsVersion"] == "TLS1_2"
    assert account["allowSharedKeyAccess"] is True  # a SAS is signed with the key; data accounts keep it off
    assert account["sasPolicy"]["sasExpirationPeriod"] == "7.00:00:00"


def test_registry_keeps_the_admin_user_off(r):
    registry = r.named("registry-acr").inputs
    assert registry["adminUserEnabled"] is False and registry["anonymousPullEnabled"] is False


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
    assert r.outputs[outputs.FUNCTION_IMAGE] == image


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
    assert r.outputs[outputs.FUNCTION_PORT_FORWARD].startswith(
        "kubectl port-forward --namespace gpu-function service/gpu-function 8080:80")


def test_a_public_function_is_limited_to_its_source_ranges():
    r = render_with(**{**stack_config_of("function-gpu"),
                       "function": {"exposure": "public", "allowedSourceRanges": ["203.0.113.0/24"]}})
    service = r.named("function-service").inputs
    assert "service.beta.kubernetes.io/azure-load-balancer-internal" not in service["metadata"]["annotations"]
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]


def test_outputs_give_the_base_and_status_urls(r):
    base = r.outputs[outputs.FUNCTION_BASE_URL]
    assert re.fullmatch(r"http://\d+\.\d+\.\d+\.\d+/", base)
    assert r.outputs[outputs.FUNCTION_STATUS_URL] == f"{base}api/status"


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    return render_with(scenario=STACK, build={"mode": "local"},
                      function={"exposure": "internal", "allowedSourceRanges": ["10.0.0.0/8"]})


def test_local_mode_builds_with_docker_for_amd64_without_registry_credentials(local):
    image = local.named("image-function-image", "docker:index/image:Image").inputs
    assert image["build"]["context"] == "docker/function"
    assert image["build"]["platform"] == "linux/amd64"
    assert image["imageName"] == f"{local.cfg.naming.registry()}.azurecr.io/function:{TAG}"
    assert "registry" not in image  # the push uses `az acr login`'s Entra token, not an admin password
    assert not local.of_type("azure-native:containerregistry:TaskRun")
    assert not [r for r in local.resources if r.name.startswith("build-contexts")]


def test_local_mode_deploys_the_pushed_digest(local):
    image = local.named("function-deployment").inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert re.fullmatch(rf"{local.cfg.naming.registry()}\.azurecr\.io/function@sha256:[0-9a-f]{{64}}", image)


def test_internal_exposure_keeps_the_ip_in_the_vnet_and_limits_sources(local):
    service = local.named("function-service").inputs
    assert service["metadata"]["annotations"] == {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
