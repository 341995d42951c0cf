"""What of a stack is still in Azure after a run's `pulumi destroy`: a leftover fails the run.

Looked for, each with the ``az`` command that answers without failing on what is not there:

- the stack's resource group and AKS's node resource group (``az group exists``) and everything in them
  (``az resource list --resource-group``), but the storage accounts the stack protects (``storage.accounts[].protect``,
  which `ops leftovers` keeps too: ops/lifecycle.py) and their group;
- every resource and resource group anywhere in the subscription carrying the deployment's tags (the program puts
  ``pulumi-project`` and ``pulumi-stack`` on every Azure resource: ``StackConfig.tags``; AKS copies the cluster's tags
  onto what it makes, such as the load balancer's public IPs): ``az resource list --tag`` and ``az group list --tag``
  take one tag (``key[=value]``, Azure CLI reference) and ask ARM to filter by it, whose answer then holds no tags
  ("When you filter by a tag name and value, the tags for each resource are not returned in the results": Resources -
  List, ``$filter``). So the stack's tag is ARM's filter, trusted, and the project's is read for each match with
  ``az tag list --resource-id`` (Tags - Get At Scope): only a match whose project tag names another project is not
  counted; after a clean destroy there is no match to read;
- the role assignments and federated identity credentials the stack made, by the ids its state held before the
  destroy: role assignments through ``az role assignment list --all`` ("all assignments under the current
  subscription", Azure CLI reference; by ``--scope`` for one in another subscription), federated credentials through
  ``az identity federated-credential list`` of their identity when that identity still exists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from offline.runs import Leftover
from ops.e2e.automation import StateResource
from ops.e2e.tools import ToolFailed
from ops.lifecycle import STORAGE_ACCOUNT, protected_accounts
from program.config.schema import StackConfig

RESOURCE_GROUP = "Microsoft.Resources/resourceGroups"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
FEDERATED_CREDENTIAL = "azure-native:managedidentity:FederatedIdentityCredential"
ROLE_ASSIGNMENT_KIND, FEDERATED_CREDENTIAL_KIND = "roleAssignment", "federatedCredential"
ASSIGNMENTS = "/providers/microsoft.authorization/roleassignments/"

Az = Callable[..., str]
"""``Tools.az``: the arguments of one ``az`` command, its JSON output."""


@dataclass
class Found:
    leftovers: list[Leftover] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """What stays on purpose (protected data), each with why."""
    kept_accounts: set[str] = field(default_factory=set)
    kept_group: str | None = None

    def add(self, id_: str, kind: str) -> None:
        if all(item.id.lower() != id_.lower() for item in self.leftovers):
            self.leftovers.append(Leftover(id=id_, kind=kind))


def _json(az: Az, *args: str) -> Any:
    return json.loads(az(*args) or "null")


def _groups(cfg: StackConfig, az: Az, found: Found) -> None:
    protected = protected_accounts(cfg)
    stack_group = cfg.naming.resource_group()
    for group in (stack_group, cfg.naming.node_resource_group()):
        if not _json(az, "group", "exists", "--name", group):
            continue
        inside = _json(az, "resource", "list", "--resource-group", group, "--query",
                       "[].{id:id, name:name, type:type}") or []
        kept = [r for r in inside if group == stack_group and r["type"].lower() == STORAGE_ACCOUNT.lower()
                and r["name"] in protected]
        for r in inside:
            if r not in kept:
                found.add(r["id"], r["type"])
        found.kept += [f"storage account {r['name']} in resource group {group}: storage.accounts role "
                       f"{protected[r['name']]} has protect: true" for r in kept]
        found.kept_accounts |= {r["name"] for r in kept}
        if kept:
            found.kept_group = group
        else:
            found.add(f"/subscriptions/{cfg.subscription}/resourceGroups/{group}", RESOURCE_GROUP)


def _tagged(cfg: StackConfig, az: Az, found: Found) -> None:
    tag = f"pulumi-stack={cfg.stack}"
    hits = [(r["id"], r["type"]) for r in _json(az, "resource", "list", "--tag", tag, "--query",
                                                 "[].{id:id, name:name, type:type}") or []
            if not (r["type"].lower() == STORAGE_ACCOUNT.lower() and r["name"] in found.kept_accounts)]
    hits += [(g["id"], RESOURCE_GROUP) for g in _json(az, "group", "list", "--tag", tag, "--query",
                                                      "[].{id:id, name:name}") or []
             if g["name"] != found.kept_group]
    for id_, kind in hits:
        try:
            tags = _json(az, "tag", "list", "--resource-id", id_, "--query", "properties.tags") or {}
        except ToolFailed as e:
            if gone(e):  # deleted since the filter matched it (a group of the destroy finishing, say)
                continue
            raise
        # Another project's stack of the same name is not ours; a match that answers without tags still carries the
        # stack's tag (the filter matched it): counted, not dropped.
        if tags.get("pulumi-project", cfg.project) == cfg.project:
            found.add(id_, kind)


NOT_FOUND = re.compile(r"\((ResourceNotFound|ResourceGroupNotFound|ParentResourceNotFound)\)")
"""ARM's codes for what is not there, as az prints them: ``ERROR: (Code) message``, then ``Code:`` and ``Message:``
lines (azure-core ``ODataV4Format``; azure-cli ``handle_exception``, which exits 3 for a ``ResourceNotFoundError``)."""


def gone(failed: ToolFailed) -> bool:
    """The az call failed because what it asked about is not there (any line of its stderr, or its exit status 3)."""
    return failed.status == 3 or NOT_FOUND.search(failed.stderr) is not None


def _role_assignments(cfg: StackConfig, made: list[str], az: Az, found: Found) -> None:
    if not made:
        return
    here = f"/subscriptions/{cfg.subscription}/".lower()
    existing = {i.lower() for i in _json(az, "role", "assignment", "list", "--all", "--query", "[].id") or []} \
        if any(i.lower().startswith(here) for i in made) else set()
    for scope in sorted({i[:i.lower().index(ASSIGNMENTS)] for i in made if not i.lower().startswith(here)
                         and ASSIGNMENTS in i.lower()}):
        existing |= {i.lower() for i in _json(az, "role", "assignment", "list", "--scope", scope, "--query",
                                              "[].id") or []}
    for assignment in made:
        if assignment.lower() in existing:
            found.add(assignment, ROLE_ASSIGNMENT_KIND)


def _federated_credentials(made: list[str], az: Az, found: Found) -> None:
    by_identity: dict[tuple[str, str], list[str]] = {}
    for credential in made:
        parts = credential.split("/")
        lower = [p.lower() for p in parts]
        try:
            group = parts[lower.index("resourcegroups") + 1]
            identity = parts[lower.index("userassignedidentities") + 1]
        except (ValueError, IndexError):
            continue
        by_identity.setdefault((group, identity), []).append(credential)
    for (group, identity), credentials in sorted(by_identity.items()):
        if not _json(az, "group", "exists", "--name", group):
            continue
        if identity not in (_json(az, "identity", "list", "--resource-group", group, "--query", "[].name") or []):
            continue
        existing = {i.lower() for i in _json(az, "identity", "federated-credential", "list", "--identity-name",
                                             identity, "--resource-group", group, "--query", "[].id") or []}
        for credential in credentials:
            if credential.lower() in existing:
                found.add(credential, FEDERATED_CREDENTIAL_KIND)


def leftovers(cfg: StackConfig, made: Iterable[StateResource], az: Az) -> Found:
    """What of the deployed stack ``cfg`` is still in Azure; ``made``: its state's resources before the destroy."""
    made = list(made)
    found = Found()
    _groups(cfg, az, found)
    _tagged(cfg, az, found)
    _role_assignments(cfg, [r.id for r in made if r.type == ROLE_ASSIGNMENT and r.id], az, found)
    _federated_credentials([r.id for r in made if r.type == FEDERATED_CREDENTIAL and r.id], az, found)
    return found
