"""After `pulumi destroy`: what of a stack is still in Azure.

Checks the stack's resource group, the node resource group AKS made, and every public IP tagged with
the stack (AKS copies the cluster's tags onto the load balancer IPs it creates). Needs `az` logged in.
"""

from __future__ import annotations

import json
import subprocess

from offline.stack_files import stack_config


def az(*args: str) -> str:
    return subprocess.run(["az", *args, "--output", "json"], check=True, capture_output=True, text=True).stdout


def leftovers(stack: str) -> list[str]:
    """One line per thing of ``stack`` that Azure still has."""
    cfg = stack_config(stack)
    found = []
    for group in (cfg.naming.resource_group(), cfg.naming.node_resource_group()):
        if json.loads(az("group", "exists", "--name", group)):
            found.append(f"resource group {group}")
    query = f"[?tags.\"pulumi-stack\"=='{stack}'].id"
    found += [f"public IP {ip}" for ip in json.loads(az("network", "public-ip", "list", "--query", query))]
    return found
