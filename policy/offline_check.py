"""The pack's policies, as pulumi-policy runs them, over rendered stacks: what `pulumi preview --policy-pack
policy` reports, without the Pulumi CLI or Azure. Each resource's inputs reach the policies wrapped in
pulumi-policy's own unknown-checking proxy, as the engine passes them.

    python -m offline render --all --out out          # the project's venv: out/<stack>/resources.json
    policy/venv/bin/python policy/offline_check.py out  # one JSON line per violation; exit 1 if any
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
)
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from pack import policies

OPTIONS = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def check_stack(stack: str, resources: list[dict]) -> list[dict]:
    """Violations of every policy over one stack's rendered resources."""
    found: list[dict] = []
    urn = {r["name"]: f"urn:pulumi:{stack}::aksgpu::{r['type']}::{r['name']}" for r in resources}
    for policy in policies():
        def report(message: str, resource_urn: str | None = None, policy_name: str = policy.name) -> None:
            found.append({"stack": stack, "policy": policy_name, "urn": resource_urn, "message": message})

        try:
            if isinstance(policy, ResourceValidationPolicy):
                for r in resources:
                    policy.validate(ResourceValidationArgs(
                        r["type"], unknown_checking_proxy(r["inputs"]), urn[r["name"]], r["name"], OPTIONS, None),
                        report)
            else:
                policy.validate(StackValidationArgs([
                    PolicyResource(r["type"], unknown_checking_proxy(r["inputs"]), urn[r["name"]], r["name"], OPTIONS,
                                   None, None, [], {}) for r in resources]), report)
        except UnknownValueError as error:  # the engine turns these into advisory notes during preview
            found.append({"stack": stack, "policy": policy.name, "urn": None, "advisory": error.message})
    return found


def main(out: Path) -> int:
    stacks = sorted(p.parent for p in out.glob("*/resources.json"))
    if not stacks:
        print(f"no rendered stacks under {out} (python -m offline render --all --out {out})", file=sys.stderr)
        return 2
    violations = 0
    for folder in stacks:
        for item in check_stack(folder.name, json.loads((folder / "resources.json").read_text())):
            print(json.dumps(item, sort_keys=True))
            violations += "message" in item
    print(f"{len(policies())} policies, {len(stacks)} stacks, {violations} violations", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "out")))
