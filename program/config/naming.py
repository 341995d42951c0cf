"""Azure naming rules and the names a stack derives from its one naming root.

Rules: Azure "Naming rules and restrictions for Azure resources" (resource-name-rules.md) and AKS
"Create node pools" (agent pool names). Every check returns the message for a bad name, or None.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_AGENT_POOL = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_ACR = re.compile(r"^[a-zA-Z0-9]{5,50}$")
_STORAGE_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
_BLOB_CONTAINER = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")
_ROOT = re.compile(r"^[a-z](?!.*--)[a-z0-9-]{0,18}[a-z0-9]$")
_KEY_VAULT = re.compile(r"^[A-Za-z](?!.*--)[A-Za-z0-9-]{1,22}[A-Za-z0-9]$")


def agent_pool_name_error(name: str) -> str | None:
    if _AGENT_POOL.match(name):
        return None
    return "must be 1-12 lowercase letters and digits starting with a letter (^[a-z][a-z0-9]{0,11}$)"


def acr_name_error(name: str) -> str | None:
    return None if _ACR.match(name) else "must be 5-50 letters and digits"


def storage_account_name_error(name: str) -> str | None:
    return None if _STORAGE_ACCOUNT.match(name) else "must be 3-24 lowercase letters and digits"


def key_vault_name_error(name: str) -> str | None:
    if _KEY_VAULT.match(name):
        return None
    return ("must be a Key Vault name: 3-24 letters, digits and single hyphens, starting with a letter and ending "
            "with a letter or digit")


def blob_container_name_error(name: str) -> str | None:
    if _BLOB_CONTAINER.match(name):
        return None
    return (
        "must be 3-63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit"
    )


VNET_ID = re.compile(r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}"
                     r"/providers/Microsoft\.Network/virtualNetworks/[A-Za-z0-9][-\w.]{0,62}[\w]", re.IGNORECASE)


def vnet_id_error(value: str) -> str | None:
    if not VNET_ID.fullmatch(value):
        return ("must be a virtual network's resource id: /subscriptions/<id>/resourceGroups/<group>/providers/"
                "Microsoft.Network/virtualNetworks/<name>")
    return None


PRIVATE_DNS_ZONE_ID = re.compile(r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}"
                                 r"/providers/Microsoft\.Network/privateDnsZones/[A-Za-z0-9][-\w.]{0,252}[\w]",
                                 re.IGNORECASE)


def private_dns_zone_id_error(value: str) -> str | None:
    if not PRIVATE_DNS_ZONE_ID.fullmatch(value):
        return ("must be a private DNS zone's resource id: /subscriptions/<id>/resourceGroups/<group>/providers/"
                "Microsoft.Network/privateDnsZones/<zone>")
    return None


def subscription_of(resource_id: str) -> str:
    """The subscription id a resource id names (lower case: ARM compares ids without case)."""
    return resource_id.split("/")[2].lower()


CAPACITY_RESERVATION_GROUP_ID = re.compile(
    r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}"
    r"/providers/Microsoft\.Compute/capacityReservationGroups/[A-Za-z0-9][-\w.]{0,79}", re.IGNORECASE)


def capacity_reservation_group_id_error(value: str) -> str | None:
    if not CAPACITY_RESERVATION_GROUP_ID.fullmatch(value):
        return ("must be a capacity reservation group's resource id: /subscriptions/<id>/resourceGroups/<group>/"
                "providers/Microsoft.Compute/capacityReservationGroups/<name>")
    return None


STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""A stack name, as the Pulumi CLI parses it (pulumi/pulumi sdk/go/common/tokens/stack_name.go ``ParseStackName``:
1-100 characters of ``[A-Za-z0-9_.-]``, at v3.259.0): no '/', so ``Pulumi.<stack>.yaml`` stays one file of the
project. A name may start with '-': commands take it as ``--stack=NAME`` (or after ``--``), never as a bare
argument, which a command-line parser reads as a flag."""


DOT_SEGMENTS = (".", "..")
"""Names Pulumi's pattern allows that a path reads as the folder itself or its parent: a stack's render folder
(``out/<stack>``, which a render replaces) and a state backend's URL path segment (RFC 3986 section 5.2.4) would
leave their place."""


