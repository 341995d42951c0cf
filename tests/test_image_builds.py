"""How a stack's images get into its registry: an ACR Task run from an uploaded context (``acr``), or the local
Docker engine (``local``); either way pods run the pushed digest, after the kubelet's pull grant."""

from __future__ import annotations

import json
import re

import pytest

from aksgpu import outputs
from aksgpu.images.context import load_context
from tests.helpers import render_with

STACK = "function-gpu"
TAG = load_context("docker/function").tag


@pytest.fixture(scope="module")
def r(render_of):
    return render_of(STACK)


@pytest.fixture(scope="module")
def local():
    return render_with(scenario=STACK, build={"mode": "local"})


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


def test_every_image_output_is_the_stacks_registry_by_digest(renders):
    for r in renders.values():
        for key, image in r.outputs.items():
            if key.endswith("Image"):
                repository = key.removesuffix("Image")
                assert key == outputs.image(repository)
                assert re.fullmatch(rf"{r.cfg.naming.registry()}\.azurecr\.io/{repository}@sha256:[0-9a-f]{{64}}",
                                    image), (r.stack, key)
