"""The keys of a stack's config outside the ``aksgpu:`` namespace. Pulumi hands the program every key of the stack
file, and each provider reads its own namespace; a key is either a setting of a provider the program uses through
its default provider (its sign-in to Azure, the local Docker engine), or a mistake: an ``aksgpu:`` key without its
prefix, a provider setting the program overrides, a namespace nothing reads. Each mistake is one line naming the
key as written, with the key that was meant where there is one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from program.config.errors import ConfigError
from program.config.keys import KEY_PREFIX, SECRET

PROVIDER_SETTINGS: dict[str, frozenset[str]] = {
    # pulumi-azure-native 3.29.0's provider config (pulumi_azure_native/config/vars.py), but `location`: every Azure
    # resource of the program takes its region from aksgpu:location, so the provider's default region never applies.
    "azure-native": frozenset({
        "auxiliaryTenantIds", "clientCertificatePassword", "clientCertificatePath", "clientId", "clientSecret",
        "disableInstanceDiscovery", "disablePulumiPartnerId", "environment", "metadataHost", "msiEndpoint",
        "oidcRequestToken", "oidcRequestUrl", "oidcToken", "oidcTokenFilePath", "partnerId", "subscriptionId",
        "tenantId", "useDefaultAzureCredential", "useMsi", "useOidc"}),
    # pulumi-docker 5.2.0's provider config (pulumi_docker/config/vars.py): the engine a local build talks to.
    "docker": frozenset({"caMaterial", "certMaterial", "certPath", "context", "disableDockerDaemonCheck", "host",
                         "keyMaterial", "registryAuth", "sshOpts"}),
}
"""Provider namespace → the settings its default provider reads, for the providers the program uses without an
explicit provider resource (tests hold this to the renders and the SDKs)."""
OVERRIDDEN = {"azure-native:location": f"{KEY_PREFIX}location"}
"""Provider settings the program never lets apply → the project key that decides instead."""
SECRET_SETTINGS = {"azure-native:clientSecret": "ARM_CLIENT_SECRET",
                   "azure-native:clientCertificatePassword": "ARM_CLIENT_CERTIFICATE_PASSWORD",
                   "azure-native:oidcToken": "ARM_OIDC_TOKEN",
                   "azure-native:oidcRequestToken": "ARM_OIDC_REQUEST_TOKEN",
                   "docker:keyMaterial": None}
"""Credentials among those settings → where they belong instead of a stack file's plain text (the environment
variable the provider reads), besides ``pulumi config set --secret``."""
LOCAL_BUILD = "docker"
"""The namespace read only by stacks that build images with the local Docker engine (``build.mode: local``, the
default)."""


def read_namespaces(local_build: bool) -> set[str]:
    """The provider namespaces a stack's program reads: Azure's always, Docker's for a local build."""
    return {ns for ns in PROVIDER_SETTINGS if ns != LOCAL_BUILD or local_build}


def _closest(name: str, choices: Iterable[str]) -> str | None:
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return by_lower[close[0]] if close else None


def _problem(key: str, value: Any, project_keys: Iterable[str], local_build: bool) -> str | None:
    """Why ``key`` has no place in the stack file, or None for a provider setting the program uses."""
    namespace, colon, name = key.rpartition(":")
    project = set(project_keys)
    if not colon:
        meant = name if name in project else _closest(name, project)
        hint = f"did you mean {KEY_PREFIX}{meant}?" if meant else f"this program's keys are {KEY_PREFIX}KEY"
        return f"a key without a namespace, which nothing reads; {hint}"
    if key in OVERRIDDEN:
        return f"the program never uses it: {OVERRIDDEN[key]} decides; did you mean {OVERRIDDEN[key]}?"
    if name in project or (namespace not in PROVIDER_SETTINGS and _closest(name, project)):
        meant = name if name in project else _closest(name, project)
        return f"not this program's namespace; did you mean {KEY_PREFIX}{meant}?"
    read = read_namespaces(local_build)
    if namespace in PROVIDER_SETTINGS and namespace not in read:
        return (f"the {namespace} provider runs only for a stack that builds its images with the local Docker engine "
                f"({KEY_PREFIX}build.mode: local, the default), and this stack sets acr")
    if namespace not in read:
        meant = _closest(namespace, [KEY_PREFIX[:-1], *read])
        hint = f"did you mean {meant}:{name}? " if meant else ""
        return f"nothing in this program reads the {namespace} namespace; {hint}it reads {', '.join(sorted(read))}"
    settings = PROVIDER_SETTINGS[namespace]
    if name not in settings:
        meant = _closest(name, settings)
        hint = f"did you mean {namespace}:{meant}? " if meant else ""
        return f"not a setting of the {namespace} provider; {hint}allowed: {', '.join(sorted(settings))}"
    if key in SECRET_SETTINGS and value != SECRET:
        where = f" or in the environment ({SECRET_SETTINGS[key]})" if SECRET_SETTINGS[key] else ""
        return f"a credential in plain text; set it with `pulumi config set --secret {key}`{where}"
    return None


def foreign_keys(others: Mapping[str, Any], project_keys: Iterable[str], local_build: bool) -> list[ConfigError]:
    """One error per key of ``others`` (the stack's keys outside the project's namespace, written in full) that no
    provider of the program reads."""
    project_keys = list(project_keys)
    return [ConfigError(key, value, problem) for key, value in others.items()
            if (problem := _problem(key, value, project_keys, local_build)) is not None]


def misplaced_project_keys(problems: Iterable[ConfigError]) -> list[ConfigError]:
    """The problems that are project keys written without (or with a wrong) prefix: what the rest of the file means
    depends on them, so they are reported alone."""
    return [p for p in problems if f"did you mean {KEY_PREFIX}" in p.allowed]
