"""Container images built from a folder under docker/ into the stack's ACR, in one of two modes.

``local`` (default): pulumi-docker builds with the Docker engine where ``pulumi up`` runs (GitHub-hosted runners
have one) and pushes with an Entra token for the registry that ``az acr login --expose-token`` fetches during the
deploy: the registry may be minutes old, so Docker's own credential store has nothing for it, and the ACR admin user
stays off. It needs no ACR Tasks, and it is the only way into a private registry (from inside its VNet).
``acr``: ``az acr build`` sends the folder to an ACR Task run that builds and pushes in Azure, seed 000's way, for a
machine without a Docker engine: where ``pulumi up`` runs needs only the Azure CLI. ACR Task runs are paused for
subscriptions on Azure free credits (container-registry-tasks-overview); the capacity preflight says so for a Free
Trial subscription (ops/capacity.py ``acr_tasks_line``). The CLI follows the run itself: an ARM ``TaskRun``
resource's create can fail on a malformed status URL although the build ran (pulumi/pulumi-azure-native#1713,
Azure/azure-rest-api-specs#19159).

Either way the tag is the context's digest (with the build arguments, where there are any), so an unchanged
folder neither rebuilds nor rolls pods, and workloads run the digest the registry holds. Either way the build reads
the context's staged copy (``context.stage``): the files the digest covers with fixed permissions, so the same tag is
the same build input whatever umask the checkout was made with.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_docker as docker
from pulumi_command import local

from components.images.context import BuildContext, stage
from components.images.digest import RegistryAccess, by_digest, digest_command
from components.vocabulary import BuildMode

PLATFORM = "linux/amd64"
"""GPU node pools are x86_64."""
BUILD_TIMEOUT_SECONDS = 3600
"""``az acr build``'s limit: the torch + CUDA layer is several GB; a cold ACR build of the function image takes 10-20
minutes."""
GPU_TOOLS_IMAGE = ("jobs", "docker/jobs")
"""The project's image with torch (repository, folder): scenarios' Jobs run it, and so does the platform's CUDA
client check on MPS pools."""
TOKEN_USER = "00000000-0000-0000-0000-000000000000"  # noqa: S105 (a name, not a secret)
"""The user name ACR takes with an Entra access token (container-registry-authentication, "az acr login
--expose-token")."""


@dataclass(frozen=True)
class ImageArgs:
    context: BuildContext
    """The folder to build (its Dockerfile at the root) and its digest."""
    repository: str
    """Repository in the registry, e.g. ``function``."""
    mode: BuildMode
    """``local`` (the local Docker engine, through pulumi-docker) or ``acr`` (an ACR Task run in Azure)."""
    registry: RegistryAccess
    """The stack's ACR, where the image is pushed."""
    build_args: Mapping[str, str] = field(default_factory=dict)
    """Values of the Dockerfile's ``ARG``s (a model and its commit, say): they join the tag, so new values are a new
    image and the same values never rebuild."""

    @property
    def tag(self) -> str:
        """The context's tag, or, with build arguments, a digest over the context's and theirs."""
        if not self.build_args:
            return self.context.tag
        text = "\0".join([self.context.digest, *(f"{k}={v}" for k, v in sorted(self.build_args.items()))])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class ContainerImage(pulumi.ComponentResource):
    image_ref: pulumi.Output[str]
    """What pods pull: ``<registry>/<repository>@sha256:...``."""

    def __init__(self, name: str, args: ImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:build:ContainerImage", name, None, opts)  # frozen: components/__init__.py
        image = f"{args.repository}:{args.tag}"
        directory = stage(args.context)
        if args.mode == BuildMode.LOCAL:
            pushed = self._local(name, args, image, directory)
        else:
            pushed = self._acr(name, args, image, directory)
        self.image_ref = by_digest(args.registry, args.repository, pushed)
        self.register_outputs({"image_ref": self.image_ref})

    def _acr(self, name: str, args: ImageArgs, image: str, directory: str) -> pulumi.Output[str]:
        """Build ``directory`` in Azure; the command prints the pushed digest (its build log goes to stderr)."""
        build_args = "".join(f" --build-arg {shlex.quote(f'{k}={v}')}" for k, v in sorted(args.build_args.items()))
        build = local.Command(
            f"{name}-build",
            create=pulumi.Output.concat(
                "az acr build --registry ", args.registry.name, f" --image {image} --platform {PLATFORM}",
                f" --timeout {BUILD_TIMEOUT_SECONDS}{build_args} {directory} >&2 && ",
                digest_command(args.registry.name, image)),
            # A changed folder or build argument is a new tag and so a new build; an unchanged one never rebuilds.
            triggers=[args.tag if args.build_args else args.context.digest],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.registry.reachable_after)),
        )
        return build.stdout

    def _local(self, name: str, args: ImageArgs, image: str, directory: str) -> pulumi.Output[str]:
        token = local.run_output(
            command=pulumi.Output.concat("az acr login --name ", args.registry.name,
                                         " --expose-token --query accessToken --output tsv"),
            # stdout is the token: pulumi-command streams a run's stdout into the engine's log unless told not to
            # (local/logging.go ShouldLogStdout), which CI prints and the PR comment quotes. stderr (az's warnings and
            # errors) stays.
            logging=local.Logging.STDERR,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=list(args.registry.reachable_after)),
        )
        pushed = docker.Image(
            f"{name}-image",
            image_name=pulumi.Output.concat(args.registry.login_server, "/", image),
            build=docker.DockerBuildArgs(
                context=directory,
                dockerfile=f"{directory}/Dockerfile",
                platform=PLATFORM,
                args=dict(args.build_args) or None,
            ),
            # A fresh token every run; pulumi-docker leaves a changed password out of the diff
            # (pulumi/pulumi-docker#498), so it never rebuilds for one.
            registry=docker.RegistryArgs(server=args.registry.login_server, username=TOKEN_USER,
                                         password=pulumi.Output.secret(token.stdout.apply(str.strip))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return pushed.repo_digest.apply(lambda ref: ref.rsplit("@", 1)[-1])
