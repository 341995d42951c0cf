"""The rules of rules.py as pulumi-policy policies, all mandatory.

pulumi-policy hands a policy the resource's inputs wrapped in a proxy that raises on a value unknown during
preview; ``plain`` unwraps it, so the rules see unknown values as the engine's placeholders and decide for
themselves (they pass, and run again during ``pulumi up``, when values are known).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

import rules

PACK_NAME = "aksgpu-security"
ENFORCEMENT = EnforcementLevel.MANDATORY


def plain(value: Any) -> Any:
    """A pulumi-policy proxy as plain dicts and lists, unknown values kept as the engine's placeholders."""
    if isinstance(value, Mapping):
        target = value["__target"] if "__target" in value else value
        return {key: plain(target[key]) for key in target}
    if isinstance(value, Sequence) and not isinstance(value, str):
        try:
            target = value["__target"]  # type: ignore[call-overload]  # a proxied list answers its target by this key
        except (TypeError, KeyError, IndexError):
            target = value
        return [plain(item) for item in target]
    return value


def _resource_policy(rule: rules.Rule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rules.evaluate(rule, args.resource_type, plain(args.props)):
            report_violation(f"{message} [{rule.source}]", args.urn)

    return ResourceValidationPolicy(rule.name, rule.description, validate, ENFORCEMENT)


def _stack_policy(rule: rules.StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [rules.Resource(r.resource_type, r.name, plain(r.props)) for r in args.resources]
        urns = {r.name: r.urn for r in args.resources}
        for name, message in rules.evaluate_stack(rule, resources):
            report_violation(f"{message} [{rule.source}]", urns.get(name))

    return StackValidationPolicy(rule.name, rule.description, validate, ENFORCEMENT)


def policies() -> list:
    return [*map(_resource_policy, rules.RULES), *map(_stack_policy, rules.STACK_RULES)]
