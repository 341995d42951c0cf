"""How a stack's images get into its registry: the local Docker engine through pulumi-docker, pushing with an Entra
token (``local``, the default), or `az acr build` (``acr``, for a machine without Docker); either way pods run the
digest the registry holds, after the kubelet's pull grant."""

from __future__ import annotations

import re

import pulumi
import pytest

from components.images.built import TOKEN_USER
from components.images.context import PROJECT_ROOT, STAGING, load_context
from components.images.digest import digest_of
from components.vocabulary import BuildMode
from program import outputs
from program.config.schema import BuildConfig
from tests.helpers import STACKS, render_with

STACK = "function-gpu"
CONTEXT = load_context("docker/function")
TAG = CONTEXT.tag


@pytest.fixture(scope="module")
def r(render_of):
    return render_of(STACK)


@pytest.fixture(scope="module")
def acr():
    return render_with(scenario=STACK, build={"mode": "acr"})


def test_images_build_with_the_local_docker_engine_unless_a_stack_asks_for_acr_tasks():
    """Issue 36 item 7, round-4 Azure audit #6: ACR Task runs "are temporarily paused from Azure free credits"
    (learn.microsoft.com/azure/container-registry/container-registry-tasks-overview), so the default build needs
    none; GitHub-hosted runners have a Docker engine."""
    assert BuildConfig().mode == BuildMode.LOCAL


def test_the_function_image_is_built_and_pushed_by_pulumi_docker_with_an_entra_token(r):
    """Round-3 audit #3: Docker's credential store has nothing for a registry made in the same `pulumi up`; the
    push carries a token from `az acr login --expose-token` (container-registry-authentication), never the
    registry's admin user."""
    image = r.named("image-function-image", "docker:index/image:Image")
    assert image.parent == "image-function"
    assert image.inputs["build"] == {"context": ".image-contexts/docker/function",
                                     "dockerfile": ".image-contexts/docker/function/Dockerfile",
                                     "platform": "linux/amd64"}
    assert image.inputs["imageName"] == f"{r.cfg.naming.registry()}.azurecr.io/function:{TAG}"
    registry = image.revealed["registry"]
    assert registry["username"] == TOKEN_USER and registry["server"] == f"{r.cfg.naming.registry()}.azurecr.io"
    assert registry["password"] == "mock-entra-access-token"  # the token, stripped of the CLI's newline
    assert image.inputs["registry"]["password"] == "[secret]"
    assert "command:local:run" in r.invokes
    assert not r.of_type("command:local:Command")
    assert r.named("registry-acr").inputs.get("adminUserEnabled") in (None, False)


def test_the_registry_token_is_kept_out_of_the_deploy_log(r):
    """fn audit #1 (BLOCKER): pulumi-command streams a run's stdout into the engine's log unless ``logging`` says
    otherwise (pulumi-command v1.2.1 provider/pkg/provider/local/logging.go: ShouldLogStdout is true for nil;
    commandOutputs.go:62-64 writes stdout to the log pipe), and the engine shows an invoke's log on the stack's row,
    which CI's log prints and the preview's PR comment quotes. This command's stdout is the registry token."""
    logins = [args for args in r.called("command:local:run") if "--expose-token" in args["command"]]
    assert len(logins) == len(r.of_type("docker:index/image:Image")) == 2  # one per image: function, jobs
    assert {login["logging"] for login in logins} == {"stderr"}


def test_both_modes_build_the_staged_copy_of_exactly_the_files_the_tag_covers(r, acr):
    """fn audit #3: the copy's permissions are fixed (tests/test_build_context.py), so pulumi-docker's context digest
    is one per tag on every machine."""
    staged = PROJECT_ROOT / STAGING / "docker/function"
    assert r.named("image-function-image").inputs["build"]["context"] == f"{STAGING}/docker/function"
    assert f" {STAGING}/docker/function >&2 " in acr.named("image-function-build").inputs["create"]
    assert sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*")) == list(CONTEXT.files)


def test_a_preview_does_not_build(r):
    """pulumi-docker 5.2.0's Image builds on preview only with ``buildOnPreview`` (default false): a pull request's
    preview needs no Docker build."""
    assert not r.named("image-function-image").inputs.get("buildOnPreview")


def test_the_function_deployment_runs_the_pushed_digest(r):
    image = r.named("function-deployment").inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert re.fullmatch(rf"{r.cfg.naming.registry()}\.azurecr\.io/function@sha256:[0-9a-f]{{64}}", image)


def test_acr_mode_builds_the_folder_in_azure_for_amd64_and_prints_only_the_pushed_digest(acr):
    """Round-3 audit #5: the CLI follows the run itself, so the TaskRun polling bug (pulumi-azure-native#1713)
    cannot fail a build that ran; the log goes to stderr, stdout is the digest."""
    build = acr.named("image-function-build", "command:local:Command")
    registry = acr.cfg.naming.registry()
    assert build.inputs["create"] == (
        f"az acr build --registry {registry} --image function:{TAG} --platform linux/amd64 --timeout 3600 "
        f".image-contexts/docker/function >&2 && az acr repository show --name {registry} --image function:{TAG} "
        "--query digest --output tsv")
    assert not acr.of_type("docker:index/image:Image")
    assert not acr.of_type("azure-native:containerregistry:TaskRun") and not acr.of_type("azure-native:storage:Blob")


def test_acr_mode_rebuilds_only_for_a_new_context(acr):
    build = acr.named("image-function-build")
    assert build.inputs["triggers"] == [load_context("docker/function").digest]
    assert build.replace_on_changes == ["triggers[*]"]


def test_a_private_registry_is_pushed_to_only_once_its_endpoint_resolves(render_shape):
    r = render_shape("private-two-pools")
    image = r.named("image-jobs-image", "docker:index/image:Image")
    assert {"registry-private-endpoint", "registry-private-dns"} <= set(image.depends_on)


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
