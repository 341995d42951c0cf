"""What Azure needs before the workflows can run, derived from the workflows (``python -m ops ci-setup``).

GitHub gives a job an OIDC token whose subject depends on how the job runs: ``environment:<name>`` for a job in a
GitHub environment, ``pull_request`` for a pull request, ``ref:refs/heads/<branch>`` otherwise (GitHub docs,
"OpenID Connect reference"), each after the repository's subject prefix. Entra ID accepts a token only through a
federated credential with exactly that subject, so an app needs one per subject the workflows produce. A reusable
workflow's jobs run in its caller's context.

The prefix is GitHub's to decide, not ours to build: ``repo:OWNER/NAME`` for older repositories, and for
repositories created, renamed or transferred on or after 2026-07-15 (or opted in) the immutable form
``repo:OWNER@OWNER_ID/NAME@REPO_ID`` (learn.microsoft.com/entra/workload-id/workload-identities-github-immutable-
subjects: "appends the immutable owner ID and repository ID, separated by an @ symbol"; github/docs#45221). So it
is read from GitHub's OIDC customization endpoint (``GET repos/OWNER/NAME/actions/oidc/customization/sub``, whose
``sub_claim_prefix`` is the prefix GitHub signs) or taken verbatim from ``--sub-prefix``.

Two apps, by what their jobs run: pull-request previews run the pull request's own code, so their app (``preview``)
may read and cannot write Azure resources or grant roles; deploys, destroys, end-to-end runs and the scheduled
expiry run only main's code, as ``deploy``, whose Role Based Access Control Administrator is constrained to the roles
the program assigns (components/azure/roles.py). Deploy jobs run in one GitHub environment per scenario, not per stack:
the credentials grow with the scenarios (code), not with the stack files (Entra ID allows 20 per app).

The subscription must also have the resource providers registered (a fresh one does not: MissingSubscription
Registration, pulumi/pulumi-azure-native#3479) and, for InfiniBand pools, the ``AKSInfinibandSupport`` feature.

An environment's token subject names no branch, so only the environment itself can keep a branch's code from
signing in as ``deploy``; GitHub creates an environment a workflow names, without protection, on its first run
("Managing environments for deployment"). The script creates each scenario's environment and lets only main deploy
from it (a custom deployment branch policy naming main).

The printed script is safe to run again, and converges a repository set up by an earlier version: every step looks
before it creates; the apps' federated credentials that the workflows no longer produce (an earlier ``pull-request``
credential on ``deploy``, one environment per stack) are deleted; an RBAC Administrator assignment whose condition
is not the current one is replaced. Role assignments name the principal by object id with its type, so a service
principal created seconds earlier is not refused while Entra ID replicates it
(learn.microsoft.com/azure/role-based-access-control/troubleshooting: "Assigning a role to a new principal sometimes
fails").
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.azure import roles
from offline.cli import error
from offline.stack_files import REPO_ROOT, stack_config, stack_files

ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "api://AzureADTokenExchange"
MAX_CREDENTIALS = 20
"""Federated identity credentials per app (Entra ID limit)."""
ENVIRONMENT_EXPRESSIONS = ("${{ matrix.environment }}", "${{ inputs.environment }}")
"""How the workflows name a deploy job's GitHub environment: its stack's scenario (``python -m ops matrix``)."""
PREVIEW_TRIGGERS = frozenset({"pull_request"})
"""Triggers whose jobs run a pull request's code: their tokens go to the preview app."""
SUB_PREFIX = re.compile(r"repo:[\w.-]+(@\d+)?/[\w.-]+(@\d+)?")
"""A default-template subject prefix, name-only or with immutable ids."""
IMMUTABLE_SINCE = "2026-07-15"
"""Repositories created, renamed or transferred on or after this day get the immutable prefix by default
(github/docs#45221; GitHub's first changelog of 2026-04-23 gave 2026-06-18 and a hyphen form, both withdrawn)."""

DEPLOY_ROLES = ("Contributor", "Role Based Access Control Administrator")
"""Create every resource; assign the roles the program grants (constrained by ``assignable_condition``)."""
PROGRAM_ROLES = tuple(sorted(v for k, v in vars(roles).items()
                             if k.isupper() and isinstance(v, str) and re.fullmatch(r"[0-9a-f-]{36}", v)))
