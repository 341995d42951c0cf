"""KEDA scales GPU Deployments on what managed Prometheus reads (GPU utilisation, a server's queue), as a workload
identity of its own; their pools follow through the cluster autoscaler."""

from __future__ import annotations

import promql_parser
import pytest

from components.autoscaling.gpu_deployment import GpuScaling
from components.autoscaling.keda import KEDA_NAMESPACE, KEDA_OPERATOR, gpu_utilisation_query, queue_length_query
from components.azure import roles
from offline.mocks import azure_id, guid
from offline.report import manifest
from tests import upstream
from tests.helpers import render_with, shape

KEDA = "2.16.1"
"""The KEDA add-on AKS runs on Kubernetes 1.33 (supported-kubernetes-versions.md; SOURCES-crds.md §1)."""
SCALED = "kubernetes:keda.sh/v1alpha1:ScaledObject"
AUTH = "kubernetes:keda.sh/v1alpha1:TriggerAuthentication"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
UAI = "azure-native:managedidentity:UserAssignedIdentity"
AMW = "azure-native:monitor:AzureMonitorWorkspace"


def scaled(renders) -> list:
    """The renders with ScaledObjects."""
    found = [r for r in renders.values() if r.of_type(SCALED)]
    assert found
    return found


def keda_client_id(render) -> str:
    identity = render.named("identity-keda-identity", UAI)
    return guid(azure_id(UAI, identity.name, identity.inputs), "client")


def test_scaled_objects_and_their_authentication_fit_the_add_ons_crds(renders):
    for r in scaled(renders):
        for kind, crd in ((SCALED, "scaledobjects.keda.sh"), (AUTH, "triggerauthentications.keda.sh")):
            objects = r.of_type(kind)
            assert objects
            for obj in objects:
                upstream.validate_against_crd(manifest(obj), upstream.operator_crd("keda", KEDA, crd))


def test_each_scaled_deployment_is_owned_by_its_hpa_and_scales_on_a_query_of_its_own_pods(renders):
    for r in scaled(renders):
        scales_on_its_own_pods(r)


