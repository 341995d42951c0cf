"""After `pulumi destroy`: list what of a stack is still in Azure, and fail loudly if anything is.

    python scripts/check_leftovers.py --stack function-gpu

Checks the stack's resource group, the node resource group AKS made, and every public IP tagged with
the stack (AKS copies the cluster's tags onto the load balancer IPs it creates). Needs `az` logged in.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stacks.config import PROJECT  # noqa: E402
from stacks.program import load_stack_config  # noqa: E402
from stacks.render import stack_files, stack_namespace  # noqa: E402


def az(*args: str) -> str:
    return subprocess.run(["az", *args, "--output", "json"], check=True, capture_output=True, text=True).stdout


def leftovers(stack: str) -> list[str]:
    cfg = load_stack_config(stack_namespace(stack_files()[stack]), PROJECT, stack)
    found = []
    for group in (cfg.naming.resource_group(), cfg.naming.node_resource_group()):
        if json.loads(az("group", "exists", "--name", group)):
            found.append(f"resource group {group}")
    query = f"[?tags.\"pulumi-stack\"=='{stack}'].id"
    found += [f"public IP {ip}" for ip in json.loads(az("network", "public-ip", "list", "--query", query))]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, choices=sorted(stack_files()))
    args = parser.parse_args()
    found = leftovers(args.stack)
    for item in found:
        print(f"LEFT OVER after destroy of {args.stack}: {item}", file=sys.stderr)
    if not found:
        print(f"nothing of stack {args.stack} is left in Azure")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
