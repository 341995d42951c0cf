"""Container images built from a folder under docker/ and pushed to the stack's ACR, in one of two modes.

``acr`` (default): the context is uploaded as a content-named blob and an ACR Task run builds and pushes it
in Azure, like seed 000's ``az acr build``; nothing but the Pulumi CLI is needed where ``pulumi up`` runs.
``local``: pulumi-docker builds with the local Docker engine and pushes with the credentials that
``az acr login`` stored (an Entra token, no admin user).

Either way the tag is the context's digest, so an unchanged folder neither rebuilds nor rolls pods,
and the deployment gets an immutable reference (the pushed digest where the builder reports one).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker
from pulumi_azure_native import containerregistry as acr
from pulumi_azure_native import storage

from aksgpu.azure.storage import sas_expiry
from aksgpu.config.types import BuildMode
from aksgpu.images.context import PROJECT_ROOT, BuildContext

PLATFORM = "linux/amd64"
"""GPU node pools are x86_64."""
BUILD_TIMEOUT_SECONDS = 3600
"""The torch + CUDA layer is several GB; a cold ACR build of the function image takes 10-20 minutes."""
CONTEXT_SAS_DAYS = 2
"""The run reads its context minutes after the upload; a midnight-rounded expiry two days out keeps the request
the same all day and inside the build account's SAS policy (``CONTEXT_SAS_POLICY_DAYS``)."""
CONTEXT_SAS_POLICY_DAYS = 7
"""The longest SAS the build-context account accepts."""
CONTEXT_CONTAINER = "contexts"
"""Blob container (in the stack's build storage account) holding uploaded build contexts."""


@dataclass(frozen=True)
class ImageArgs:
    context: BuildContext
    """The folder to build (its Dockerfile at the root) and its digest."""
    repository: str
    """Repository in the registry, e.g. ``function``."""
    mode: BuildMode
    """``acr`` (an ACR Task run in Azure) or ``local`` (the local Docker engine)."""
    registry_name: pulumi.Input[str]
    """The stack's ACR."""
    login_server: pulumi.Input[str]
    """``<name>.azurecr.io``."""
    resource_group_name: pulumi.Input[str]
    """Resource group of the registry (and of the build storage account)."""
    location: str
    """Azure region of the registry, where the ACR Task runs."""
    context_account: pulumi.Input[str] | None = None
    """Storage account that receives the uploaded context (``acr`` mode)."""
    context_container: pulumi.Input[str] | None = None
    """Its container, as the container's output: the upload must wait until the container exists."""
    pull_access: pulumi.Resource | None = None
    """The kubelet identity's AcrPull assignment: pods get the image reference only once it exists."""


