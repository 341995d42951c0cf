"""After `pulumi destroy --exclude-protected`: what of a stack is still in Azure, and whether it should be.

What the stack protects on purpose (``storage.accounts[].protect``) stays, in the stack's resource group, which
is protected with it (deleting a resource group deletes everything in it). Anything else still there is a
leftover: the resource group holding more than the protected accounts, the node resource group AKS made, or a
public IP tagged with the stack (AKS copies the cluster's tags onto the load balancer IPs it creates). Needs `az`
logged in.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field

from offline.stack_files import stack_config

STORAGE_ACCOUNT = "Microsoft.Storage/storageAccounts"


def az(*args: str) -> str:
    return subprocess.run(["az", *args, "--output", "json"], check=True, capture_output=True, text=True).stdout


@dataclass
class Remains:
    kept: list[str] = field(default_factory=list)
    """What stays on purpose, each with why."""
    leftovers: list[str] = field(default_factory=list)
    """What should be gone and is not."""


def remains(stack: str) -> Remains:
    cfg = stack_config(stack)
    result = Remains()
    protected = {cfg.storage_account_name(a): a.role for a in cfg.storage.accounts if a.protect}
    group = cfg.naming.resource_group()
    if json.loads(az("group", "exists", "--name", group)):
        inside = json.loads(az("resource", "list", "--resource-group", group, "--query", "[].{name:name, type:type}"))
        extra = [r for r in inside if not (r["type"].lower() == STORAGE_ACCOUNT.lower() and r["name"] in protected)]
        if extra:
            result.leftovers += [f"{r['type']} {r['name']} in resource group {group}" for r in extra]
        if not protected:
            result.leftovers.append(f"resource group {group}")
        for r in inside:
            if r not in extra:
                result.kept.append(f"storage account {r['name']} in resource group {group}: storage.accounts role "
                                   f"{protected[r['name']]} has protect: true (remove it and destroy again to delete)")
    if json.loads(az("group", "exists", "--name", cfg.naming.node_resource_group())):
        result.leftovers.append(f"resource group {cfg.naming.node_resource_group()}")
    query = f"[?tags.\"pulumi-stack\"=='{stack}'].id"
    result.leftovers += [f"public IP {ip}" for ip in json.loads(az("network", "public-ip", "list", "--query", query))]
    return result
