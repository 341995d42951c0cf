"""Seed 000's deployment: the GPU function on a GPU pool behind a LoadBalancer on port 80.

Each pod holds one GPU (``nvidia.com/gpu: 1``). Where the stack has metrics, KEDA scales the Deployment on its
GPUs' utilisation between the pool's bounds and the cluster autoscaler adds or removes GPU nodes for the pods;
otherwise it runs a fixed number of replicas. (Seed 000 ran a DaemonSet: one pod per node, so load never grew the
pool.) Probes hit ``/api/health``, which answers only once the model is on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pulumi
from pulumi_kubernetes import core

from components.autoscaling.gpu_deployment import GpuScaling, gpu_deployment
from components.autoscaling.keda import trigger_authentication
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.network_policy import allow_ingress
from components.kubernetes.pods import TMP_MOUNT, pod_spec
from components.kubernetes.security import GPU_CLIENT_UID, container_security_context, resources, workload_namespace

FUNCTION_UID = GPU_CLIENT_UID
"""The image's non-root user (docker/function/Dockerfile)."""
CONTAINER_PORT = 8080
SERVICE_PORT = 80
NAMESPACE, SERVICE = "gpu-function", "gpu-function"
"""The function's namespace, and its Deployment and Service."""
HEALTH_PATH, STATUS_PATH, ANSWER_PATH = "/api/health", "/api/status", "/api/answer"
"""docker/function/function_app.py's routes: the probes', whether torch computes on the GPU, the answers."""
STARTUP_SECONDS = 600
"""First start on a fresh node: pulling a multi-GB image, importing torch, moving the model to the GPU."""


@dataclass(frozen=True)
class GpuFunctionArgs:
    pool: GpuPoolComponent
    """GPU pool the Deployment runs on (its node selector and tolerations)."""
    image: pulumi.Input[str]
    """Immutable image reference (digest or content tag) in the stack's ACR."""
    namespace: str = NAMESPACE
    """Namespace the program creates for the function."""
    internal: bool = True
    """A LoadBalancer IP in the cluster's VNet; False: a public IP (seed 000's way)."""
    allowed_source_ranges: Sequence[str] = ()
    """CIDRs allowed through the LoadBalancer (the config requires them for ``public``)."""
    max_context_chars: int = 20_000
    """Passed to the app as ``MRC_MAX_CONTEXT_CHARS``."""
    cpu: str = "2"
    """CPU request and limit: tokenising is CPU work (half of a Standard_NC4as_T4_v3)."""
    memory: str = "8Gi"
    """Memory request and limit: torch, CUDA libraries and the model."""
    scaling: GpuScaling = GpuScaling(1, 1, 60)
    """Replica bounds and how KEDA scales within them."""
    wait_for: Sequence[pulumi.Resource] = field(default_factory=list)
    """The GPU operator release: ``nvidia.com/gpu`` exists only once its device plugin runs."""


def _probe(period: int, failures: int) -> dict:
    return {"httpGet": {"path": HEALTH_PATH, "port": "http"}, "periodSeconds": period, "timeoutSeconds": 5,
            "failureThreshold": failures}


def function_container(image: pulumi.Input[str], cpu: str, memory: str, max_context_chars: int) -> dict:
    """The function app's container with one GPU (or one share of a shared GPU) and its probes."""
    return {
        "name": "function",
        "image": image,
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "env": [{"name": "MRC_MAX_CONTEXT_CHARS", "value": str(max_context_chars)}],
        "resources": resources(cpu, memory, gpus=1),
        # Read-only root: the host writes its secrets, logs and caches under $HOME (/home) and /tmp, both
        # emptyDirs (docker/function/Dockerfile keeps the code outside them).
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "home", "mountPath": "/home"}, TMP_MOUNT],
        "startupProbe": _probe(period=10, failures=STARTUP_SECONDS // 10),
        "readinessProbe": _probe(period=10, failures=3),
        "livenessProbe": _probe(period=20, failures=3),
    }


def function_pod(pool: GpuPoolComponent, container: dict) -> dict:
    pod = pod_spec(pool, [container], volumes=[{"name": "home", "emptyDir": {"sizeLimit": "1Gi"}}], uid=FUNCTION_UID)
    return {**pod, "terminationGracePeriodSeconds": 30}


class GpuFunction(pulumi.ComponentResource):
    base_url: pulumi.Output[str]
    status_url: pulumi.Output[str]
    port_forward: str
    """A command that reaches the function from the deployer's machine, whatever its exposure."""

    def __init__(self, name: str, args: GpuFunctionArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:GpuFunction", name, None, opts)  # frozen: components/__init__.py
        ns = workload_namespace(f"{name}-ns", args.namespace, self)
        labels = {"app.kubernetes.io/name": "gpu-function", "app.kubernetes.io/component": "inference"}
        container = function_container(args.image, args.cpu, args.memory, args.max_context_chars)
        scaling = args.scaling
        if scaling.scales and scaling.metrics is not None:  # scales: KEDA has metrics to read
            auth = trigger_authentication(f"{name}-keda-auth", ns.metadata["name"], scaling.metrics, self)
            scaling = replace(scaling, auth=auth)
        # The pool too: its nodes are chosen by label, an edge Pulumi cannot see, and the rollout awaits them.
        gpu_deployment(f"{name}-deployment", SERVICE, ns.metadata["name"], args.namespace, labels,
                       function_pod(args.pool, container), scaling, [*args.wait_for, args.pool], self)
        # Load balancer clients reach the pods directly (externalTrafficPolicy Local keeps their addresses).
        allow_ingress(f"{name}-allow-http", "allow-http", ns.metadata["name"], labels, CONTAINER_PORT, self)
        annotations = {}
        if args.internal:
            annotations["service.beta.kubernetes.io/azure-load-balancer-internal"] = "true"
        spec: dict = {
            "type": "LoadBalancer",
            "selector": labels,
            "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
            # Only nodes running a function pod answer the LB probe, and callers' IPs reach the pod.
            "externalTrafficPolicy": "Local",
        }
        if args.allowed_source_ranges:
            spec["loadBalancerSourceRanges"] = list(args.allowed_source_ranges)
        service = core.v1.Service(
            f"{name}-service",
            metadata={"name": SERVICE, "namespace": ns.metadata["name"], "labels": labels,
                      "annotations": annotations},
            spec=spec,
            opts=pulumi.ResourceOptions(parent=self),
        )
        ip = service.status.apply(lambda status: status.load_balancer.ingress[0].ip)
        self.base_url = pulumi.Output.concat("http://", ip, "/")
        self.status_url = pulumi.Output.concat(self.base_url, STATUS_PATH.lstrip("/"))
        self.port_forward = (f"echo 'open http://localhost:{CONTAINER_PORT}{STATUS_PATH}' && kubectl port-forward "
                             f"--namespace {args.namespace} service/{SERVICE} {CONTAINER_PORT}:{SERVICE_PORT}")
        self.register_outputs({"base_url": self.base_url, "status_url": self.status_url,
                               "port_forward": self.port_forward})
