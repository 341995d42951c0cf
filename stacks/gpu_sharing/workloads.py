"""Seed 001 done through the scheduler: several inference services and a notebook on one shared GPU.

The seed set ``NVIDIA_VISIBLE_DEVICES=0`` and no GPU limit, so the scheduler never knew the GPU was in
use. Here every pod asks for ``nvidia.com/gpu: 1`` and gets one of the replicas that the device plugin's
time-slicing (or MPS) advertises for the one physical GPU; a pod beyond the replicas stays Pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pulumi
import pulumi_random as random
from pulumi_kubernetes import apps, core

from components.autoscaling.gpu_deployment import GpuScaling, gpu_deployment
from components.autoscaling.keda import trigger_authentication
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.network_policy import allow_egress_to_pods, allow_https_to_internet, allow_ingress
from components.kubernetes.pods import (
    AWAIT_GPU_START,
    BAD_INPUT_EXIT_CODE,
    GPU_ROLLOUT,
    container,
    job_spec,
    job_template,
    pod_spec,
    submit_command,
)
from components.kubernetes.security import GPU_CLIENT_UID, resources, workload_namespace
from stacks.function_gpu.workloads import ANSWER_PATH, CONTAINER_PORT, SERVICE_PORT, function_container, function_pod

NAMESPACE = "gpu-sharing"
LOAD_TEST = "load-test"
"""The load test's Job template."""


def service_name(index: int) -> str:
    """The ``index``-th inference service (from 1): its Deployment, its Service and its pods' name label."""
    return f"infer-{index}"


def inference_labels(index: int) -> dict[str, str]:
    return {"app.kubernetes.io/name": service_name(index), "app.kubernetes.io/component": "inference"}


NOTEBOOK_IMAGE = ("quay.io/jupyter/pytorch-notebook:cuda12-2026-08-03"
                  "@sha256:69c72823a4e0dbee17114bbe44d0377bc9a39504a76f6314995f7d5bfaa98d60")
"""Jupyter's PyTorch + CUDA 12 image: the dated tag for people, the digest for the kubelet (the tag's manifest
digest on quay.io: ``/api/v1/repository/jupyter/pytorch-notebook/tag/?specificTag=cuda12-2026-08-03``)."""
NOTEBOOK_UID, NOTEBOOK_GID = GPU_CLIENT_UID, 100
"""A UID outside the node's range (the image's ``jovyan`` is 1000; its start script only warns about another
UID) and the image's ``users`` group, which owns what jovyan may write."""
NOTEBOOK_HOME = "/home/jovyan"
NOTEBOOK_PORT = 8888
TOKEN_DIR = "/etc/jupyter-token"  # noqa: S105 (a mount path, not a secret)
"""Where the token Secret is mounted: Jupyter Server reads ``JUPYTER_TOKEN_FILE``, so no secret in the env."""
SERVICE_CPU, SERVICE_MEMORY = "700m", "5Gi"
"""Each inference service's share of a Standard_NC4as_T4_v3 (4 vCPU, 28 GiB): three services and the notebook
(500m, 4Gi) fit beside the GPU operator's DaemonSets (stacks/gpu_sharing/README.md)."""
LOAD_TEST_REQUESTS = 32
"""Requests the load test sends each service: enough for a stable p50 and p95 of one batch."""
LOAD_TEST_DEADLINE_SECONDS = 1800
"""The load test takes seconds to minutes; a stuck one must not keep a node busy."""


@dataclass(frozen=True)
class SharedInferenceArgs:
    pool: GpuPoolComponent
    """The pool whose one GPU is shared (time-slicing or MPS replicas)."""
    function_image: pulumi.Input[str]
    """The function image (docker/function) every inference service runs."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs) that holds the load test."""
    services: int = 3
    """Independent inference Deployments, each with its own Service."""
    scaling: GpuScaling = GpuScaling(1, 1, 60)
    """Each service's replica bounds within the GPU shares, and how KEDA scales it."""
    max_context_chars: int = 20_000
    """Passed to each service as the function's ``MRC_MAX_CONTEXT_CHARS``."""
    notebook: bool = True
    """A Jupyter notebook that also takes one share of the GPU."""
    namespace: str = NAMESPACE
    """Namespace the program creates."""
    wait_for: Sequence[pulumi.Resource] = field(default_factory=list)
    """The GPU operator release: the services wait for GPU shares, so start their readiness clock after it."""


