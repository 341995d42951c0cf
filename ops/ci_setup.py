"""What Azure needs before the workflows can run, derived from the workflows (``python -m ops ci-setup``).

GitHub gives a job an OIDC token whose subject depends on how the job runs: ``environment:<name>`` for a job in a
GitHub environment, ``pull_request`` for a pull request, ``ref:refs/heads/<branch>`` otherwise (GitHub docs,
"OpenID Connect reference"). Entra ID accepts a token only through a federated credential with exactly that
subject, so the app needs one per subject the workflows produce: per stack environment, one for pull requests,
one for the main branch. A reusable workflow's jobs run in its caller's context.

The app also needs roles on the subscription (the program creates its own resource groups and assigns roles:
Contributor plus Role Based Access Control Administrator, or Owner), data roles on the state backend, and the
subscription must have the resource providers registered (a fresh one does not: MissingSubscriptionRegistration,
pulumi/pulumi-azure-native#3479).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from offline.cli import error
from offline.stack_files import REPO_ROOT, stack_files

ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "api://AzureADTokenExchange"
MAX_CREDENTIALS = 20
"""Federated identity credentials per app (Entra ID limit)."""
STACK_EXPRESSIONS = ("${{ matrix.stack }}", "${{ inputs.stack }}")
"""How the workflows name a job's environment after its stack."""
SUBSCRIPTION_ROLES = ("Contributor", "Role Based Access Control Administrator")
"""Create every resource; assign the roles the program grants (AcrPull, data roles, cluster admin)."""
RESOURCE_PROVIDERS = (
    "Microsoft.AlertsManagement", "Microsoft.Compute", "Microsoft.ContainerRegistry", "Microsoft.ContainerService",
    "Microsoft.Dashboard", "Microsoft.Insights", "Microsoft.KeyVault", "Microsoft.ManagedIdentity",
    "Microsoft.Monitor", "Microsoft.Network", "Microsoft.OperationalInsights", "Microsoft.Storage",
)
"""Every namespace the stacks create resources in (tests hold this to the renders), AKS's nodes (Compute) and the
state backend's Key Vault."""


def _on(workflow: Mapping[str, Any]) -> Mapping[str, Any]:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as True
    return {t: {} for t in triggers} if isinstance(triggers, list) else triggers or {}


def _asks_for_token(job: Mapping[str, Any], workflow: Mapping[str, Any]) -> bool:
    permissions = job.get("permissions", workflow.get("permissions")) or {}
    return isinstance(permissions, Mapping) and permissions.get("id-token") == "write"


def _token_jobs(workflow: Mapping[str, Any], workflows: Mapping[str, Mapping[str, Any]]
                ) -> Iterable[Mapping[str, Any]]:
    """The jobs that ask for an OIDC token, reusable workflows' jobs included."""
    for job in (workflow.get("jobs") or {}).values():
        called = str(job.get("uses", ""))
        if called.startswith("./.github/workflows/"):
            callee = workflows[Path(called).name]
            yield from (j for j in _token_jobs(callee, workflows) if _asks_for_token(job, workflow))
        elif _asks_for_token(job, workflow):
            yield job


def subject_repo(repo: str, ids: str | None = None) -> str:
    """How a token's subject names the repository: ``OWNER/NAME``, or with ``ids`` (``OWNER_ID/REPO_ID``) the
    immutable form GitHub uses for repositories created after 2026-06-18, ``OWNER-OWNER_ID/NAME-REPO_ID``."""
    if ids is None:
        return repo
    (owner, name), (owner_id, repo_id) = repo.split("/"), ids.split("/")
    return f"{owner}-{owner_id}/{name}-{repo_id}"


def subjects(workflows: Mapping[str, Mapping[str, Any]], repo: str, stacks: Iterable[str],
             branch: str = "main") -> dict[str, str]:
    """Credential name → the subject of every token the workflows ask for; ``repo`` as ``subject_repo`` gives it."""
    found: dict[str, str] = {}
    for workflow in workflows.values():
        triggers = set(_on(workflow)) - {"workflow_call"}
        for job in _token_jobs(workflow, workflows):
            environment = job.get("environment")
            if environment in STACK_EXPRESSIONS:
                found |= {f"environment-{s}": f"repo:{repo}:environment:{s}" for s in stacks}
            elif environment:
                found[f"environment-{environment}"] = f"repo:{repo}:environment:{environment}"
            else:
                if "pull_request" in triggers:
                    found["pull-request"] = f"repo:{repo}:pull_request"
                if triggers - {"pull_request"}:
                    found[branch] = f"repo:{repo}:ref:refs/heads/{branch}"
    return dict(sorted(found.items()))


