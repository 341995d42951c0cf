"""The policy pack's rules (policy/rules.py) over the renders: every stack passes; each rule catches what it is
for; malformed or preview-unknown input is a violation or a pass, never an exception.

The pack itself (pulumi-policy, its own venv) is exercised over the same renders by test_policy_pack.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy import rules
from tests.helpers import STACKS, render_with, shape

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def resources(render) -> list[rules.Resource]:
    return [rules.Resource(r.type, r.name, r.revealed) for r in render.resources]


def props(render, name: str) -> dict[str, Any]:
    return copy.deepcopy(render.named(name).revealed)


def put(value: dict, path: str, new: Any) -> dict:
    """``value`` with ``path`` (dots; digits index lists) set to ``new``, or removed when ``new`` is ``...``."""
    *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
    target = value
    for key in parents:
        target = target[key]
    if new is ...:
        del target[last]
    else:
        target[last] = new
    return value


VARIANTS = {
    "sas-storage": dict(scenario="av-resim", storage={"auth": "sas", "accounts": [{"role": "input"},
                                                                                 {"role": "output"}]}),
    "authorized-ranges": dict(cluster={"authorizedIpRanges": ["203.0.113.7/32"], "skuTier": "Standard"}),
    "aks-driver-mig-and-a10": dict(gpuPools=[
        {"name": "a100", "vmSize": "Standard_NC24ads_A100_v4", "driver": "install", "priority": "regular",
         "sharing": {"mode": "mig", "migProfile": "MIG2g"}},
        {"name": "a10", "vmSize": "Standard_NV36ads_A10_v5", "driver": "install", "spotMaxPrice": 0.5},
        {"name": "t4", "vmSize": "Standard_NC4as_T4_v3"}]),
    "public-function": dict(scenario="function-gpu", function={"exposure": "public",
                                                                "allowedSourceRanges": ["203.0.113.0/24"]}),
}


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_every_rule(stack, render_of):
    assert rules.stack_violations(resources(render_of(stack))) == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_config_variants_pass_every_rule_too(variant):
    assert rules.stack_violations(resources(render_with(**VARIANTS[variant]))) == []


# (rule, stack, resource, path to change, new value or ... to delete, text the violation says)
NEGATIVE = [
    ("aks-entra-id-rbac", "gpu-basics", "aks-aks", "disableLocalAccounts", False, "non-auditable backdoor"),
    ("aks-entra-id-rbac", "gpu-basics", "aks-aks", "aadProfile.enableAzureRBAC", False, "managed Entra ID"),
    ("aks-api-server-access", "gpu-basics", "aks-aks", "tags.security-exception", ...,
     "a public API server needs"),
    ("aks-api-server-access", "av-resim", "aks-aks", "apiServerAccessProfile.authorizedIPRanges", ["0.0.0.0/0"],
     "must not contain 0.0.0.0/0"),
    ("aks-network-policy", "gpu-basics", "aks-aks", "networkProfile.networkPolicy", ..., "must be set"),
    ("aks-node-hardening", "gpu-basics", "gpu-t4-pool", "enableNodePublicIP", True, "enableNodePublicIP"),
    ("aks-node-hardening", "gpu-basics", "aks-aks", "agentPoolProfiles.0.maxPods", 30, "maxPods must be set to 50"),
    ("aks-node-hardening", "gpu-basics", "aks-aks", "autoUpgradeProfile.upgradeChannel", "none", "upgradeChannel"),
    ("aks-gpu-pools", "gpu-basics", "gpu-t4-pool", "mode", "System", "mode User"),
    ("aks-gpu-pools", "gpu-basics", "gpu-t4-pool", "scaleSetEvictionPolicy", "Deallocate", "evict with Delete"),
    ("aks-gpu-pools", "gpu-basics", "gpu-t4-pool", "spotMaxPrice", 0, "spotMaxPrice must be -1"),
    ("aks-gpu-pools", "gpu-basics", "gpu-t4-pool", "enableAutoScaling", False, "must autoscale"),
    ("aks-gpu-pools", "gpu-basics", "aks-aks", "agentPoolProfiles.0.scaleSetPriority", "Spot", "must be regular"),
    ("acr-locked-down", "gpu-basics", "registry-acr", "adminUserEnabled", True, "adminUserEnabled"),
    ("acr-locked-down", "av-resim", "registry-acr", "sku.name", "Standard", "Premium"),
    ("acr-pull-to-a-service-principal", "gpu-basics", "aks-acrpull", "principalType", "User",
     "principalType: ServicePrincipal"),
    ("storage-secure", "training-autoscale", "storage-ckpt-account", "allowSharedKeyAccess", True,
     "allowSharedKeyAccess must be false"),
    ("storage-secure", "training-autoscale", "storage-ckpt-account", "minimumTlsVersion", "TLS1_0", "TLS1_2"),
    ("storage-secure", "training-autoscale", "storage-ckpt-checkpoints", "publicAccess", "Blob", "publicAccess"),
    ("demo-resource-groups-expire", "gpu-basics", "net-rg", "tags.expires-at", "tomorrow", "expires-at"),
    ("security-exceptions-known", "gpu-basics", "aks-aks", "tags.security-exception", "trust-me",
     "not an exception this pack knows"),
    ("security-exceptions-known", "gpu-basics", "registry-acr", "tags.security-exception", "open-api-server",
     "which this resource does not have"),
    ("images-pinned", "gpu-sharing", "sharing-notebook", "spec.template.spec.containers.0.image",
     "quay.io/jupyter/pytorch-notebook:latest", "pinned by digest"),
    ("no-privileged-workloads", "gpu-basics", "training-job",
     "spec.template.spec.containers.0.securityContext.privileged", True, "privileged"),
    ("no-privileged-workloads", "gpu-basics", "training-job", "spec.template.spec.hostNetwork", True, "hostNetwork"),
    ("load-balancers-have-source-ranges", "function-gpu", "function-service", "spec.loadBalancerSourceRanges", ...,
     "needs spec.loadBalancerSourceRanges"),
    ("restricted-pod-security", "gpu-basics", "workspace-ns",
     "metadata.labels.pod-security.kubernetes.io/enforce", "baseline", "restricted"),
    # The KAITO namespace's exception covers baseline, never privileged, and only with its label.
    ("restricted-pod-security", "llm-serving-kaito", "workspace-ns",
     "metadata.labels.pod-security.kubernetes.io/enforce", "privileged", "restricted"),
    ("restricted-pod-security", "llm-serving-kaito", "workspace-ns", "metadata.labels.security-exception", ...,
     "restricted"),
    # The InfiniBand namespace's exception covers privileged enforcement, with restricted still warned and audited.
    ("restricted-pod-security", "distributed-training", "workspace-ns",
     "metadata.labels.pod-security.kubernetes.io/audit", ..., "must audit at the restricted level"),
    ("restricted-pod-security", "distributed-training", "workspace-ns", "metadata.labels.security-exception", ...,
     "restricted"),
    ("helm-pinned-and-atomic", "gpu-basics", "gpu-operator-release", "atomic", False, "atomic"),
    ("helm-pinned-and-atomic", "gpu-basics", "gpu-operator-release", "version", ">=26", "pin one chart version"),
    ("helm-pinned-and-atomic", "gpu-basics", "gpu-operator-release", "timeout", 300, "at least 600"),
]


def _put_tag_path(value: dict, path: str, new: Any) -> dict:
    # Tag and label keys contain dots and slashes: the first segment names the map, the rest is one key.
    for prefix in ("tags.", "metadata.labels."):
        if path.startswith(prefix):
            mapping = value
            for key in prefix.rstrip(".").split("."):
                mapping = mapping[key]
            key = path[len(prefix):]
            if new is ...:
                mapping.pop(key, None)
            else:
                mapping[key] = new
            return value
    return put(value, path, new)


@pytest.mark.parametrize("rule_name, stack, resource, path, new, says", NEGATIVE,
                         ids=[f"{n[0]}:{n[3]}" for n in NEGATIVE])
def test_each_rule_catches_what_it_is_for(render_of, rule_name, stack, resource, path, new, says):
    r = render_of(stack)
    (rule,) = [x for x in rules.RULES if x.name == rule_name]
    original = props(r, resource)
    resource_type = r.named(resource).type
    assert rules.evaluate(rule, resource_type, original) == []  # the positive case: the render as it is
    messages = rules.evaluate(rule, resource_type, _put_tag_path(original, path, new))
    assert messages and any(says in m for m in messages), messages


def test_every_rule_and_stack_rule_is_exercised():
    assert {n[0] for n in NEGATIVE} == {r.name for r in rules.RULES}
    assert {r.name for r in rules.STACK_RULES} == set(STACK_NEGATIVE)


def _gpu_pod_without_spot_toleration(rs: list[rules.Resource]) -> list[rules.Resource]:
    job = next(r for r in rs if r.name == "gpu-smoke-test-t4")
    spec = job.props["spec"]["template"]["spec"]
    spec["tolerations"] = [t for t in spec["tolerations"] if "scalesetpriority" not in t["key"]]
    return rs


def _operator_without_driver(rs: list[rules.Resource]) -> list[rules.Resource]:
    next(r for r in rs if r.name == "gpu-operator-release").props["values"]["driver"]["enabled"] = False
    return rs


def _nap_pod_without_gpu_toleration(rs: list[rules.Resource]) -> list[rules.Resource]:
    job = next(r for r in rs if r.name == "gpu-smoke-test-t4")
    spec = job.props["spec"]["template"]["spec"]
    spec["tolerations"] = [t for t in spec["tolerations"] if t["key"] != "sku"]
    return rs


def _operator_driver_over_nap_driver(rs: list[rules.Resource]) -> list[rules.Resource]:
    """NAP's nodes given AKS's driver while the operator keeps its own, without the hands-off labels."""
    next(r for r in rs if r.name == "gpu-t4-nodeclass").props["spec"]["gpu"]["mode"] = "Driver"
    return rs


def _precompiled_on_azure_linux(rs: list[rules.Resource]) -> list[rules.Resource]:
    next(r for r in rs if r.name == "gpu-nc4ast4-pool").props["osSKU"] = "AzureLinux"
    return rs


def _nfd_without_tolerations(rs: list[rules.Resource]) -> list[rules.Resource]:
    next(r for r in rs if r.name == "nfd-release").props["values"]["worker"]["tolerations"] = []
    return rs


def _template_pods_changed(change):
    """The InfiniBand run templates' pods, changed by ``change(pod spec)``."""
    import json

    def apply(rs: list[rules.Resource]) -> list[rules.Resource]:
        for r in rs:
            if r.type == rules.CONFIG_MAP and rules.RUN_TEMPLATE_KEY in (r.props.get("data") or {}):
                jobset = json.loads(r.props["data"][rules.RUN_TEMPLATE_KEY])
                for job in jobset["spec"]["replicatedJobs"]:
                    change(job["template"]["spec"]["template"]["spec"])
                r.props["data"][rules.RUN_TEMPLATE_KEY] = json.dumps(jobset)
        return rs
    return apply