class SharedGpuInference(pulumi.ComponentResource):
    service_urls: list[pulumi.Output[str]]
    notebook_token: pulumi.Output[str] | None
    load_test_command: str
    notebook_command: str | None

    def __init__(self, name: str, args: SharedInferenceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:SharedGpuInference", name, None, opts)  # frozen: components/__init__.py
        ns = workload_namespace(f"{name}-ns", args.namespace, self)
        scaling = args.scaling
        if scaling.scales and scaling.metrics is not None:  # scales: KEDA has metrics to read
            auth = trigger_authentication(f"{name}-keda-auth", ns.metadata["name"], scaling.metrics, self)
            scaling = replace(scaling, auth=auth)
        self.service_urls = []
        load_labels = {"app.kubernetes.io/name": LOAD_TEST}
        service_labels = []
        for i in range(1, args.services + 1):
            app, labels = service_name(i), inference_labels(i)
            service_labels.append(labels)
            allow_ingress(f"{name}-{app}-allow-load-test", f"{app}-from-load-test", ns.metadata["name"], labels,
                          CONTAINER_PORT, self, from_pods=load_labels)
            pod = function_pod(args.pool, function_container(args.function_image, SERVICE_CPU, SERVICE_MEMORY,
                                                             args.max_context_chars))
            gpu_deployment(f"{name}-{app}", app, ns.metadata["name"], args.namespace, labels, pod, scaling,
                           [*args.wait_for, args.pool], self)
            service = core.v1.Service(
                f"{name}-{app}-service",
                metadata={"name": app, "namespace": ns.metadata["name"], "labels": labels},
                spec={"type": "ClusterIP", "selector": labels,
                      "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}]},
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.service_urls.append(pulumi.Output.concat(
                "http://", service.metadata["name"], ".", args.namespace, ".svc.cluster.local", ANSWER_PATH))

        self.notebook_token = None
        self.notebook_command = None
        if args.notebook:
            self._notebook(name, args, ns)

        labels = load_labels
        allow_egress_to_pods(f"{name}-load-test-allow-services", "load-test-to-services", ns.metadata["name"],
                             labels, service_labels, CONTAINER_PORT, self)
        targets = pulumi.Output.all(*self.service_urls).apply(",".join)
        load = container("load-test", args.jobs_image,
                         ["python", "loadtest.py", "--targets", targets, "--requests", str(LOAD_TEST_REQUESTS)],
                         resources("500m", "512Mi"))
        job_template(f"{name}-load-test", LOAD_TEST, ns.metadata["name"], labels,
                     job_spec(pod_spec(None, [load]), labels, backoff_limit=1,
                              deadline_seconds=LOAD_TEST_DEADLINE_SECONDS,
                              fail_on_exit_codes={"load-test": [BAD_INPUT_EXIT_CODE]}), self)
        self.load_test_command = submit_command(args.namespace, LOAD_TEST)
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
        notebook = container(
            "notebook", NOTEBOOK_IMAGE, None, resources("500m", "4Gi", gpus=1),
            # Read-only root: notebooks, kernels and caches go to the home and /tmp emptyDirs (lost with the pod:
            # keep work in a blob volume or git).
            mounts=[{"name": "home", "mountPath": NOTEBOOK_HOME}, {"name": "token", "mountPath": TOKEN_DIR,
                                                                    "readOnly": True}],
            env={"JUPYTER_TOKEN_FILE": f"{TOKEN_DIR}/token", "HOME": NOTEBOOK_HOME,
                 # No /etc/passwd entry for the UID: Python's getpass and Jupyter take the name from here.
                 "USER": "jovyan"},
            ports=[{"name": "http", "containerPort": NOTEBOOK_PORT, "protocol": "TCP"}],
            # GET /api answers without a token once the server runs.
            readinessProbe={"httpGet": {"path": "/api", "port": "http"}, "periodSeconds": 10},
            livenessProbe={"httpGet": {"path": "/api", "port": "http"}, "initialDelaySeconds": 60,
                           "periodSeconds": 20, "failureThreshold": 3},
        )
        volumes = [
            {"name": "home", "emptyDir": {"sizeLimit": "10Gi"}},
            # Group-readable only: the pod's group (users, 100) reads it.
            {"name": "token", "secret": {"secretName": secret.metadata["name"], "defaultMode": 0o440}},
        ]
        pod = pod_spec(args.pool, [notebook], volumes=volumes, uid=NOTEBOOK_UID, gid=NOTEBOOK_GID)
        # Notebooks download models and datasets; nothing else in the cluster or VNet is theirs to call.
        allow_https_to_internet(f"{name}-notebook-allow-https", "notebook-https", ns.metadata["name"], labels, self)
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
        self.notebook_command = (f'echo "open http://127.0.0.1:{NOTEBOOK_PORT}/?token=$(pulumi stack output '
                                 f'notebookToken --show-secrets)" && kubectl -n {args.namespace} port-forward '
                                 f"deploy/notebook {NOTEBOOK_PORT}")
