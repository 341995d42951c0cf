"""The pack as pulumi-policy runs it: every policy mandatory, proxied inputs unwrapped, unknowns never raise."""

from __future__ import annotations

import runpy
from pathlib import Path

import pulumi_policy
import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_BOOLEAN_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

import pack
import rules

OPTIONS = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
URN = "urn:pulumi:dev::aksgpu::azure-native:containerservice:ManagedCluster::aks-aks"
GOOD_CLUSTER = {
    "enableRBAC": True, "disableLocalAccounts": True,
    "aadProfile": {"managed": True, "enableAzureRBAC": True},
    "apiServerAccessProfile": {"enablePrivateCluster": True},
    "networkProfile": {"networkPlugin": "azure", "networkPolicy": "cilium"},
    "agentPoolProfiles": [{"name": "system", "mode": "System", "vmSize": "Standard_D4ds_v5", "maxPods": 110,
                           "enableNodePublicIP": False}],
    "autoUpgradeProfile": {"upgradeChannel": "patch"},
    "tags": {"lifetime": "demo"},
}


def run(policy: ResourceValidationPolicy, resource_type: str, props: dict) -> list[tuple[str, str | None]]:
    reported: list[tuple[str, str | None]] = []
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(props), URN, "aks-aks", OPTIONS, None)
    policy.validate(args, lambda message, urn=None: reported.append((message, urn)))
    return reported


def by_name(name: str):
    return next(p for p in pack.policies() if p.name == name)


def test_every_rule_is_a_mandatory_policy_with_a_unique_name():
    policies = pack.policies()
    assert [p.name for p in policies] == [r.name for r in (*rules.RULES, *rules.STACK_RULES)]
    assert len({p.name for p in policies}) == len(policies)
    assert all(p.enforcement_level == EnforcementLevel.MANDATORY for p in policies)
    assert all(isinstance(p, (ResourceValidationPolicy, StackValidationPolicy)) for p in policies)


def test_the_pack_program_declares_one_mandatory_pack(monkeypatch):
    made = []
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda *a, **k: made.append((a, k)))
    runpy.run_path(str(Path(pack.__file__).with_name("__main__.py")), run_name="__main__")
    ((args, kwargs),) = made
    assert args[0] == "aksgpu-security" and kwargs["enforcement_level"] == EnforcementLevel.MANDATORY
    assert len(args[1]) == len(rules.RULES) + len(rules.STACK_RULES)


def test_a_compliant_cluster_passes_and_a_violation_names_the_resource():
    policy = by_name("aks-entra-id-rbac")
    assert run(policy, rules.MC, GOOD_CLUSTER) == []
    ((message, urn),) = run(policy, rules.MC, {**GOOD_CLUSTER, "disableLocalAccounts": False})
    assert "disableLocalAccounts must be true" in message and "§6.1" in message and urn == URN


@pytest.mark.parametrize("unknown", [UNKNOWN_BOOLEAN_VALUE, UNKNOWN_STRING_VALUE])
def test_a_value_unknown_at_preview_passes_without_raising(unknown):
    # Raw pulumi-policy raises UnknownValueError on access, which the engine turns into an advisory note; the
    # pack unwraps the proxy first, so its rules decide: unknown is a pass until `pulumi up` knows the value.
    for policy in pack.policies():
        if isinstance(policy, ResourceValidationPolicy):
            assert run(policy, rules.MC, {**GOOD_CLUSTER, "disableLocalAccounts": unknown,
                                          "apiServerAccessProfile": unknown}) == []


def test_malformed_input_is_reported_not_raised():
    ((message, _),) = run(by_name("aks-entra-id-rbac"), rules.MC, {**GOOD_CLUSTER, "aadProfile": ["wrong"]})
    assert message.startswith("malformed input: aadProfile must be an object")


def test_plain_unwraps_nested_proxies_and_keeps_unknowns():
    props = {"a": [{"b": UNKNOWN_STRING_VALUE}, 1], "c": {"d": [True]}}
    assert pack.plain(unknown_checking_proxy(props)) == props


def test_a_stack_policy_reports_against_the_resource_that_breaks_it():
    registry = PolicyResource(rules.REGISTRY, unknown_checking_proxy({"registryName": "cr1"}), "urn:registry",
                              "registry-acr", OPTIONS, None, None, [], {})
    reported = []
    by_name("registries-are-attached").validate(StackValidationArgs([registry]),
                                                lambda message, urn=None: reported.append((message, urn)))
    ((message, urn),) = reported
    assert "no AcrPull assignment" in message and urn == "urn:registry"
