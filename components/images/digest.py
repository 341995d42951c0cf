"""What every image the stack puts in its registry ends as: the digest the registry holds, read back with the
Azure CLI, and a reference that waits for the kubelet's pull grant."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class RegistryAccess:
    """The stack's registry as an image needs it: where it lands, and what must exist before this machine reaches the
    registry and before a pod pulls from it."""

    name: pulumi.Input[str]
    """The registry's name (an output: a build or import waits for the registry)."""
    login_server: pulumi.Input[str]
    """``<name>.azurecr.io``, for the reference pods pull."""
    pull_access: pulumi.CustomResource | None = None
    """The kubelet identity's AcrPull assignment: pods get the image reference only once it exists."""
    reachable_after: Sequence[pulumi.Resource] = ()
    """What this machine needs before it reaches a private registry: the registry's private endpoint, the runner's
    network links."""


def digest_command(registry_name: pulumi.Input[str], image: str) -> pulumi.Output[str]:
    """A shell command printing the digest ``image`` (``repository:tag``) has in the registry, and nothing else."""
    return pulumi.Output.concat("az acr repository show --name ", registry_name, f" --image {image}",
                                " --query digest --output tsv")


def digest_of(repository: str, printed: str) -> str:
    """The digest ``digest_command`` printed; anything else stops ``pulumi up`` with one line."""
    digest = printed.strip()
    if not DIGEST.fullmatch(digest):
        raise pulumi.RunError(f"image {repository}: the registry reported {digest!r}, not a sha256 digest; "
                              "workloads only run images by digest")
    return digest


def by_digest(registry: RegistryAccess, repository: str, printed: pulumi.Input[str]) -> pulumi.Output[str]:
    """``<login server>/<repository>@sha256:...`` from what ``digest_command`` printed.

    Pulumi cannot see that pulling needs the kubelet's AcrPull assignment: the reference carries it, so every
    workload that runs the image waits for it."""
    digest = pulumi.Output.from_input(printed).apply(lambda text: digest_of(repository, text))
    reference = pulumi.Output.concat(registry.login_server, "/", repository, "@", digest)
    if registry.pull_access is None:
        return reference
    return pulumi.Output.all(reference, registry.pull_access.id).apply(lambda values: values[0])
