"""Seed 001 done through the scheduler: several inference services and a notebook on one shared GPU.

The seed set ``NVIDIA_VISIBLE_DEVICES=0`` and no GPU limit, so the scheduler never knew the GPU was in
use. Here every pod asks for ``nvidia.com/gpu: 1`` and gets one of the replicas that the device plugin's
time-slicing (or MPS) advertises for the one physical GPU; a pod beyond the replicas stays Pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_random as random
from pulumi_kubernetes import apps, core

from components.azure.node_pools import GpuNodePool
from components.kubernetes.pods import (
    AWAIT_GPU_START,
    GPU_ROLLOUT,
    container,
    job_spec,
    job_template,
    pod_spec,
    submit_command,
)
from components.kubernetes.security import RESTRICTED_NAMESPACE_LABELS, container_security_context, namespace, resources
from components.workloads.function import SERVICE_PORT, function_container, function_pod

NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-2025-08-18"
"""Jupyter's PyTorch + CUDA 12 image, pinned by its dated tag."""
NOTEBOOK_UID, NOTEBOOK_GID = 1000, 100
"""The image's ``jovyan`` user and ``users`` group."""
NOTEBOOK_PORT = 8888
SERVICE_CPU, SERVICE_MEMORY = "700m", "5Gi"
"""Each inference service's share of a Standard_NC4as_T4_v3 (4 vCPU, 28 GiB): three services and the notebook
(500m, 4Gi) fit beside the GPU operator's DaemonSets (docs/scenarios/gpu-sharing.md)."""
LOAD_TEST_REQUESTS = 32
"""Requests the load test sends each service: enough for a stable p50 and p95 of one batch."""
LOAD_TEST_DEADLINE_SECONDS = 1800
"""The load test takes seconds to minutes; a stuck one must not keep a node busy."""


@dataclass(frozen=True)
class SharedInferenceArgs:
    pool: GpuNodePool
    """The pool whose one GPU is shared (time-slicing or MPS replicas)."""
    function_image: pulumi.Input[str]
    """The function image (docker/function) every inference service runs."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs) that holds the load test."""
    services: int = 3
    """Independent inference Deployments, each with its own Service."""
    max_context_chars: int = 20_000
    """Passed to each service as the function's ``MRC_MAX_CONTEXT_CHARS``."""
    notebook: bool = True
    """A Jupyter notebook that also takes one share of the GPU."""
    namespace: str = "gpu-sharing"
    """Namespace the program creates."""
    wait_for: Sequence[pulumi.Resource] = field(default_factory=list)
    """The GPU operator release: the services wait for GPU shares, so start their readiness clock after it."""


class SharedGpuInference(pulumi.ComponentResource):
    service_urls: list[pulumi.Output[str]]
    notebook_token: pulumi.Output[str] | None
    load_test_command: str
    notebook_command: str | None

    def __init__(self, name: str, args: SharedInferenceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:SharedGpuInference", name, None, opts)
        ns = namespace(f"{name}-ns", args.namespace, RESTRICTED_NAMESPACE_LABELS, self)
        self.service_urls = []
        for i in range(1, args.services + 1):
            app = f"infer-{i}"
            labels = {"app.kubernetes.io/name": app, "app.kubernetes.io/component": "inference"}
            pod = function_pod(args.pool, function_container(args.function_image, SERVICE_CPU, SERVICE_MEMORY,
                                                             args.max_context_chars))
            apps.v1.Deployment(
                f"{name}-{app}",
                metadata={"name": app, "namespace": ns.metadata["name"], "labels": labels,
                          "annotations": AWAIT_GPU_START},
                spec={"replicas": 1, "selector": {"matchLabels": labels}, "strategy": GPU_ROLLOUT,
                      "template": {"metadata": {"labels": labels}, "spec": pod}},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.wait_for, args.pool]),
            )
            service = core.v1.Service(
                f"{name}-{app}-service",
                metadata={"name": app, "namespace": ns.metadata["name"], "labels": labels},
                spec={"type": "ClusterIP", "selector": labels,
                      "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}]},
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.service_urls.append(pulumi.Output.concat(
                "http://", service.metadata["name"], ".", args.namespace, ".svc.cluster.local/api/answer"))

        self.notebook_token = None
        self.notebook_command = None
        if args.notebook:
            self._notebook(name, args, ns)

        labels = {"app.kubernetes.io/name": "load-test"}
        targets = pulumi.Output.all(*self.service_urls).apply(",".join)
        load = container("load-test", args.jobs_image,
                         ["python", "loadtest.py", "--targets", targets, "--requests", str(LOAD_TEST_REQUESTS)],
                         resources("500m", "512Mi"))
        job_template(f"{name}-load-test", "load-test", ns.metadata["name"], labels,
                     job_spec(pod_spec(None, [load]), labels, backoff_limit=1,
                              deadline_seconds=LOAD_TEST_DEADLINE_SECONDS), self)
        self.load_test_command = submit_command(args.namespace, "load-test")
        self.register_outputs({"service_urls": self.service_urls})

    def _notebook(self, name: str, args: SharedInferenceArgs, ns: core.v1.Namespace) -> None:
        token = random.RandomPassword(f"{name}-notebook-token", length=32, special=False,
                                      opts=pulumi.ResourceOptions(parent=self))
        secret = core.v1.Secret(
            f"{name}-notebook-token-secret",
            metadata={"name": "notebook-token", "namespace": ns.metadata["name"]},
            type="Opaque",
            string_data={"token": token.result},
            opts=pulumi.ResourceOptions(parent=self),
        )
        labels = {"app.kubernetes.io/name": "notebook"}
        notebook = {
            "name": "notebook",
            "image": NOTEBOOK_IMAGE,
            "ports": [{"name": "http", "containerPort": NOTEBOOK_PORT, "protocol": "TCP"}],
            # Jupyter Server reads its token from JUPYTER_TOKEN; the value never appears in the pod spec.
            "env": [{"name": "JUPYTER_TOKEN",
                     "valueFrom": {"secretKeyRef": {"name": secret.metadata["name"], "key": "token"}}}],
            "resources": resources("500m", "4Gi", gpus=1),
            # The image writes its home, kernels and caches under /home/jovyan.
            "securityContext": container_security_context(read_only_root=False),
            "readinessProbe": {"httpGet": {"path": "/api", "port": "http"}, "periodSeconds": 10},
        }
        pod = pod_spec(args.pool, [notebook], uid=NOTEBOOK_UID, gid=NOTEBOOK_GID, tmp=False)
        # No Service: the notebook is reached only by port-forward through the API server, never a public IP.
        apps.v1.Deployment(
            f"{name}-notebook",
            metadata={"name": "notebook", "namespace": ns.metadata["name"], "labels": labels,
                      "annotations": AWAIT_GPU_START},
            spec={"replicas": 1, "selector": {"matchLabels": labels}, "strategy": GPU_ROLLOUT,
                  "template": {"metadata": {"labels": labels}, "spec": pod}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.wait_for, args.pool]),
        )
        self.notebook_token = pulumi.Output.secret(token.result)
        self.notebook_command = (f"kubectl -n {args.namespace} port-forward deploy/notebook {NOTEBOOK_PORT} "
                                 f"# then open http://127.0.0.1:{NOTEBOOK_PORT}/?token=$(pulumi stack output "
                                 "notebookToken --show-secrets)")