def load_workflows(folder: Path) -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yml"))}


def script(repo: str, credentials: Mapping[str, str], state_account: str | None = None,
           key_vault: str | None = None) -> str:
    """The Azure CLI (and gh) commands that set up an app for the workflows, as a bash script to review and run."""
    q = shlex.quote
    app_name = "aksgpu-ci-" + repo.replace("/", "-")
    lines = [
        "#!/usr/bin/env bash",
        f"# Azure setup for the workflows of {repo} (generated by: python -m ops ci-setup --repo {repo}).",
        "# Run it signed in (az login) to the subscription the stacks deploy into, as someone who may create",
        "# Entra apps and assign roles on it. Review before running.",
        "set -euo pipefail",
        'subscription=$(az account show --query id --output tsv)',
        "",
        "# Resource providers a fresh subscription has not registered (MissingSubscriptionRegistration otherwise).",
        *(f"az provider register --namespace {p} --output none" for p in RESOURCE_PROVIDERS),
        "",
        "# The app the workflows sign in as: no secret, only federated credentials.",
        f"app=$(az ad app create --display-name {q(app_name)} --query appId --output tsv)",
        'az ad sp create --id "$app" --output none',
        f"# One federated credential per token subject the workflows produce ({len(credentials)} of "
        f"{MAX_CREDENTIALS}).",
    ]
    for name, subject in credentials.items():
        body = json.dumps({"name": name, "issuer": ISSUER, "subject": subject, "audiences": [AUDIENCE]})
        lines.append(f'az ad app federated-credential create --id "$app" --parameters {q(body)} --output none')
    lines += ["", "# Roles: the program creates resource groups and assigns roles (AcrPull, data, cluster admin).",
              *(f'az role assignment create --assignee "$app" --role {q(role)} --scope "/subscriptions/$subscription" '
                "--output none" for role in SUBSCRIPTION_ROLES)]
    if state_account:
        lines += ["# State: read and write the stacks' state blobs.",
                  f"account_id=$(az storage account show --name {q(state_account)} --query id --output tsv)",
                  'az role assignment create --assignee "$app" --role "Storage Blob Data Contributor" '
                  '--scope "$account_id" --output none']
    if key_vault:
        lines += ["# Secrets: wrap and unwrap each stack's data key.",
                  f"vault_id=$(az keyvault show --name {q(key_vault)} --query id --output tsv)",
                  'az role assignment create --assignee "$app" --role "Key Vault Crypto User" --scope "$vault_id" '
                  "--output none"]
    lines += ["", "# What the workflows read (repository variables; none of them is a secret).",
              f'gh variable set AZURE_CLIENT_ID --repo {q(repo)} --body "$app"',
              f"gh variable set AZURE_TENANT_ID --repo {q(repo)} --body \"$(az account show --query tenantId "
              "--output tsv)\"",
              f'gh variable set AZURE_SUBSCRIPTION_ID --repo {q(repo)} --body "$subscription"']
    if state_account:
        lines.append(f"gh variable set PULUMI_BACKEND_URL --repo {q(repo)} "
                     f"--body {q(f'azblob://state?storage_account={state_account}')}")
    if key_vault:
        lines.append(f"gh variable set PULUMI_SECRETS_PROVIDER --repo {q(repo)} "
                     f"--body {q(f'azurekeyvault://{key_vault}.vault.azure.net/keys/pulumi')}")
    return "\n".join(lines) + "\n"


def ci_setup_command(args: argparse.Namespace) -> int:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        return error(f"--repo {args.repo!r}: expected OWNER/NAME")
    if args.ids is not None and not re.fullmatch(r"\d+/\d+", args.ids):
        return error(f"--ids {args.ids!r}: expected OWNER_ID/REPO_ID (gh api repos/OWNER/NAME --jq "
                     "'\"\\(.owner.id)/\\(.id)\"')")
    credentials = subjects(load_workflows(REPO_ROOT / ".github" / "workflows"), subject_repo(args.repo, args.ids),
                           sorted(stack_files()))
    if len(credentials) > MAX_CREDENTIALS:
        return error(f"the workflows need {len(credentials)} federated credentials, more than the {MAX_CREDENTIALS} "
                     "an Entra app may have; split the stacks over two apps or use a flexible federated credential")
    print(script(args.repo, credentials, args.state_account, args.key_vault), end="")
    return 0