"""Every built-in role id the program assigns (components/azure/roles.py; a test holds the renders to them)."""
PREVIEW_ROLES = {
    # Also the capacity preflight's reads; its Spot Placement Scores need more, and a preview's preflight says so
    # in a note instead (ops/capacity.py), as the deploy's, run as Contributor, gets them.
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    # listClusterUserCredential: the kubeconfig the Kubernetes provider uses.
    "Azure Kubernetes Service Cluster User Role": "4abbcc35-e782-43d8-92c5-2d3f1bd2253f",
    # Inside the clusters, read only, Secrets excluded. A preview writes nothing there: pulumi-kubernetes previews a
    # create or update by server-side dry run and, where that is Forbidden, by its own client-side diff
    # (provider/pkg/provider/provider.go: "defaulting to client-side"), and the program's preflight asks a preview
    # for read access only (components/kubernetes/preflight.py).
    "Azure Kubernetes Service RBAC Reader": "7f6c6a51-bcf8-42ba-9220-52d62157d7db",
}
"""Read Azure and the stacks' clusters; no Azure write, no Kubernetes write, no role assignment. Name → built-in
role id (learn.microsoft.com/azure/role-based-access-control/built-in-roles: general, containers). Assigned on the
subscription: a stack's resource group exists only while the stack is up (a destroy deletes it unless it keeps
protected data, the next deploy makes it again), and the script runs before the first deploy: no narrower scope
outlives the stacks."""
STATE_ROLES = {"deploy": "Storage Blob Data Contributor", "preview": "Storage Blob Data Reader"}
"""A preview reads state (pulumi/pulumi pkg/backend/diy/backend.go: Preview takes no lock and writes nothing)."""
RESOURCE_PROVIDERS = (
    "Microsoft.AlertsManagement", "Microsoft.Compute", "Microsoft.ContainerRegistry", "Microsoft.ContainerService",
    "Microsoft.Dashboard", "Microsoft.Insights", "Microsoft.KeyVault", "Microsoft.ManagedIdentity",
    "Microsoft.Monitor", "Microsoft.Network", "Microsoft.OperationalInsights", "Microsoft.Storage",
)
"""Every namespace the stacks create resources in (tests hold this to the renders), AKS's nodes (Compute) and the
state backend's Key Vault."""
INFINIBAND_FEATURE = ("Microsoft.ContainerService", "AKSInfinibandSupport")
"""Puts an RDMA pool's nodes on one InfiniBand fabric (learn.microsoft.com/azure/aks/use-amd-gpus: "Register the
AKSInfinibandSupport feature"; Azure/aks-rdma-infiniband tests/setup-infra/deploy-aks.sh registers it before the
pool)."""


@dataclass(frozen=True)
class Identity:
    """One Entra app the workflows sign in as."""

    role: str
    """``deploy`` or ``preview``."""
    variable: str
    """The repository variable holding its client id."""
    credentials: Mapping[str, str]
    """Federated credential name → subject."""


def _on(workflow: Mapping[Any, Any]) -> Mapping[str, Any]:
    """The workflow's triggers, each with its settings."""
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


def subjects(workflows: Mapping[str, Mapping[str, Any]], prefix: str, environments: Iterable[str],
             branch: str = "main") -> dict[str, dict[str, str]]:
    """App (``deploy``, ``preview``) → credential name → the subject of every token the workflows ask for.
    ``prefix`` is GitHub's subject prefix (``repo:...``); ``environments`` what an environment expression names."""
    found: dict[str, dict[str, str]] = {"deploy": {}, "preview": {}}
    for workflow in workflows.values():
        triggers = set(_on(workflow)) - {"workflow_call"}
        for job in _token_jobs(workflow, workflows):
            environment = job.get("environment")
            if environment in ENVIRONMENT_EXPRESSIONS:
                found["deploy"] |= {f"environment-{e}": f"{prefix}:environment:{e}" for e in environments}
            elif environment:
                found["deploy"][f"environment-{environment}"] = f"{prefix}:environment:{environment}"
            else:
                if triggers & PREVIEW_TRIGGERS:
                    found["preview"]["pull-request"] = f"{prefix}:pull_request"
                if triggers - PREVIEW_TRIGGERS:
                    found["deploy"][branch] = f"{prefix}:ref:refs/heads/{branch}"
    return {app: dict(sorted(c.items())) for app, c in found.items() if c}


def deploy_environments(files: Mapping[str, Path]) -> list[str]:
    """The GitHub environments the deploy jobs run in: one per scenario of the stack files (``ops matrix``)."""
    return sorted({stack_config(stack, path).scenario for stack, path in files.items()})