def stack_name_error(name: str) -> str | None:
    if name in DOT_SEGMENTS:
        return "'.' and '..' name a folder itself and its parent, where a stack's files would go"
    if STACK_NAME.fullmatch(name):
        return None
    return f"a stack name is 1-100 letters, digits, '_', '.' and '-' (Pulumi's rule, {STACK_NAME.pattern})"


def name_root_error(root: str) -> str | None:
    if _ROOT.match(root):
        return None
    return "must be 2-20 lowercase letters, digits and single hyphens, starting with a letter"


MAX_ROOT = 20
"""The longest naming root: ``rg-<root>-nodes``, ``aks-<root>`` and the derived storage names stay within Azure's
limits (resource-name-rules.md)."""


def root_from_stack(stack: str) -> str:
    """The naming root a stack name gives: lowercased, other characters to hyphens. Never cut: two stack names that
    share their first 20 characters would share every resource name (``name_root_error`` refuses a long one)."""
    root = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", stack.lower())).strip("-")
    if len(root) < 2 or not root[0].isalpha():
        root = f"stack-{root}".rstrip("-")
    return root


def shorter_root(root: str) -> str:
    """A suggestion for a root that is too long: the initials of all but its last part, then the last part
    (``training-autoscale-staging`` → ``ta-staging``), cut to the limit."""
    *head, last = root.split("-")
    short = "-".join(filter(None, ["".join(p[0] for p in head if p), last]))
    return short[:MAX_ROOT].rstrip("-") if len(short) >= 2 else root[:MAX_ROOT].rstrip("-")


@dataclass(frozen=True)
class Naming:
    """Physical Azure names, all derived from one root per stack (Cloud Adoption Framework abbreviations).

    Globally unique names (registry, storage accounts, Grafana) end in a short hash of ``unique_seed``: the
    deployment's subscription, project and stack. Every clone of this repository deploys into its own subscription,
    so two teams with the same stack never share a global name, and a deployment keeps its names for its life (the
    subscription does not change under it). Within one subscription, two deployments of one stack name would share
    their resource group too: they need different naming roots (``nameRoot``).
    """

    root: str
    """The stack's naming root, e.g. ``avresim-dev``."""
    unique_seed: str
    """What the global-name hash is computed from: subscription, project and stack."""

    @property
    def _compact(self) -> str:
        return self.root.replace("-", "")

    def _hash(self, *parts: str, length: int) -> str:
        text = "/".join((self.unique_seed, *parts))
        return hashlib.sha256(text.encode()).hexdigest()[:length]

    def resource_group(self) -> str:
        return f"rg-{self.root}"

    def node_resource_group(self) -> str:
        return f"rg-{self.root}-nodes"

    def vnet(self) -> str:
        return f"vnet-{self.root}"

    def cluster(self) -> str:
        return f"aks-{self.root}"

    def dns_prefix(self) -> str:
        return self.root

    def registry(self) -> str:
        return f"cr{self._compact}{self._hash('acr', length=6)}"

    def monitor_workspace(self) -> str:
        """Azure Monitor workspace (managed Prometheus): ``amw-<root>``."""
        return f"amw-{self.root}"

    def log_workspace(self) -> str:
        """Log Analytics workspace: ``log-<root>``."""
        return f"log-{self.root}"

    def grafana(self) -> str:
        """Azure Managed Grafana: 2-23 letters, digits and hyphens, part of a DNS name: ``gr-<root>-<hash>``."""
        return f"gr-{self.root[:13].rstrip('-')}-{self._hash('grafana', length=4)}"

    def identity(self, workload: str) -> str:
        """A workload's managed identity: ``id-<root>-<workload>`` (Azure: 3-128 letters, digits, - and _)."""
        return f"id-{self.root}-{workload}"

    def storage_account(self, role: str) -> str:
        """``st`` + root + role + 4 hash characters, the root cut so the whole fits Azure's 24."""
        role = re.sub(r"[^a-z0-9]", "", role.lower())[:8]
        suffix = self._hash("st", role, length=4)
        room = 24 - len("st") - len(role) - len(suffix)
        return f"st{self._compact[:room]}{role}{suffix}"
