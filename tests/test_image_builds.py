"""How a stack's images get into its registry: `az acr build` (``acr``) or the local Docker engine pushing with an
Entra token (``local``); either way pods run the digest the registry holds, after the kubelet's pull grant."""

from __future__ import annotations

import re

import pulumi
import pytest

from components.images.built import TOKEN_USER
from components.images.context import load_context
from components.images.digest import digest_of
from program import outputs
from tests.helpers import STACKS, render_with

STACK = "function-gpu"
TAG = load_context("docker/function").tag


@pytest.fixture(scope="module")
def r(render_of):
    return render_of(STACK)


@pytest.fixture(scope="module")
def local():
    return render_with(scenario=STACK, build={"mode": "local"})


def test_acr_mode_builds_the_folder_in_azure_for_amd64_and_prints_only_the_pushed_digest(r):
    """Round-3 audit #5: the CLI follows the run itself, so the TaskRun polling bug (pulumi-azure-native#1713)
    cannot fail a build that ran; the log goes to stderr, stdout is the digest."""
    build = r.named("image-function-build", "command:local:Command")
    registry = r.cfg.naming.registry()
    assert build.inputs["create"] == (
        f"az acr build --registry {registry} --image function:{TAG} --platform linux/amd64 --timeout 3600 "
        f"docker/function >&2 && az acr repository show --name {registry} --image function:{TAG} "
        "--query digest --output tsv")
    assert not r.of_type("azure-native:containerregistry:TaskRun") and not r.of_type("azure-native:storage:Blob")


def test_acr_mode_rebuilds_only_for_a_new_context(r):
    build = r.named("image-function-build")
    assert build.inputs["triggers"] == [load_context("docker/function").digest]
    assert build.replace_on_changes == ["triggers[*]"]


def test_local_mode_pushes_with_an_entra_token_fetched_after_the_registry_is_reachable(local):
    """Round-3 audit #3: Docker's credential store has nothing for a registry made in the same `pulumi up`; the
    push carries a token from `az acr login --expose-token` (container-registry-authentication)."""
    image = local.named("image-function-image", "docker:index/image:Image")
    assert image.inputs["build"] == {"context": "docker/function", "dockerfile": "docker/function/Dockerfile",
                                     "platform": "linux/amd64"}
    assert image.inputs["imageName"] == f"{local.cfg.naming.registry()}.azurecr.io/function:{TAG}"
    registry = image.revealed["registry"]
    assert registry["username"] == TOKEN_USER and registry["server"] == f"{local.cfg.naming.registry()}.azurecr.io"
    assert registry["password"] == "mock-entra-access-token"  # the token, stripped of the CLI's newline
    assert image.inputs["registry"]["password"] == "[secret]"
    assert "command:local:run" in local.invokes
    assert not local.of_type("command:local:Command")


def test_a_private_registry_is_pushed_to_only_once_its_endpoint_resolves(render_shape):
    r = render_shape("private-two-pools")
    image = r.named("image-jobs-image", "docker:index/image:Image")
    assert {"registry-private-endpoint", "registry-private-dns"} <= set(image.depends_on)


def test_local_mode_deploys_the_pushed_digest(local):
    image = local.named("function-deployment").inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert re.fullmatch(rf"{local.cfg.naming.registry()}\.azurecr\.io/function@sha256:[0-9a-f]{{64}}", image)


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_output_is_the_stacks_registry_by_digest(stack, render_of):
    r = render_of(stack)
    for key, image in r.outputs.items():
        if key.endswith("Image"):
            repository = key.removesuffix("Image")
            assert key == outputs.image(repository)
            assert re.fullmatch(rf"{r.cfg.naming.registry()}\.azurecr\.io/{repository}@sha256:[0-9a-f]{{64}}",
                                image), (r.stack, key)


def test_anything_but_a_digest_from_the_registry_stops_pulumi_up_in_one_line():
    assert digest_of("function", f"sha256:{'a' * 64}\n") == f"sha256:{'a' * 64}"
    with pytest.raises(pulumi.RunError, match=r"^image function: the registry reported 'ERROR: not found', not a "
                                              r"sha256 digest; workloads only run images by digest$"):
        digest_of("function", "ERROR: not found\n")