def load_workflows(folder: Path) -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yml"))}


class PrefixError(Exception):
    """GitHub did not say, or said something ci-setup cannot use."""


GhApi = Callable[[str], str]


def _gh_api(path: str) -> str:
    result = subprocess.run(["gh", "api", path], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise PrefixError((result.stderr.strip().splitlines() or ["gh failed"])[0])
    return result.stdout


def github_prefix(repo: str, gh_api: GhApi = _gh_api) -> str:
    """The subject prefix GitHub signs for ``repo``: its OIDC customization's ``sub_claim_prefix``."""
    where = f"repos/{repo}/actions/oidc/customization/sub"
    try:
        answer = json.loads(gh_api(where))
    except (FileNotFoundError, PrefixError, ValueError) as e:
        raise PrefixError(f"could not read {where} ({e})") from None
    if answer.get("use_default") is False:
        keys = ", ".join(answer.get("include_claim_keys", []))
        raise PrefixError(f"{repo} customizes its OIDC subject template ({keys}): the workflows' subjects follow "
                          "the default template")
    prefix = answer.get("sub_claim_prefix")
    if not isinstance(prefix, str) or not SUB_PREFIX.fullmatch(prefix):
        raise PrefixError(f"{where} gave no sub_claim_prefix of the default template ({prefix!r})")
    return prefix


ASSIGNEE_TYPES = ("ServicePrincipal",)
"""Principal types the program assigns roles to when the workflows deploy: managed identities, and the deploy app
itself (they set ``cluster.deployerPrincipalType: ServicePrincipal``). ``cluster.adminGroupObjectIds`` go to the
cluster's Entra ID profile, not to role assignments, so no group is ever assigned one."""


def assignable_condition(role_ids: Iterable[str] = PROGRAM_ROLES, principal_types: Iterable[str] = ASSIGNEE_TYPES,
                         user_roles: Iterable[str] = roles.DEPLOYER_ROLES) -> str:
    """An RBAC Administrator condition: it may create assignments of ``role_ids`` to principals of
    ``principal_types`` only, and delete assignments of ``role_ids`` to those principals, or of ``user_roles`` to any
    principal (learn.microsoft.com/azure/role-based-access-control/delegate-role-assignments-examples: "Constrain
    roles and principal types", the write and the delete half alike; conditions-authorization-actions-attributes:
    RoleDefinitionId and PrincipalType, request attributes of write, resource attributes of delete;
    conditions-format: parentheses group three expressions or more).

    A user's or group's assignment may be deleted for ``user_roles`` only: the roles a stack assigned a person who
    deployed it locally (``cluster.deployerPrincipalType: User``: AKS RBAC Cluster Admin, the Grafana admin, the blob
    data roles), which must go when the deploy app replaces or destroys them, or that ``pulumi up`` fails with 403
    (final audit). Anyone's Contributor or Network Contributor is out of its reach (issue 33c audit #11)."""
    def one_of(values: Iterable[str]) -> str:
        return "{" + ", ".join(values) + "}"
    ids, types = one_of(sorted(role_ids)), one_of(f"'{t}'" for t in principal_types)
    role = "[Microsoft.Authorization/roleAssignments:RoleDefinitionId] ForAnyOfAnyValues:GuidEquals "
    kind = "[Microsoft.Authorization/roleAssignments:PrincipalType] ForAnyOfAnyValues:StringEqualsIgnoreCase "
    users = sorted(set(user_roles) & set(role_ids))
    anyone = f" OR @Resource{role}{one_of(users)}" if users else ""
    return (f"((!(ActionMatches{{'Microsoft.Authorization/roleAssignments/write'}})) OR (@Request{role}{ids} AND "
            f"@Request{kind}{types})) AND ((!(ActionMatches{{'Microsoft.Authorization/roleAssignments/delete'}})) OR "
            f"(@Resource{role}{ids} AND (@Resource{kind}{types}{anyone})))")


BRANCH_POLICY = {"protected_branches": False, "custom_branch_policies": True}
"""An environment's deployment branch policy: only the branches its custom policies name (REST "Create or update an
environment": ``deployment_branch_policy``; only ``custom_branch_policies: true`` lets the deployment branch
policies endpoints name branches, docs.github.com/rest/deployments/branch-policies)."""
KEEP_PROTECTION = (
    "{deployment_branch_policy: " + json.dumps(BRANCH_POLICY) + "}"
    ' + ([.protection_rules[]? | select(.type == "wait_timer") | {wait_timer}] | add // {})'
    ' + ([.protection_rules[]? | select(.type == "required_reviewers")'
    ' | {prevent_self_review, reviewers: [.reviewers[] | {type, id: .reviewer.id}]}] | add // {})')
"""A jq filter (gh api --jq) from an environment as "Get an environment" answers (``protection_rules`` of type
``wait_timer``, ``required_reviewers`` with ``reviewers[].{type, reviewer.id}``) to the body "Create or update an
environment" takes (``wait_timer``, ``prevent_self_review``, ``reviewers[].{type, id}``), with the branch policy."""
FEATURE_WAIT_MINUTES = 20
"""How long the script waits for a feature registration before it stops, saying the state."""


def app_name(repo: str, role: str) -> str:
    """An app's display name: the deploy app keeps the name of the single app of earlier setups."""
    return f"aksgpu-ci-{repo.replace('/', '-')}" + ("-preview" if role == "preview" else "")


def environments_of(identities: Iterable[Identity]) -> list[str]:
    """The GitHub environments the apps' credentials trust."""
    return sorted({subject.split(":environment:", 1)[1] for identity in identities
                   for subject in identity.credentials.values() if ":environment:" in subject})


def _app_lines(repo: str, identity: Identity) -> list[str]:
    q = shlex.quote
    name = app_name(repo, identity.role)
    var = identity.role
    lines = [
        f"# {identity.role}: {len(identity.credentials)} of {MAX_CREDENTIALS} federated credentials.",
        f'{var}=$(az ad app list --display-name {q(name)} --query "[0].appId" --output tsv)',
        f'if [ -z "${var}" ]; then {var}=$(az ad app create --display-name {q(name)} --query appId --output tsv); fi',
        f'{var}_sp=$(az ad sp list --filter "appId eq \'${var}\'" --query "[0].id" --output tsv)',
        f'if [ -z "${var}_sp" ]; then {var}_sp=$(az ad sp create --id "${var}" --query id --output tsv); fi',
    ]
    # The stale ones go first: an earlier setup's credentials and the new ones together could pass Entra ID's limit
    # of 20 per app, and the create would stop the script before anything was deleted.
    lines.append(f'keep_only "${var}" ' + " ".join(q(c) for c in identity.credentials))
    for cred, subject in identity.credentials.items():
        body = q(json.dumps({"name": cred, "issuer": ISSUER, "subject": subject, "audiences": [AUDIENCE]}))
        lines.append(f'credential "${var}" {q(cred)} {body}')
    return lines


def _grant(var: str, role: str, scope: str, condition: str | None = None) -> str:
    q = shlex.quote
    return f'grant "${var}_sp" {q(role)} "{scope}"' + (f" {q(condition)}" if condition else "")


FUNCTIONS = r"""# A federated credential: created, or its subject updated where it changed (a repository renamed, moved
# to GitHub's immutable subjects).
credential() {
  if [ -n "$(az ad app federated-credential list --id "$1" --query "[?name=='$2'].name" --output tsv)" ]; then
    az ad app federated-credential update --id "$1" --federated-credential-id "$2" --parameters "$3" --output none
  else
    az ad app federated-credential create --id "$1" --parameters "$3" --output none
  fi
}
# The app's federated credentials but those named after it go: each is a way to sign in as the app that the
# workflows no longer use (an earlier setup's pull-request credential on the deploy app, one environment per stack).
keep_only() {
  local app=$1 names name
  shift
  names=$(az ad app federated-credential list --id "$app" --query "[].name" --output tsv)
  for name in $names; do
    case " $* " in
      *" $name "*) ;;
      *) az ad app federated-credential delete --id "$app" --federated-credential-id "$name" --output none ;;
    esac
  done
}
# A role assignment, unless the principal already has it there; by object id with the principal type, so a
# service principal created seconds ago is not refused while Entra ID replicates it. The list filters on the
# principal id and asks nothing of Microsoft Graph, so a fresh principal lists as none, and a failed list (throttled,
# signed out) is retried, then stops the script: taken for empty it would create a duplicate (RoleAssignmentExists)
# or replace a right assignment. Only an error of Azure's is retried (the Azure CLI's exit code 1); one of the
# command line (2: an older Azure CLI without --fill-principal-name) stops the script at once, with its message.
# With a condition, an assignment whose condition differs (none, or one from before the program's roles changed) is
# replaced; conditions are compared without whitespace and case (GUIDs, operators).
grant() {
  local assignments line kept="" try code errors
  errors=$(mktemp)
  for try in 1 2 3 4 5; do
    if assignments=$(az role assignment list --role "$2" --scope "$3" --fill-principal-name false \
        --query "[?principalId=='$1'].join('|', [id, condition || ''])" --output tsv 2> "$errors"); then
      break
    else
      code=$?
    fi
    if [ "$code" != 1 ] || [ "$try" = 5 ]; then
      echo "could not list the $2 assignments on $3 (tries: $try; az exit code $code: $(head -n 1 "$errors"))," \
        "so nothing was changed for it: fix that, then run the script again" >&2
      exit 1
    fi
    sleep $((try * 10))
  done
  rm -f "$errors"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    if [ -z "${4:-}" ] || [ "$(canonical <<< "${line#*|}")" = "$(canonical <<< "$4")" ]; then
      kept=yes
    else
      az role assignment delete --ids "${line%%|*}" --output none
    fi
  done <<< "$assignments"
  if [ -n "$kept" ]; then
    return
  fi
  if [ -n "${4:-}" ]; then
    az role assignment create --assignee-object-id "$1" --assignee-principal-type ServicePrincipal --role "$2" \
      --scope "$3" --condition "$4" --condition-version 2.0 --output none
  else
    az role assignment create --assignee-object-id "$1" --assignee-principal-type ServicePrincipal --role "$2" \
      --scope "$3" --output none
  fi
}
canonical() {
  tr -d '[:space:]' | tr '[:upper:]' '[:lower:]'
}
# A GitHub environment that only main may deploy from: created, or its branch policy set, where it is not; other
# branches' and tags' policies go. The token subject of a job in an environment names no branch, so this is what
# keeps a branch's code from signing in as the deploy app. The PUT resends the environment's reviewers, wait timer
# and self-review setting (REST "Create or update an environment" documents no keeping of what a PUT omits). A
# refused PUT stops the script with GitHub's answer, and where that is a 404 or 422, with what a repository whose plan
# has no environments (a private one on GitHub Free) lacks.
environment() {
  local path="repos/$repo/environments/$1" custom body policies id kind name refused plan
  if ! custom=$(gh api "$path" --jq .deployment_branch_policy.custom_branch_policies 2>&1); then
    case "$custom" in
      *"HTTP 404"*) custom=absent ;;
      *) echo "environment $1: $custom" >&2; exit 1 ;;
    esac
  fi
  if [ "$custom" != true ]; then
    body='{BODY}'
    if [ "$custom" != absent ]; then
      body=$(gh api "$path" --jq '{KEEP}')
    fi
    if ! refused=$(gh api --method PUT "$path" --input - <<< "$body" 2>&1 > /dev/null); then
      case "$refused" in
        *"HTTP 404"*|*"HTTP 422"*)
          plan=" Environments with branch policies need a public repository or GitHub Pro, Team or Enterprise for"
          plan+=" a private one (docs.github.com: Managing environments for deployment)." ;;
        *) plan="" ;;
      esac
      echo "environment $1: GitHub refused its deployment branch policy ($refused).$plan Without it," \
        "any branch could run a deploy job and sign in as the deploy app, so the setup stops before any credential" \
        "trusts the environment" >&2
      exit 1
    fi
  fi
  policies=$(gh api "$path/deployment-branch-policies" --jq '.branch_policies[] | "\(.id) \(.type) \(.name)"')
  while read -r id kind name; do
    if [ -n "$id" ] && [ "$kind $name" != "branch main" ]; then
      gh api --method DELETE "$path/deployment-branch-policies/$id"
    fi
  done <<< "$policies"
  if ! grep -q ' branch main$' <<< "$policies"; then
    gh api --method POST "$path/deployment-branch-policies" -f name=main -f type=branch > /dev/null
  fi
}""".replace("{BODY}", json.dumps({"deployment_branch_policy": BRANCH_POLICY})).replace("{KEEP}", KEEP_PROTECTION)
"""The script's shell functions, each looking before it changes anything."""


def reservation_scopes(files: Mapping[str, Path]) -> list[str]:
    """The resource groups of the capacity reservation groups the stack files' pools take VMs from."""
    found: dict[str, str] = {}
    for stack, path in sorted(files.items()):
        for pool in stack_config(stack, path).gpu_pools:
            if pool.capacity_reservation_group:
                scope = roles.resource_group_of(pool.capacity_reservation_group)
                found.setdefault(scope.lower(), scope)
    return [found[k] for k in sorted(found)]


def _reservation_lines(scope: str, identities: Iterable[Identity]) -> list[str]:
    """Grants on a reservation group's resource group in another subscription than the deployment's (a shared group,
    capacity-reservation-group-share): the program assigns the cluster identity Contributor there
    (components/azure/cluster.py), which needs the deploy app's RBAC Administrator there too, constrained to
    Contributor for service principals; and the capacity preflight reads the group and that grant (Reader)."""
    other = scope.split("/")[2].lower()
    apps = {i.role for i in identities}
    lines = [f"# Capacity reservation group(s) in {scope}: where that is another subscription than this one (a",
             "# shared group), the deploy assigns the cluster identity Contributor there and the preflight reads them.",
             f'if [ "${{subscription,,}}" != {shlex.quote(other)} ]; then']
    if "deploy" in apps:
        condition = assignable_condition((roles.CONTRIBUTOR,), user_roles=())
        lines.append("  " + _grant("deploy", DEPLOY_ROLES[1], scope, condition))
    lines += ["  " + _grant(app, "Reader", scope) for app in sorted(apps)]
    return [*lines, "fi"]


def script(repo: str, prefix: str, identities: Iterable[Identity], state_account: str | None = None,
           key_vault: str | None = None, infiniband: bool = False, reservations: Iterable[str] = ()) -> str:
    """The Azure CLI (and gh) commands that set up the workflows' apps and environments, as a bash script to review
    and run; ``reservations``: the resource groups of the stacks' capacity reservation groups."""
    q = shlex.quote
    identities = list(identities)
    lines = [
        "#!/usr/bin/env bash",
        f"# Azure setup for the workflows of {repo} (generated by: python -m ops ci-setup --repo {repo}).",
        f"# Token subjects start {prefix} (GitHub's prefix for this repository).",
        "# Run it signed in (az login) to the subscription the stacks deploy into, as someone who may create Entra",
        "# apps and assign roles on it, and to gh as an administrator of the repository. Review before running; it is",
        "# safe to run again (each step looks first) and brings an earlier setup to this one.",
        "set -euo pipefail",
        f"repo={q(repo)}",
        'subscription=$(az account show --query id --output tsv)',
        "",
        FUNCTIONS,
        "",
        "# Resource providers a fresh subscription has not registered (MissingSubscriptionRegistration otherwise).",
        *(f"az provider register --namespace {p} --output none" for p in RESOURCE_PROVIDERS),
    ]
    if infiniband:
        namespace, feature = INFINIBAND_FEATURE
        lines += [
            "# InfiniBand pools: the nodes of one pool on one InfiniBand fabric (AKS use-amd-gpus). Registration takes",
            "# minutes; the provider is registered again once it is done so the subscription picks it up.",
            f"az feature register --namespace {namespace} --name {feature} --output none",
            f"deadline=$((SECONDS + {FEATURE_WAIT_MINUTES * 60}))",
            f'until state=$(az feature show --namespace {namespace} --name {feature} --query properties.state '
            '--output tsv) && [ "$state" = Registered ]; do',
            '  if [ "$SECONDS" -ge "$deadline" ]; then',
            f'    echo "{feature} is still $state after {FEATURE_WAIT_MINUTES} minutes (a registration that needs '
            f'approval waits for it): run this script again once az feature show --namespace {namespace} --name '
            f'{feature} says Registered" >&2',
            "    exit 1",
            "  fi",
            f'  echo "{feature}: $state, waiting"',
            "  sleep 30",
            "done",
            f"az provider register --namespace {namespace} --output none",
        ]
    if environments := environments_of(identities):
        # Before any credential trusts them: an environment GitHub made on a workflow's first run lets any branch in.
        lines += ["", "# The GitHub environments the deploy app's credentials trust, each deployable from main only.",
                  *(f"environment {q(e)}" for e in environments)]
    lines.append("")
    subscription_scope = "/subscriptions/$subscription"
    for identity in identities:
        var = identity.role
        lines += ["", *_app_lines(repo, identity)]
        if identity.role == "deploy":
            lines.append("# Create every resource; assign only the roles the program assigns (components/azure/"
                         "roles.py), to service principals only.")
            lines += [_grant(var, DEPLOY_ROLES[0], subscription_scope),
                      _grant(var, DEPLOY_ROLES[1], subscription_scope, assignable_condition())]
        else:
            lines.append("# Read Azure and the clusters (Kubernetes objects but Secrets); no Azure or Kubernetes "
                         "write, no role assignment.")
            lines += [_grant(var, role, subscription_scope) for role in PREVIEW_ROLES]
    for scope in reservations:
        lines += ["", *_reservation_lines(scope, identities)]
    if state_account or key_vault:
        lines.append("")
    if state_account:
        lines.append(f"account_id=$(az storage account show --name {q(state_account)} --query id --output tsv)")
        lines += [_grant(i.role, STATE_ROLES[i.role], "$account_id") for i in identities]
    if key_vault:
        lines.append(f"vault_id=$(az keyvault show --name {q(key_vault)} --query id --output tsv)")
        # Wrap and unwrap each stack's data key: both apps read secrets, the deploy app writes them.
        lines += [_grant(i.role, "Key Vault Crypto User", "$vault_id") for i in identities]
    variables = {i.variable: f'"${i.role}"' for i in identities}
    variables |= {"AZURE_DEPLOY_PRINCIPAL_ID": '"$deploy_sp"'} if any(i.role == "deploy" for i in identities) else {}
    variables |= {"AZURE_TENANT_ID": '"$(az account show --query tenantId --output tsv)"',
                  "AZURE_SUBSCRIPTION_ID": '"$subscription"'}
    if state_account:
        variables["PULUMI_BACKEND_URL"] = q(f"azblob://state?storage_account={state_account}")
    if key_vault:
        variables["PULUMI_SECRETS_PROVIDER"] = q(f"azurekeyvault://{key_vault}.vault.azure.net/keys/pulumi")
    lines += ["", "# What the workflows read (repository variables; none of them is a secret).",
              *(f'gh variable set {name} --repo "$repo" --body {value}' for name, value in variables.items())]
    return "\n".join(lines) + "\n"


VARIABLES = {"deploy": "AZURE_CLIENT_ID", "preview": "AZURE_PREVIEW_CLIENT_ID"}
"""The repository variable each app's client id goes to (the workflows' ``vars.``)."""


def identities(workflows: Mapping[str, Mapping[str, Any]], prefix: str, environments: Iterable[str]
               ) -> list[Identity]:
    return [Identity(app, VARIABLES[app], creds) for app, creds in subjects(workflows, prefix, environments).items()]


def needs_infiniband(files: Mapping[str, Path]) -> bool:
    """Whether a stack runs InfiniBand pools (the network operator's RDMA)."""
    return any(stack_config(stack, path).addons.network_operator for stack, path in files.items())


def ci_setup_command(args: argparse.Namespace, gh_api: GhApi = _gh_api) -> int:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        return error(f"--repo {args.repo!r}: expected OWNER/NAME")
    owner, name = args.repo.split("/")
    if args.sub_prefix is not None:
        if not SUB_PREFIX.fullmatch(args.sub_prefix):
            return error(f"--sub-prefix {args.sub_prefix!r}: expected GitHub's prefix, repo:{owner}@OWNER_ID/"
                         f"{name}@REPO_ID or repo:{args.repo} (gh api repos/{args.repo}/actions/oidc/customization/"
                         "sub --jq .sub_claim_prefix)")
        prefix = args.sub_prefix
    else:
        try:
            prefix = github_prefix(args.repo, gh_api)
        except PrefixError as e:
            return error(f"{e}; pass --sub-prefix verbatim: repo:{owner}@OWNER_ID/{name}@REPO_ID for a repository "
                         f"created or renamed on or after {IMMUTABLE_SINCE} (GitHub's default), repo:{args.repo} for "
                         "an older one (docs/lifecycle.md: Setting up a repository)")
    files = stack_files()
    apps = identities(load_workflows(REPO_ROOT / ".github" / "workflows"), prefix, deploy_environments(files))
    if over := [a for a in apps if len(a.credentials) > MAX_CREDENTIALS]:
        return error(f"the {over[0].role} app needs {len(over[0].credentials)} federated credentials, more than the "
                     f"{MAX_CREDENTIALS} an Entra app may have")
    print(script(args.repo, prefix, apps, args.state_account, args.key_vault, needs_infiniband(files),
                 reservation_scopes(files)), end="")
    return 0
