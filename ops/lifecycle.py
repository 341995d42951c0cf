"""What the workflows decide about stacks from what Azure says, so the YAML only wires it (docs/lifecycle.md):

- ``remains``: after ``pulumi destroy --exclude-protected``, what of a stack is still in Azure and whether it should
  be. What the stack protects (``storage.accounts[].protect``) stays, in its resource group, protected with it
  (deleting a group deletes everything in it). Anything else is a leftover: the group holding more than the
  protected accounts, the node resource group AKS made, a public IP tagged with the stack (AKS copies the
  cluster's tags onto the load balancer IPs it creates).

- ``push_targets``: which changed stacks a push to main deploys. Only live ones and long-lived ones: a demo the
  expiry workflow destroyed stays destroyed until someone deploys it on purpose (workflow dispatch), and so does a
  demo an end-to-end run has up (``E2E_ENVIRONMENT``): the run destroys it.
- ``retain``: after a destroy that kept protected data, its resource group is marked ``lifetime: retained``, so
  the expiry workflow stops dispatching destroys for it and a push does not bring the stack back.
- ``drain_jobs``: before a destroy, the scenario's Jobs go, so Kueue releases its ClusterQueue (it keeps the queue
  while admitted Jobs remain, and the destroy would wait for them).
- ``preview_backend``: where a pull request previews a stack: the shared backend when it holds the stack, a
  throw-away local one only when it does not (a stack the pull request adds). Whether it holds it comes from
  ``pulumi stack ls --json``, which fails the job on any other error (sign-in, storage, network), so an existing
  stack never previews as all creates, which would hide a replacement from the preview guard.

Each needs ``az`` signed in (``drain_jobs`` the Pulumi CLI and kubectl too); tests stand in for them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from offline.cli import BadInput, error, json_input, unknown_stack
from offline.stack_files import stack_config, stack_needs
from program.config.expiry import (
    EXPIRES_AT,
    LIFETIME,
    RETAINED,
    Lifetime,
    expired_stacks,
    is_expired,
    stack_groups,
)
from program.config.keys import PROJECT
from program.config.schema import StackConfig

STORAGE_ACCOUNT = "Microsoft.Storage/storageAccounts"
ENVIRONMENT_TAG = "environment"
E2E_ENVIRONMENT = "e2e-run"
"""The ``environment`` an end-to-end run deploys its stack as (``python -m ops e2e``: ``aksgpu:environment``, on every
resource's tags): the run destroys that deployment itself, so a push does not deploy it again."""


def az(*args: str) -> str:
    return subprocess.run(["az", *args, "--output", "json"], check=True, capture_output=True, text=True).stdout


def deployed(cfg: StackConfig) -> StackConfig:
    """``cfg`` as deployed into the subscription ``az`` is signed in to: its global names are seeded with it."""
    return cfg.for_deployment(json.loads(az("account", "show", "--query", "id")))


@dataclass
class Remains:
    kept: list[str] = field(default_factory=list)
    """What stays on purpose, each with why."""
    leftovers: list[str] = field(default_factory=list)
    """What should be gone and is not."""
    kept_group: str | None = None
    """The resource group kept for protected data."""


def protected_accounts(cfg: StackConfig) -> dict[str, str]:
    """The storage accounts a destroy keeps (``storage.accounts[].protect``): physical name → role."""
    return {cfg.storage_account_name(a): a.role for a in cfg.storage.accounts if a.protect}


def remains(cfg: StackConfig) -> Remains:
    """What of the deployed stack ``cfg`` is still in Azure."""
    result = Remains()
    protected = protected_accounts(cfg)
    group = cfg.naming.resource_group()
    if json.loads(az("group", "exists", "--name", group)):
        inside = json.loads(az("resource", "list", "--resource-group", group, "--query", "[].{name:name, type:type}"))
        extra = [r for r in inside if not (r["type"].lower() == STORAGE_ACCOUNT.lower() and r["name"] in protected)]
        result.leftovers += [f"{r['type']} {r['name']} in resource group {group}" for r in extra]
        if protected:
            result.kept_group = group
        else:
            result.leftovers.append(f"resource group {group}")
        for r in inside:
            if r not in extra:
                result.kept.append(f"storage account {r['name']} in resource group {group}: storage.accounts role "
                                   f"{protected[r['name']]} has protect: true (remove it and destroy again to delete)")
    if json.loads(az("group", "exists", "--name", cfg.naming.node_resource_group())):
        result.leftovers.append(f"resource group {cfg.naming.node_resource_group()}")
    query = f"[?tags.\"pulumi-stack\"=='{cfg.stack}'].id"
    result.leftovers += [f"public IP {ip}" for ip in json.loads(az("network", "public-ip", "list", "--query", query))]
    return result


@dataclass
class PushTargets:
    deploy: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Stack → why a push leaves it alone."""


def push_targets(changed: Iterable[str], groups: Iterable[Mapping[str, Any]], now: dt.datetime, project: str,
                 lifetime_of: Callable[[str], Lifetime]) -> PushTargets:
    """Of the stacks whose render changed, those a push deploys: every long-lived one, and each demo that is up
    (its resource group exists, is not retained and has not expired)."""
    live = stack_groups(groups, project)
    result = PushTargets()
    for stack in sorted(set(changed)):
        tags = live.get(stack)
        if lifetime_of(stack) == Lifetime.LONG_LIVED:
            result.deploy.append(stack)
        elif tags is None:
            result.skipped[stack] = "a demo that is not deployed (never, or destroyed): run the deploy workflow for it"
        elif tags.get(ENVIRONMENT_TAG) == E2E_ENVIRONMENT:
            result.skipped[stack] = ("an end-to-end run's deployment (e2e.yml), which the run destroys: a deploy "
                                     "queued behind it would bring the stack back")
        elif tags.get(LIFETIME) == RETAINED:
            result.skipped[stack] = ("destroyed; only its protected data is kept: run the deploy workflow to bring "
                                     "it back")
        elif is_expired(tags, now):
            result.skipped[stack] = "expired: the expiry workflow destroys it"
        else:
            result.deploy.append(stack)
    return result


def retained_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """A kept resource group's tags after a destroy: no expiry, ``lifetime: retained``."""
    return {**{k: v for k, v in tags.items() if k != EXPIRES_AT}, LIFETIME: RETAINED}


def retain(group: str, run_az: Callable[..., str] = az) -> dict[str, str]:
    """Mark ``group`` retained in Azure; its new tags. ``run_az``: ``az``'s arguments to its JSON output."""
    tags = retained_tags(json.loads(run_az("group", "show", "--name", group, "--query", "tags")) or {})
    run_az("group", "update", "--name", group, "--tags", *(f"{k}={v}" for k, v in sorted(tags.items())))
    return tags


def drain_jobs(stack: str, namespace: str) -> str:
    """Delete the Jobs, CronJobs and JobSets in the stack's namespace before a destroy; what happened, in one
    line."""
    found = subprocess.run(["pulumi", "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack],
                           capture_output=True, text=True)
    if found.returncode != 0 or not found.stdout.strip():
        return f"no kubeconfig output for stack {stack} (never deployed, or its cluster is gone): nothing to drain"
    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as kubeconfig:
        kubeconfig.write(found.stdout)
    try:
        deleted = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig.name, "--namespace", namespace, "delete", "cronjobs,jobs",
             "--all", "--ignore-not-found", "--wait=true", "--timeout=10m"], capture_output=True, text=True)
        if deleted.returncode == 0:
            # JobSets (runs created on demand) hold Kueue Workloads too; a cluster without the CRD has none.
            sets = subprocess.run(
                ["kubectl", "--kubeconfig", kubeconfig.name, "--namespace", namespace, "delete",
                 "jobsets.jobset.x-k8s.io", "--all", "--ignore-not-found", "--wait=true", "--timeout=10m"],
                capture_output=True, text=True)
            if sets.returncode != 0 and "the server doesn't have a resource type" not in sets.stderr:
                deleted = sets
    finally:
        os.unlink(kubeconfig.name)
    if deleted.returncode != 0:
        return (f"::warning::could not delete the Jobs of namespace {namespace} ({deleted.stderr.strip()}); "
                "the destroy waits for Kueue to release their queue")
    return f"deleted the Jobs and CronJobs of namespace {namespace}: {deleted.stdout.strip() or 'there were none'}"


