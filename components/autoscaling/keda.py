"""KEDA, the AKS add-on, scaling Deployments on their GPUs' utilisation from managed Prometheus.

KEDA's operator queries the Azure Monitor workspace as a managed identity (workload identity): the identity holds
Monitoring Data Reader on the workspace and a federated credential for ``kube-system/keda-operator``
(program/layers/azure.py). As AKS's keda-workload-identity guide does, the operator's ServiceAccount is annotated
with the identity and its pods restarted so the webhook injects the token; each namespace that scales gets a
TriggerAuthentication naming the identity.

Why GPU utilisation: the function and the inference services answer HTTP with no request metrics of their own,
while DCGM reports how busy each pod's GPU is (0-100, ``components/monitoring/gpu_utilisation.py``). A pod that keeps
its GPU above the threshold is saturated; more replicas (and the GPU nodes the autoscaler adds for them) share the
load. A utilisation trigger cannot wake a workload from zero replicas (no pod, no GPU, no metric), so the minimum
stays 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_kubernetes import apiextensions, apps, core

from components.monitoring.gpu_utilisation import gpu_utilisation

KEDA_NAMESPACE = "kube-system"
KEDA_OPERATOR = "keda-operator"
"""The AKS add-on's operator Deployment and ServiceAccount (keda-workload-identity.md)."""
KEDA_API = "keda.sh/v1alpha1"
SCALEDOBJECT_CRD = "scaledobjects.keda.sh"
TRIGGERAUTHENTICATION_CRD = "triggerauthentications.keda.sh"
CLIENT_ID_ANNOTATION = "azure.workload.identity/client-id"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
AUTH_NAME = "managed-prometheus"
POLLING_SECONDS = 30
"""As often as the DCGM exporter is scraped: a faster poll sees no new data."""
COOLDOWN_SECONDS = 600
"""How long the HPA waits after a higher recommendation before it scales in (its scale-down stabilization window):
a GPU pod is expensive to bring back (node, driver, image, model), so scale down slowly. KEDA's cooldownPeriod gets
the same value but governs only scaling to zero, which these Deployments never do (minimum 1)."""


@dataclass(frozen=True)
class MetricsAccess:
    """What a ScaledObject needs to read managed Prometheus."""

    query_endpoint: pulumi.Input[str]
    """The Azure Monitor workspace's Prometheus query endpoint."""
    identity_client_id: pulumi.Input[str]
    """The identity KEDA queries it as."""
    ready: pulumi.Resource
    """The operator's workload-identity setup: scalers work only after it."""


@dataclass(frozen=True)
class KedaWorkloadIdentityArgs:
    identity_client_id: pulumi.Input[str]
    """The managed identity KEDA's operator reads metrics as (federated with its ServiceAccount)."""


class KedaWorkloadIdentity(pulumi.ComponentResource):
    """The add-on's operator, bound to the metrics identity (ServiceAccount annotation, then a pod restart)."""

    restart: pulumi.Resource
    """The operator's restart: scalers work only after it."""

    def __init__(self, name: str, args: KedaWorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:autoscaling:KedaWorkloadIdentity", name, None, opts)  # frozen: components/__init__.py
        child = pulumi.ResourceOptions(parent=self)
        account = core.v1.ServiceAccountPatch(
            f"{name}-service-account",
            metadata={"name": KEDA_OPERATOR, "namespace": KEDA_NAMESPACE,
                      "annotations": {CLIENT_ID_ANNOTATION: args.identity_client_id}},
            opts=child)
        # A pod template annotation that changes with the identity: the rollout restart of the guide, declared.
        self.restart = apps.v1.DeploymentPatch(
            f"{name}-restart",
            metadata={"name": KEDA_OPERATOR, "namespace": KEDA_NAMESPACE},
            spec={"template": {"metadata": {"annotations": {RESTARTED_AT: args.identity_client_id}}}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account]))
        self.register_outputs({})


def trigger_authentication(name: str, namespace: pulumi.Input[str], access: MetricsAccess,
                           parent: pulumi.Resource) -> apiextensions.CustomResource:
    """The namespace's way for KEDA to authenticate to managed Prometheus: the metrics identity."""
    return apiextensions.CustomResource(
        name, api_version=KEDA_API, kind="TriggerAuthentication",
        metadata={"name": AUTH_NAME, "namespace": namespace},
        spec={"podIdentity": {"provider": "azure-workload", "identityId": access.identity_client_id}},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[access.ready]))


def gpu_utilisation_query(namespace: str, pod_prefix: str) -> str:
    """Summed GPU utilisation (%) of the pods whose names start with ``pod_prefix`` in ``namespace``.

    A sum, because KEDA's Prometheus metric is an ``AverageValue`` target: the HPA divides the value by the
    threshold to get replicas (3 pods at 90 % with a 60 % target: 270 / 60, so 5 replicas)."""
    matchers = f'namespace="{namespace}", pod=~"{pod_prefix}-.*"'
    return f"sum{gpu_utilisation(matchers)}"


def queue_length_query(namespace: str, pod_prefix: str) -> str:
    """Requests waiting in the vLLM servers whose pods start with ``pod_prefix``: summed, like the GPU query, so
    the HPA divides by the per-replica target."""
    return f'sum(vllm:num_requests_waiting{{namespace="{namespace}", pod=~"{pod_prefix}-.*"}})'


def scaled_object(name: str, deployment: str, namespace: pulumi.Input[str], min_replicas: int, max_replicas: int,
                  query: str, target: int, access: MetricsAccess, auth: pulumi.Resource, parent: pulumi.Resource,
                  labels: Mapping[str, str] | None = None) -> apiextensions.CustomResource:
    """Scale ``deployment`` between its bounds to keep ``query`` near ``target`` per replica."""
    return apiextensions.CustomResource(
        name, api_version=KEDA_API, kind="ScaledObject",
        metadata={"name": deployment, "namespace": namespace, "labels": dict(labels or {})},
        spec={
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "pollingInterval": POLLING_SECONDS,
            "cooldownPeriod": COOLDOWN_SECONDS,
            # The HPA scales in only after this long of lower recommendations: a GPU pod is slow to bring back.
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {
                "stabilizationWindowSeconds": COOLDOWN_SECONDS}}}},
            "triggers": [{
                "type": "prometheus",
                "metadata": {
                    "serverAddress": access.query_endpoint,
                    "query": query,
                    "threshold": str(target),
                    # No data (pods still starting) is no load, not an error that freezes scaling.
                    "ignoreNullValues": "true",
                },
                "authenticationRef": {"name": AUTH_NAME},
            }],
        },
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[auth]))
