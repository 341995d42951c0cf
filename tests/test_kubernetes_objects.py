"""Every Kubernetes object the program writes: schema-valid, secure defaults, never in `default`."""

import re

import kubernetes_validate
import pytest

from components.vocabulary import SECURITY_EXCEPTION, SecurityException
from offline.report import is_manifest, manifest
from stacks import REGISTRY
from tests import upstream
from tests.helpers import STACKS, api_clients, job_specs, jobset_templates, pod_spec

EXCEPTION_LEVELS = {SecurityException.BASELINE_OPERATOR_PODS: "baseline",
                    # Added capabilities take effect only for root (kubernetes#56374), which restricted and baseline
                    # refuse, and IPC_LOCK is not in baseline's list.
                    SecurityException.RDMA_MEMORY_LOCK: "privileged"}
"""Pod Security level a scenario's one namespace exception enforces."""

WORKLOADS = {"Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "Pod"}


def is_builtin(api_version: str) -> bool:
    """Core and k8s.io groups are Kubernetes' own; any other dotted group comes from a CRD."""
    group = api_version.split("/")[0] if "/" in api_version else ""
    return "." not in group or group.endswith(".k8s.io")


def objects(render):
    return [r for r in render.resources if is_manifest(r)]


def sent(r):
    """The object as the provider sends it, secrets included (the render files mask them)."""
    return {k: v for k, v in r.revealed.items() if k not in ("kind", "apiVersion")} | {
        "apiVersion": r.revealed["apiVersion"], "kind": r.revealed["kind"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_builtin_object_validates_against_the_kubernetes_schema(stack, render_of):
    builtin = [sent(r) for r in objects(render_of(stack)) if is_builtin(r.inputs["apiVersion"])]
    assert builtin  # custom resources are checked against their CRDs in test_gpu_software
    for obj in builtin:
        upstream.validate_builtin(obj)


@pytest.mark.parametrize("stack", STACKS)
def test_no_object_lands_in_the_default_namespace(stack, render_of):
    for r in objects(render_of(stack)):
        assert r.inputs["metadata"].get("namespace") != "default", r.name


@pytest.mark.parametrize("stack", STACKS)
def test_workloads_run_restricted_with_pinned_images_and_resource_limits(stack, render_of):
    clients = api_clients(render_of(stack))
    for r in objects(render_of(stack)):
        obj = manifest(r)
        if obj["kind"] not in WORKLOADS:
            continue
        spec = pod_spec(obj)
        # A token only where a role binding makes the pod an API client.
        account = f"{obj['metadata']['namespace']}/{spec.get('serviceAccountName', 'default')}"
        assert spec["automountServiceAccountToken"] is (account in clients), r.name
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec["containers"]:
            image = c["image"]
            assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), image
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
            res = c["resources"]
            assert {"cpu", "memory"} <= set(res["requests"]) and {"cpu", "memory"} <= set(res["limits"])


@pytest.mark.parametrize("stack", STACKS)
def test_workload_namespaces_enforce_restricted_and_only_driver_namespaces_are_privileged(stack, render_of):
    for ns in render_of(stack).of_type("kubernetes:core/v1:Namespace"):
        labels = ns.inputs["metadata"]["labels"]
        level = labels["pod-security.kubernetes.io/enforce"]
        name = ns.inputs["metadata"]["name"]
        exception = labels.get(SECURITY_EXCEPTION)
        if exception in EXCEPTION_LEVELS:
            # Only where the scenario asks for it, and restricted stays the warning and audit level.
            cfg = render_of(stack).cfg
            needs = REGISTRY[cfg.scenario].needs_of(cfg, cfg.settings)
            assert needs.namespace == name and needs.namespace_exception == exception
            assert (level, labels["pod-security.kubernetes.io/warn"], labels["pod-security.kubernetes.io/audit"]) \
                == (EXCEPTION_LEVELS[exception], "restricted", "restricted"), name
            continue
        assert level == ("privileged" if name in ("gpu-operator", "node-feature-discovery", "network-operator")
                         else "restricted"), name


def test_smoke_test_job_requests_one_gpu_on_its_pool_without_waiting_for_the_operator(render_shape):
    r = render_shape("spot-from-zero")
    job = r.named("gpu-smoke-test-t4", "kubernetes:batch/v1:Job")
    spec = job.inputs["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.azure.com/agentpool": "t4"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]
    assert {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
            "effect": "NoSchedule"} in spec["tolerations"]
    (c,) = spec["containers"]
    assert c["command"] == ["nvidia-smi"] and c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert re.fullmatch(r"docker\.io/nvidia/cuda:12\.[\d.]+-base-ubuntu[\d.]+@sha256:[0-9a-f]{64}", c["image"])
    assert "volumes" not in spec, "no hostPath driver mounts: the toolkit injects them"
    # Its pending pod makes the autoscaler add the node while the operator installs (First GPU pod estimate).
    assert "gpu-operator-release" not in r.upstream(job.name) and "gpu-t4-pool" in job.depends_on
    assert job.inputs["spec"]["backoffLimit"] >= 1 and job.inputs["spec"]["activeDeadlineSeconds"] > 0


def test_smoke_test_is_off_unless_enabled(render_shape):
    assert not render_shape("training").of_type("aksgpu:gpu:GpuSmokeTest")


def test_schema_validation_is_strict_enough_to_catch_a_misspelt_field():
    with pytest.raises(kubernetes_validate.ValidationError):
        upstream.validate_builtin({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                                   "dta": {"a": "b"}})


JOBSET_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                          "PodFailurePolicy"}
"""What JobSet's webhook accepts in ``onJobFailureReasons`` (jobset v0.12.0 pkg/webhooks/jobset_webhook.go:82-91,
the batch/v1 ``JobReason*`` constants)."""
JOBSET_RULE_NAME = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
"""jobset v0.12.0 pkg/webhooks/jobset_webhook.go:416-418 (``ruleNameFmt``, 1 to 128 characters)."""


def pod_failure_policy_errors(job: dict) -> list[str]:
    """What the API server refuses in a Job's pod failure policy and the schema lets through (kubernetes/api
    v0.33.0 batch/v1/types.go:165-200 ``PodFailurePolicyOnExitCodesRequirement``, :329-338 ``podFailurePolicy``;
    enforced by pkg/apis/batch/validation/validation.go ``validatePodFailurePolicyRuleOnExitCodes``)."""
    if "podFailurePolicy" not in job:
        return []
    pod = job["template"]["spec"]
    names = {c["name"] for c in [*pod["containers"], *pod.get("initContainers", [])]}
    errors = [] if pod.get("restartPolicy") == "Never" else [f"restartPolicy {pod.get('restartPolicy')}, not Never"]
    for rule in job["podFailurePolicy"]["rules"]:
        codes = rule.get("onExitCodes")
        if codes is None:
            continue
        values = codes["values"]
        if "containerName" in codes and codes["containerName"] not in names:
            errors.append(f"containerName {codes['containerName']} is none of {sorted(names)}")
        if not 1 <= len(values) <= 255 or values != sorted(set(values)):
            errors.append(f"values {values}: 1 to 255, ordered, no duplicates")
        if codes["operator"] == "In" and 0 in values:
            errors.append("0 with the In operator")
    return errors


def test_the_pod_failure_policy_check_finds_what_the_api_server_refuses():
    job = {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
        "containerName": "trainer", "operator": "In", "values": [3, 0, 3]}}]},
        "template": {"spec": {"containers": [{"name": "train"}]}}}
    assert len(pod_failure_policy_errors(job)) == 4


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_and_jobset_keeps_the_failure_policy_rules_the_schema_does_not_check(stack, render_of):
    """JobSets are custom objects: the API server checks their Jobs only when JobSet creates them, mid-run."""
    render = render_of(stack)
    for name, job in job_specs(render):
        assert not pod_failure_policy_errors(job), name
    for name, jobset in jobset_templates(render).items():
        rules = jobset["spec"].get("failurePolicy", {}).get("rules", [])
        replicated = {rj["name"] for rj in jobset["spec"]["replicatedJobs"]}
        assert len({r["name"] for r in rules}) == len(rules), name
        for rule in rules:
            assert JOBSET_RULE_NAME.fullmatch(rule["name"]) and len(rule["name"]) <= 128, rule
            assert set(rule.get("onJobFailureReasons", [])) <= JOBSET_FAILURE_REASONS, rule
            assert set(rule.get("targetReplicatedJobs", [])) <= replicated, rule