class ContainerImage(pulumi.ComponentResource):
    image_ref: pulumi.Output[str]
    """What pods pull: ``<registry>/<repository>@sha256:...``, or ``:<context digest>`` until a digest is known."""

    def __init__(self, name: str, args: ImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:build:ContainerImage", name, None, opts)
        tagged = pulumi.Output.concat(args.login_server, "/", args.repository, ":", args.context.tag)
        if args.mode == BuildMode.LOCAL:
            self.image_ref = self._local(name, args, tagged)
        else:
            if args.context_account is None or args.context_container is None:
                raise ValueError(f"image {name}: acr mode needs a storage account and container for the context")
            self.image_ref = self._acr_task(name, args)
        if args.pull_access is not None:
            # Pulumi cannot see that pulling needs the role assignment: carry it in the reference, so every
            # workload that uses the image waits for it.
            self.image_ref = pulumi.Output.all(self.image_ref, args.pull_access.id).apply(lambda v: v[0])
        self.register_outputs({"image_ref": self.image_ref})

    def _local(self, name: str, args: ImageArgs, tagged: pulumi.Output[str]) -> pulumi.Output[str]:
        image = docker.Image(
            f"{name}-image",
            image_name=tagged,
            build=docker.DockerBuildArgs(
                context=args.context.directory,
                dockerfile=f"{args.context.directory}/Dockerfile",
                platform=PLATFORM,
            ),
            # No registry credentials here: the push uses Docker's store, filled by `az acr login`.
            opts=pulumi.ResourceOptions(parent=self),
        )
        return image.repo_digest

    def _acr_task(self, name: str, args: ImageArgs) -> pulumi.Output[str]:
        blob_name = f"{args.repository}/{args.context.digest}.tar.gz"
        # Written under build/ (git-ignored) with a relative path, so the asset is the same on every machine.
        tarball = args.context.write_tarball(PROJECT_ROOT / "build" / "contexts" / f"{args.repository}.tar.gz")
        upload = storage.Blob(
            f"{name}-context",
            account_name=args.context_account,
            container_name=args.context_container,
            resource_group_name=args.resource_group_name,
            blob_name=blob_name,
            type=storage.BlobType.BLOCK,
            content_type="application/gzip",
            source=pulumi.FileAsset(str(tarball.relative_to(PROJECT_ROOT))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        sas = storage.list_storage_account_service_sas_output(
            account_name=args.context_account,
            resource_group_name=args.resource_group_name,
            canonicalized_resource=pulumi.Output.concat("/blob/", args.context_account,
                                                        f"/{CONTEXT_CONTAINER}/{blob_name}"),
            resource=storage.SignedResource.B,
            permissions=storage.Permissions.R,
            protocols=storage.HttpProtocol.HTTPS,
            shared_access_expiry_time=sas_expiry(CONTEXT_SAS_DAYS),
            opts=pulumi.InvokeOptions(parent=self),
        )
        source = pulumi.Output.secret(pulumi.Output.concat(
            "https://", args.context_account, f".blob.core.windows.net/{CONTEXT_CONTAINER}/{blob_name}?",
            sas.service_sas_token))
        run = acr.TaskRun(
            f"{name}-build",
            registry_name=args.registry_name,
            resource_group_name=args.resource_group_name,
            location=args.location,
            # A new context digest is a new run name, so a replacement, so a new build; the same digest is
            # the same run, and the daily-rotating SAS in the request is ignored rather than rebuilding.
            task_run_name=f"{args.repository}-{args.context.tag}",
            run_request=acr.DockerBuildRequestArgs(
                type="DockerBuildRequest",
                source_location=source,
                docker_file_path="Dockerfile",
                image_names=[f"{args.repository}:{args.context.tag}"],
                is_push_enabled=True,
                platform=acr.PlatformPropertiesArgs(os=acr.OS.LINUX, architecture=acr.Architecture.AMD64),
                timeout=BUILD_TIMEOUT_SECONDS,
            ),
            # The run reads the blob by URL, an edge Pulumi cannot see.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[upload], ignore_changes=["runRequest"]),
        )
        return pulumi.Output.all(args.login_server, run.run_result).apply(
            lambda values: image_reference(values[0], args.repository, args.context.tag, values[1]))


def _field(value: object, name: str) -> object:
    """A field of an SDK output object, which arrives as a typed object or a plain dict."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def image_reference(login_server: str, repository: str, tag: str, run_result: object) -> str:
    """The digest the ACR run pushed for ``repository:tag``; a run that did not succeed, or pushed no digest,
    stops ``pulumi up`` with one line naming the run (pods would otherwise wait on ImagePullBackOff)."""
    status, run = _field(run_result, "status"), _field(run_result, "run_id") or f"{repository}-{tag}"
    if status != "Succeeded":
        raise pulumi.RunError(f"image build {run} of {repository}:{tag} ended {status or 'without a status'}; "
                              f"see its log: az acr taskrun logs --registry {login_server.split('.')[0]} "
                              f"--name {repository}-{tag}")
    for image in _field(run_result, "output_images") or []:
        if _field(image, "repository") == repository and _field(image, "tag") == tag and _field(image, "digest"):
            return f"{login_server}/{repository}@{_field(image, 'digest')}"
    raise pulumi.RunError(f"image build {run} of {repository}:{tag} succeeded but reported no pushed digest; "
                          "workloads only run images by digest")