def lifetime_command(args: argparse.Namespace) -> int:
    if problem := unknown_stack(args.stack):
        return error(problem)
    print(stack_config(args.stack).lifetime.value)
    return 0


def leftovers_command(args: argparse.Namespace) -> int:
    if problem := unknown_stack(args.stack):
        return error(problem)
    found = remains(deployed(stack_config(args.stack)))
    group = found.kept_group if args.retain and not found.leftovers else None
    retained = group is not None
    if group is not None:
        retain(group)
    if args.json:
        print(json.dumps({"stack": args.stack, "kept": found.kept, "leftovers": found.leftovers,
                          "keptGroup": found.kept_group, "retained": retained}))
        return 1 if found.leftovers else 0
    for item in found.kept:
        print(f"kept after destroy of {args.stack}: {item}")
    if retained:
        print(f"marked resource group {found.kept_group} lifetime: retained (no expiry; a push does not redeploy it)")
    for item in found.leftovers:
        print(f"LEFT OVER after destroy of {args.stack}: {item}", file=sys.stderr)
    if not found.leftovers and not found.kept:
        print(f"nothing of stack {args.stack} is left in Azure")
    return 1 if found.leftovers else 0


def push_targets_command(args: argparse.Namespace) -> int:
    names = args.stacks  # a JSON list of the project's stacks (offline.cli.stack_list)
    groups = json_input(sys.stdin.read(), "stdin (az group list --output json)")
    found = push_targets(names, groups, dt.datetime.now(dt.UTC), PROJECT,
                         lambda stack: stack_config(stack).lifetime)
    for stack, why in found.skipped.items():
        print(f"::notice::a push leaves stack {stack} alone: {why}", file=sys.stderr)
    print(json.dumps(found.deploy))
    return 0