def _add_sys_admin(pod: dict) -> None:
    pod["containers"][0]["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")


def _privileged_without_ipc_lock(pod: dict) -> None:
    """A pod of the exception's namespace that asks for no capability and runs as a user, but privileged: the
    namespace enforces privileged, so only the pack stops it."""
    pod["securityContext"]["runAsNonRoot"] = True
    for c in pod["containers"]:
        c["securityContext"]["capabilities"] = {"drop": ["ALL"]}
        c["securityContext"]["privileged"] = True


def _ipc_lock_in_a_restricted_namespace(rs: list[rules.Resource]) -> list[rules.Resource]:
    job = next(r for r in rs if r.name == "training-job")
    job.props["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["IPC_LOCK"]
    return rs


STACK_NEGATIVE = {
    "rdma-exception-is-narrow": [
        ("distributed-training", _template_pods_changed(_add_sys_admin), "add IPC_LOCK alone"),
        ("distributed-training", _template_pods_changed(lambda pod: pod.update(hostNetwork=True)),
         "hostNetwork is not part of the rdma-memory-lock exception"),
        ("distributed-training", _template_pods_changed(_privileged_without_ipc_lock),
         "privileged is not part of the rdma-memory-lock exception"),
        ("gpu-basics", _ipc_lock_in_a_restricted_namespace, "adds a capability outside")],
    "gpu-pods-fit-their-pools": [("gpu-basics", _gpu_pod_without_spot_toleration, "must tolerate"),
                                 ("gpu-basics", _nfd_without_tolerations, "worker.tolerations must tolerate"),
                                 ("gpu-nap", _nap_pod_without_gpu_toleration, "pool t4 must tolerate sku=gpu")],
    "one-gpu-driver-owner": [("av-resim", _operator_without_driver, "needs the operator's driver"),
                             ("gpu-nap", _operator_without_driver, "gpu.mode None needs the GPU operator's driver"),
                             ("gpu-nap", _operator_driver_over_nap_driver, "NAP installs this pool's driver"),
                             ("av-resim", _precompiled_on_azure_linux, "GPU pools need osSKU Ubuntu")],
    "private-registries-have-endpoints": [
        ("av-resim", lambda rs: [r for r in rs if r.name != "registry-private-endpoint"], "private endpoint")],
    "registries-are-attached": [
        ("gpu-basics", lambda rs: [r for r in rs if r.name != "aks-acrpull"], "no AcrPull assignment")],
}


@pytest.mark.parametrize("rule_name, case", [(n, c) for n, cases in STACK_NEGATIVE.items() for c in cases],
                         ids=[f"{n}:{i}" for n, cases in STACK_NEGATIVE.items() for i in range(len(cases))])
def test_each_stack_rule_catches_what_it_is_for(render_of, rule_name, case):
    stack, break_it, says = case
    (rule,) = [x for x in rules.STACK_RULES if x.name == rule_name]
    assert rules.evaluate_stack(rule, resources(render_of(stack))) == []
    broken = break_it([rules.Resource(r.type, r.name, copy.deepcopy(r.props)) for r in resources(render_of(stack))])
    found = rules.evaluate_stack(rule, broken)
    assert found and any(says in m for _, m in found), found


def test_a_value_unknown_at_preview_never_adds_a_violation(renders):
    # Any one input unknown (as during `pulumi preview`): the rule passes for now, and runs again at `up`.
    for r in (x for render in renders.values() for x in resources(render)):
        for key in r.props:
            changed = {**r.props, key: UNKNOWN}
            assert rules.resource_violations(r.type, changed) == [], (r.name, key)
        assert rules.resource_violations(r.type, UNKNOWN) == []


@pytest.mark.parametrize("garbage", [42, "text", [], {"unexpected": True}, [1, "two"]])
def test_malformed_input_is_a_violation_or_a_pass_never_an_exception(renders, garbage):
    rs = [x for render in renders.values() for x in resources(render)]
    for r in rs:
        for key in r.props:
            found = rules.resource_violations(r.type, {**r.props, key: garbage})
            assert all(isinstance(m, str) and "\n" not in m for _, m in found)
        whole = rules.resource_violations(r.type, garbage)
        if not isinstance(garbage, dict):
            assert all(m == "malformed input: the resource's inputs must be an object" for _, m in whole)
    for rule in rules.STACK_RULES:
        broken = [rules.Resource(r.type, r.name, {k: garbage for k in r.props}) for r in rs]
        assert isinstance(rules.evaluate_stack(rule, broken), list)


def test_a_resource_that_is_not_an_object_is_a_violation():
    (rule,) = [x for x in rules.RULES if x.name == "aks-entra-id-rbac"]
    assert rules.evaluate(rule, rules.MC, "nonsense") == ["malformed input: the resource's inputs must be an object"]
    # The first malformed property ends the rule's check with one violation naming it.
    assert rules.evaluate(rule, rules.MC, {"aadProfile": "yes"}) == ["malformed input: aadProfile must be an object"]


def test_a_rule_that_fails_inside_reports_a_violation_naming_the_error():
    broken = rules.Rule("broken", "", "", ("t",), lambda p: [1 / 0])
    (message,) = rules.evaluate(broken, "t", {})
    assert "ZeroDivisionError" in message


def test_the_exception_tag_names_match_the_programs():
    from components.vocabulary import SECURITY_EXCEPTION, SecurityException

    assert rules.SECURITY_EXCEPTION == SECURITY_EXCEPTION
    assert set(rules.EXCEPTIONS) == {e.value for e in SecurityException}


def test_a_variant_config_that_breaks_a_rule_is_caught_end_to_end():
    # An open API server without the exception tag: rendered by config, caught by the pack.
    config = shape("spot-from-zero")
    r = render_with("gpu-basics", **{**config, "cluster": {"openApiServer": True}})
    cluster = props(r, "aks-aks")
    del cluster["tags"]["security-exception"]
    assert any(n == "aks-api-server-access" for n, _ in rules.resource_violations(rules.MC, cluster))
