"""Find the steps of a `pulumi preview --json` that would replace or delete the AKS cluster or a data storage
account (``python -m ops preview-guard``; the pull-request workflow fails on them unless the pull request
carries the `allow-replace` label)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from components.vocabulary import HOLDS_DATA
from offline.cli import json_input

GUARDED_TYPES = ("azure-native:containerservice:ManagedCluster", "azure-native:storage:StorageAccount")
DESTRUCTIVE_OPS = ("replace", "create-replacement", "delete-replaced", "delete")
AGENT_POOL = "azure-native:containerservice:AgentPool"


def urn_type_and_name(urn: str) -> tuple[str, str]:
    """``urn:pulumi:STACK::PROJECT::PARENT$TYPE::NAME`` -> (TYPE, NAME)."""
    parts = urn.split("::")
    return parts[2].split("$")[-1], parts[3]


def holds_no_data(step: dict[str, Any]) -> bool:
    """The program tagged the resource ``holds-data: false`` (the build-context accounts of earlier versions), in
    its old or its new state."""
    states = [step.get("oldState"), step.get("newState")]
    return any(((s or {}).get("inputs") or {}).get("tags", {}).get(HOLDS_DATA) == "false" for s in states)


def replaced_pools(preview: dict[str, Any]) -> list[str]:
    """Node pools the preview replaces: allowed (AKS fixes VM size, driver, priority, spot price and MIG profile at
    creation, so a change to one is a replacement), but worth saying, since the pool's pods go with it."""
    names = {urn_type_and_name(step["urn"])[1] for step in preview.get("steps") or []
             if step.get("op") in ("replace", "create-replacement") and urn_type_and_name(step["urn"])[0] == AGENT_POOL}
    return sorted(names)


def guarded_steps(preview: dict[str, Any]) -> list[str]:
    """'OP TYPE NAME' for every destructive step on a guarded resource."""
    found = []
    for step in preview.get("steps") or []:
        typ, name = urn_type_and_name(step["urn"])
        if step.get("op") in DESTRUCTIVE_OPS and typ in GUARDED_TYPES and not holds_no_data(step):
            found.append(f"{step['op']} {typ} {name}")
    return sorted(set(found))


def preview_guard_command(args: argparse.Namespace) -> int:
    preview = json_input(args.preview.read_text(), f"{args.preview} (pulumi preview --json)")
    if args.json:
        steps = guarded_steps(preview)
        print(json.dumps({"destructive": steps, "replacedPools": replaced_pools(preview), "allowed": args.allow,
                          "blocked": bool(steps) and not args.allow}))
        return 1 if steps and not args.allow else 0
    for pool in replaced_pools(preview):
        print(f"replaces node pool {pool}: its nodes and their pods are recreated (a setting AKS fixes at creation "
              "changed)")
    steps = guarded_steps(preview)
    for step in steps:
        print(f"destructive: {step}")
    if steps and not args.allow:
        print("this change would replace or delete the cluster or data storage; label the pull request "
              "allow-replace if that is intended", file=sys.stderr)
        return 1
    if not steps:
        print("no replacement or deletion of the cluster or data storage")
    return 0