def drain_jobs_command(args: argparse.Namespace) -> int:
    if problem := unknown_stack(args.stack):
        return error(problem)
    namespace = stack_needs(args.stack).namespace
    if namespace is None:
        print(f"stack {args.stack} has no workload namespace: nothing to drain")
        return 0
    print(drain_jobs(args.stack, namespace))
    return 0


SHARED, LOCAL = "shared", "local"


def preview_backend(listed: Any, stack: str, project: str = PROJECT) -> str:
    """``SHARED`` when ``listed`` (``pulumi stack ls --json`` in the project: ``[{"name": ...}, ...]``, pulumi/pulumi
    pkg/cmd/pulumi/stack/stack_ls.go) holds ``stack``, else ``LOCAL``. A DIY backend names a stack of the current
    project by its name alone, or ``organization/<project>/<stack>`` when names are fully qualified (pulumi/pulumi
    pkg/backend/diy/backend.go, ``diyBackendReference.String``)."""
    if not isinstance(listed, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str)
                                                for s in listed):
        raise BadInput("stdin is not the output of pulumi stack ls --json (a list of {name, ...})")
    names = {s["name"] for s in listed}
    return SHARED if names & {stack, f"organization/{project}/{stack}"} else LOCAL


def preview_backend_command(args: argparse.Namespace) -> int:
    listed = json_input(sys.stdin.read(), "stdin (pulumi stack ls --json)")
    print(preview_backend(listed, args.stack))
    return 0


def expired_stacks_command(args: argparse.Namespace) -> int:
    groups = json_input(sys.stdin.read(), "stdin (az group list --output json)")
    print(json.dumps(expired_stacks(groups, dt.datetime.now(dt.UTC), args.project)))
    return 0


EXPIRY_WORKFLOW = "destroy-expired.yml"
"""The scheduled workflow that destroys demos past their ``expires-at``."""


def expiry_schedule(workflow: Mapping[str, Any]) -> tuple[bool, str | None]:
    """From GitHub's "Get a workflow" answer for the expiry workflow (``state``: active, disabled_inactivity,
    disabled_manually, disabled_fork, deleted): whether to enable it again, and what to warn.

    In a public repository GitHub disables a scheduled workflow after 60 days without repository activity
    (docs.github.com, "Disabling and enabling a workflow"), and a disabled workflow runs on no event, so demos
    deployed afterwards would never expire. A deploy is activity someone chose: it turns the schedule back on. One
    disabled by hand stays off, with a warning, since someone meant it."""
    state = workflow.get("state")
    if state == "active":
        return False, None
    if state == "disabled_inactivity":
        return True, None
    return False, (f"{EXPIRY_WORKFLOW} is {state}: a demo deployed now is not destroyed after its ttlHours; enable "
                   f"it (gh workflow enable {EXPIRY_WORKFLOW}) or destroy the demo by hand (destroy.yml)")


def expiry_schedule_command(args: argparse.Namespace) -> int:
    """``enable`` or ``keep``, never a failure: its step must not stop a deploy (issue 33c audit #12). An answer
    that is not GitHub's workflow (gh failed: nothing, an HTML 5xx page, an error's JSON) keeps the schedule as it
    is, with a warning."""
    text = sys.stdin.read()
    try:
        found = json_input(text, f"stdin (gh api repos/OWNER/NAME/actions/workflows/{EXPIRY_WORKFLOW})")
    except BadInput as e:
        found = {"message": str(e)}
    if not isinstance(found, Mapping) or "state" not in found:
        said = found.get("message") if isinstance(found, Mapping) else None
        print(f"::warning::GitHub did not say whether {EXPIRY_WORKFLOW} is on ({said or 'no workflow in its answer'})"
              f": if GitHub disabled it, a demo deployed now is not destroyed after its ttlHours; check with gh "
              f"workflow view {EXPIRY_WORKFLOW}", file=sys.stderr)
        print("keep")
        return 0
    enable, warning = expiry_schedule(found)
    if warning:
        print(f"::warning::{warning}", file=sys.stderr)
    if enable:
        print(f"::notice::GitHub disabled {EXPIRY_WORKFLOW} after 60 days without activity; this deploy enables it "
              "again", file=sys.stderr)
    print("enable" if enable else "keep")
    return 0
