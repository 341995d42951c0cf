"""A public image copied into the stack's ACR (``az acr import``) and referenced there by digest.

Nodes then pull from the registry they already may pull from (AcrPull), inside Azure, instead of from Docker Hub
with its anonymous pull limits; and the workload gets the digest the registry recorded, so a moved tag upstream
changes nothing until the next import. The copy runs registry to registry in Azure: no Docker engine where
``pulumi up`` runs, only the Azure CLI the deploy already needs, signed in as someone with push rights on the
registry. (pulumi-docker's registry lookup would need a Docker engine: pulumi/pulumi-docker#1106.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
from pulumi_command import local

from components.images.digest import RegistryAccess, by_digest, digest_command

DOCKER_HUB_TOKEN_ENV = "DOCKERHUB_TOKEN"  # noqa: S105 (a name, not a secret)
"""Where a Docker Hub access token is read from (the deploy workflow sets it from the repository secret)."""


@dataclass(frozen=True)
class SourceLogin:
    """An account on the source registry. Its token is read from the environment where ``pulumi up`` runs, never
    kept in state: anonymous imports from Docker Hub share its pull limits and fail intermittently
    (container-registry-import-images: "we recommend that you use the credentials")."""

    username: str
    """The account's user name."""
    token_env: str
    """The environment variable holding its access token (a CI secret)."""


@dataclass(frozen=True)
class ImportedImageArgs:
    source: str
    """The public image, ``registry/repository:tag`` (``docker.io/vllm/vllm-openai:v0.33.0``)."""
    registry: RegistryAccess
    """The stack's ACR, where the copy lands."""
    source_login: SourceLogin | None = None
    """Sign in to the source registry; None: an anonymous import."""


def target(source: str) -> str:
    """Where the copy lands in the registry: the source's repository and tag, without its registry host."""
    match = re.fullmatch(r"(?:[^/]+\.[^/]+/)?([\w./-]+):([\w.-]+)", source)
    if not match:
        raise ValueError(f"{source}: expected registry/repository:tag")
    return f"{match[1]}:{match[2]}"


class ImportedImage(pulumi.ComponentResource):
    image_ref: pulumi.Output[str]
    """``<login server>/<repository>@sha256:...``: what pods run."""

    def __init__(self, name: str, args: ImportedImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:build:ImportedImage", name, None, opts)  # frozen: components/__init__.py
        image = target(args.source)
        login = ""
        if args.source_login is not None:
            user, env = args.source_login.username, args.source_login.token_env
            login = f' --username {user} --password "${{{env}:?set {env} to the access token of {user}}}"'
        # Re-running with --force is a no-op for an unchanged tag; the digest is what the registry now holds.
        command = local.Command(
            f"{name}-import",
            create=pulumi.Output.concat("az acr import --name ", args.registry.name,
                                        f" --source {args.source} --image {image}{login} --force >&2 && ",
                                        digest_command(args.registry.name, image)),
            triggers=[args.source],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.registry.reachable_after)))
        self.image_ref = by_digest(args.registry, image.split(":")[0], command.stdout)
        self.register_outputs({"image_ref": self.image_ref})