def scales_on_its_own_pods(r) -> None:
    objects = {s.revealed["spec"]["scaleTargetRef"]["name"]: s.revealed for s in r.of_type(SCALED)}
    workspace = r.named("metrics-workspace", AMW)
    for name, obj in objects.items():
        deployment = next(d.revealed for d in r.of_type(DEPLOYMENT) if d.revealed["metadata"]["name"] == name)
        namespace = deployment["metadata"]["namespace"]
        assert obj["metadata"]["namespace"] == namespace
        assert obj["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        # The HPA owns the replica count: a replicas field would be reset by every `pulumi up`.
        assert "replicas" not in deployment["spec"]
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
        (trigger,) = obj["spec"]["triggers"]
        assert trigger["type"] == "prometheus" and trigger["authenticationRef"] == {"name": "managed-prometheus"}
        meta = trigger["metadata"]
        assert meta["serverAddress"].startswith(f"https://{workspace.inputs['azureMonitorWorkspaceName']}-")
        assert meta["serverAddress"].endswith(".prometheus.monitor.azure.com")
        assert meta["query"] in (gpu_utilisation_query(namespace, name), queue_length_query(namespace, name))
        assert 1 <= obj["spec"]["minReplicaCount"] <= obj["spec"]["maxReplicaCount"] and int(meta["threshold"]) >= 1


def test_the_query_sums_the_deployments_gpus_so_replicas_follow_load():
    expression = promql_parser.parse(gpu_utilisation_query("gpu-function", "gpu-function"))
    assert isinstance(expression, promql_parser.AggregateExpr) and str(expression.op) == "sum"
    assert 'pod=~"gpu-function-.*"' in gpu_utilisation_query("gpu-function", "gpu-function")


def test_keda_reads_metrics_as_its_own_identity_with_read_only_access(renders):
    for r in scaled(renders):
        reads_as_its_own_identity(r)


def reads_as_its_own_identity(r) -> None:
    client_id = keda_client_id(r)
    for auth in r.of_type(AUTH):
        assert auth.revealed["spec"]["podIdentity"] == {"provider": "azure-workload", "identityId": client_id}
    federation = r.named("identity-keda-federation").revealed
    assert federation["subject"] == f"system:serviceaccount:{KEDA_NAMESPACE}:{KEDA_OPERATOR}"
    (grant,) = [a.revealed for a in r.of_type("azure-native:authorization:RoleAssignment")
                if a.parent == "identity-keda"]
    workspace = r.named("metrics-workspace", AMW)
    assert grant["roleDefinitionId"].endswith(roles.MONITORING_DATA_READER)
    assert grant["scope"] == azure_id(AMW, workspace.name, workspace.inputs)


def test_the_add_ons_operator_is_bound_to_the_identity_and_restarted_as_the_aks_guide_does(render_shape):
    r = render_shape("function")
    client_id = keda_client_id(r)
    account = r.named("keda-service-account").revealed
    assert account["metadata"] == {"name": KEDA_OPERATOR, "namespace": KEDA_NAMESPACE,
                                   "annotations": {"azure.workload.identity/client-id": client_id}}
    restart = r.named("keda-restart").revealed
    assert restart["spec"]["template"]["metadata"]["annotations"] == {"kubectl.kubernetes.io/restartedAt": client_id}
    assert "keda-service-account" in r.named("keda-restart").depends_on
    assert r.named("aks-aks").inputs["workloadAutoScalerProfile"] == {"keda": {"enabled": True}}


def test_without_keda_the_deployments_run_their_minimum_replicas():
    r = render_with(**{**shape("time-slicing"), "addons": {"keda": False}})
    assert not r.of_type(SCALED) and not r.of_type(AUTH)
    assert "workloadAutoScalerProfile" not in r.named("aks-aks").inputs
    replicas = {d.revealed["metadata"]["name"]: d.revealed["spec"].get("replicas") for d in r.of_type(DEPLOYMENT)}
    assert {replicas[f"infer-{i}"] for i in (1, 2, 3)} == {1}


def test_keda_without_metrics_to_read_is_a_config_error():
    from program.config.errors import ConfigError
    with pytest.raises(ConfigError, match="addons.keda.*managed Prometheus"):
        render_with(**{**shape("spot-from-zero"), "monitoring": {"enabled": False}})


def test_replica_bounds_must_hold_at_least_one_pod():
    with pytest.raises(ValueError):
        GpuScaling(0, 2, 60)
    with pytest.raises(ValueError):
        GpuScaling(3, 2, 60)


def test_keda_gets_an_identity_only_where_something_can_scale(renders):
    """Round-3 k8s audit #10: stacks without a ScaledObject created KEDA's identity, its grant and credential, and
    restarted AKS's keda-operator; #11: with min = max (gpu-sharing-mig: 7 MIG slices, 1 notebook, 3 services of 2)
    a ScaledObject only restated the count."""
    for stack, r in renders.items():
        scaled = r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
        identity = [u for u in r.of_type("azure-native:managedidentity:UserAssignedIdentity") if "keda" in u.name]
        assert bool(identity) == bool(scaled), stack
        for obj in scaled:
            assert obj.inputs["spec"]["maxReplicaCount"] > obj.inputs["spec"]["minReplicaCount"], (stack, obj.name)
    mig = renders["gpu-sharing-mig"]
    assert not mig.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
    assert {d.inputs["spec"].get("replicas") for d in mig.of_type("kubernetes:apps/v1:Deployment")
            if d.name.startswith("sharing-infer")} == {2}
    assert renders["gpu-sharing"].of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")


def test_scale_in_waits_on_the_hpas_window_and_the_docs_credit_it(render_shape):
    """Round-3 k8s audit #8: with a minimum of 1, KEDA's cooldownPeriod never applies (it governs scaling to zero,
    keda.sh ScaledObject spec); the 10 minutes come from the HPA's scale-down stabilization window."""
    from offline.stack_files import REPO_ROOT
    for obj in render_shape("function").of_type("kubernetes:keda.sh/v1alpha1:ScaledObject"):
        behavior = obj.inputs["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 600
        assert obj.inputs["spec"]["minReplicaCount"] >= 1
    text = (REPO_ROOT / "docs" / "observability.md").read_text()
    assert "scale-down stabilization window (600 s)" in text and "(`cooldownPeriod`)" not in text


def test_the_function_stack_file_says_what_it_deploys():
    """Round-3 k8s audit #9: its header said DaemonSet; the render is a KEDA-scaled Deployment."""
    from offline.stack_files import REPO_ROOT
    header = (REPO_ROOT / "Pulumi.function-gpu.yaml").read_text().split("config:")[0]
    assert "Deployment" in header and "DaemonSet" not in header
