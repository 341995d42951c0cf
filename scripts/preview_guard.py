"""Fail a pull request whose `pulumi preview` would replace or delete the AKS cluster or a data storage account.

    pulumi preview --json > preview.json
    python scripts/preview_guard.py preview.json [--allow]

--allow (the workflow passes it when the pull request carries the `allow-replace` label) reports the
same steps but exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GUARDED_TYPES = ("azure-native:containerservice:ManagedCluster", "azure-native:storage:StorageAccount")
DESTRUCTIVE_OPS = ("replace", "create-replacement", "delete-replaced", "delete")
EXEMPT_NAMES = ("build-contexts-account",)
"""Resources that hold nothing worth keeping: the account of uploaded image build contexts."""


def urn_type_and_name(urn: str) -> tuple[str, str]:
    """``urn:pulumi:STACK::PROJECT::PARENT$TYPE::NAME`` -> (TYPE, NAME)."""
    parts = urn.split("::")
    return parts[2].split("$")[-1], parts[3]


def guarded_steps(preview: dict) -> list[str]:
    """'OP TYPE NAME' for every destructive step on a guarded resource."""
    found = []
    for step in preview.get("steps") or []:
        typ, name = urn_type_and_name(step["urn"])
        if step.get("op") in DESTRUCTIVE_OPS and typ in GUARDED_TYPES and name not in EXEMPT_NAMES:
            found.append(f"{step['op']} {typ} {name}")
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preview", type=Path)
    parser.add_argument("--allow", action="store_true")
    args = parser.parse_args(argv)
    steps = guarded_steps(json.loads(args.preview.read_text()))
    for step in steps:
        print(f"destructive: {step}")
    if steps and not args.allow:
        print("this change would replace or delete the cluster or data storage; "
              "label the pull request allow-replace if that is intended", file=sys.stderr)
        return 1
    if not steps:
        print("no replacement or deletion of the cluster or data storage")
    return 0


if __name__ == "__main__":
    sys.exit(main())
