"""An OpenAI-compatible LLM endpoint on a GPU pool, scaled, scraped and load-tested like the rest.

``vllm``: a Deployment of vLLM's OpenAI server that this program writes, one replica per node and tensor-parallel
over the node's GPUs, behind a ClusterIP Service; KEDA scales it on the server's own queue
(``vllm:num_requests_waiting``) and managed Prometheus scrapes its ``/metrics``.
``kaito``: a KAITO Workspace serving a preset on the same pool's nodes; KAITO writes the pods and the Service
(port 80 to 5000). KAITO 0.6.0's Workspace has no scale subresource, so nothing scales it.

Either way the server's namespace admits only the load test and the metrics scraper, and a load-test Job
template reports time to first token and tokens per second at the percentiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pulumi
from pulumi_kubernetes import apiextensions, core

from components.autoscaling.gpu_deployment import GpuScaling, gpu_deployment
from components.autoscaling.keda import queue_length_query, trigger_authentication
from components.azure.node_pools import POOL_LABEL
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.network_policy import (
    allow_egress_to_pods,
    allow_https_to_internet,
    allow_ingress,
    allow_scraping,
)
from components.kubernetes.pods import BAD_INPUT_EXIT_CODE, container, job_spec, job_template, pod_spec, submit_command
from components.kubernetes.security import GPU_CLIENT_UID, resources
from components.kubernetes.workspace import Workspace
from components.monitoring.gpu_scraping import PODMONITOR_API, SCRAPE_INTERVAL
from components.volumes.blob_volume import WorkloadVolumes

SERVER = "llm"
"""The Deployment (or Workspace) and its Service."""
VLLM_PORT = 8000
KAITO_PORT = 5000
"""KAITO 0.6.0's inference port (pkg/workspace/inference/preset_inferences.go); its container port has no name."""
SERVICE_PORT = 80
KAITO_API = "kaito.sh/v1beta1"
KAITO_POD_LABEL = "kaito.sh/workspace"
"""KAITO labels its inference pods with their Workspace's name."""
UID = GPU_CLIENT_UID
"""vLLM's image has user ``vllm`` (2000); a high UID avoids host UIDs, and ``USER`` gives Python's getpass a name."""
WEIGHTS_MOUNT = "/models"
IMAGE_WEIGHTS = "/weights"
"""Where the weights image (docker/weights) holds the model's files."""
CACHE_MOUNT = "/cache"
SHM_SIZE = "2Gi"
"""vLLM's worker processes share tensors through /dev/shm (vLLM's Kubernetes guide mounts a memory emptyDir)."""
STARTUP_SECONDS = 1800
"""Model load, torch.compile and CUDA graph capture; weights read through blobfuse take longest."""
WAIT_FOR_WEIGHTS = ("import os, time\n"
                    "while not os.path.exists('{config}'):\n"
                    "    print('waiting for {config}: run the uploadWeights output', flush=True)\n"
                    "    time.sleep(30)")
"""The init container's script: blobfuse lists a new blob within its cache timeout, so polling finds it."""
LOAD_TEST = "llm-load-test"
LOAD_TEST_CONCURRENCY, LOAD_TEST_REQUESTS, LOAD_TEST_MAX_TOKENS = 16, 64, 128
LOAD_TEST_DEADLINE_SECONDS = 1800


@dataclass(frozen=True)
class VllmServer:
    """What vLLM serves and how: its ``vllm serve`` flags."""

    served_model_name: str
    """What clients send as ``model``."""
    max_model_len: int
    """Longest prompt plus answer, in tokens."""
    gpu_memory_utilization: float
    """Share of each GPU's memory vLLM may use."""
    dtype: str
    """``--dtype``: ``auto``, ``half`` or ``bfloat16``."""
    waiting_per_replica: int
    """Queued requests per replica KEDA aims for."""
    hub_model: str | None = None
    """A Hugging Face model id downloaded at pod start (with ``revision``); None: blob or image weights."""
    revision: str | None = None
    """The hub model's commit, for weights and tokenizer alike."""
    blob_folder: str | None = None
    """Blob weights: the model's folder in the weights container (the pod waits until it is uploaded)."""
    weights_image: pulumi.Input[str] | None = None
    """Image weights: the weights image by digest, whose files an init container copies to the pod's disk."""
    weights_gib: int = 0
    """Disk the weights take in the pod: a hub download's, or the image's copy."""


@dataclass(frozen=True)
class LlmServingArgs:
    pool: GpuPoolComponent
    """The GPU pool the server runs on: all of a node's GPUs per replica (tensor parallel), its VM size for KAITO."""
    server: VllmServer | str
    """vLLM with its flags, or the name of the KAITO preset the AI toolchain operator serves."""
    workspace: Workspace
    """The scenario's namespace."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs), which holds the load test."""
    image: pulumi.Input[str] | None = None
    """vllm: the server image, by digest."""
    weights: WorkloadVolumes | None = None
    """vllm with blob weights: the server's ServiceAccount and its read-only claim of the weights container."""
    scaling: GpuScaling | None = None
    """vllm: replica bounds and, with metrics, how KEDA reads the queue; None: one replica."""
    scrape: bool = False
    """Managed Prometheus scrapes the server (``monitoring.enabled``)."""
    wait_for: Sequence[pulumi.Resource] = field(default_factory=list)
    """The GPU operator release: the server needs ``nvidia.com/gpu``."""


class LlmServing(pulumi.ComponentResource):
    base_url: str
    """The OpenAI-compatible base URL inside the cluster."""
    served_model: str
    """What clients send as ``model``."""
    port_forward: str
    chat_example: str
    load_test_command: str

    def __init__(self, name: str, args: LlmServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:LlmServing", name, None, opts)  # frozen: components/__init__.py
        ns = args.workspace
        if isinstance(args.server, str):
            pods, port = self._kaito(name, args, args.server), KAITO_PORT
            self.served_model = args.server
        else:
            pods, port = self._vllm(name, args, args.server), VLLM_PORT
            self.served_model = args.server.served_model_name
        if args.scrape:
            # vLLM's container names its port; KAITO 0.6.0 declares 5000 without a name
            # (pkg/workspace/inference/preset_inferences.go containerPorts).
            _pod_monitor(f"{name}-podmonitor", ns.namespace, pods, port if isinstance(args.server, str) else "http",
                         self)
            allow_scraping(f"{name}-allow-scraping", f"{SERVER}-from-metrics", ns.namespace, pods, port, self)

        load_labels = {"app.kubernetes.io/name": LOAD_TEST}
        allow_ingress(f"{name}-allow-load-test", f"{SERVER}-from-load-test", ns.namespace, pods, port, self,
                      from_pods=load_labels)
        allow_egress_to_pods(f"{name}-load-test-allow-server", f"{LOAD_TEST}-to-{SERVER}", ns.namespace,
                             load_labels, [pods], port, self)
        self.base_url = f"http://{SERVER}.{ns.name}.svc.cluster.local/v1"
        load = container(LOAD_TEST, args.jobs_image, [
            "python", "llm_loadtest.py", "--url", self.base_url, "--model", self.served_model,
            "--concurrency", str(LOAD_TEST_CONCURRENCY), "--requests", str(LOAD_TEST_REQUESTS),
            "--max-tokens", str(LOAD_TEST_MAX_TOKENS)], resources("500m", "512Mi"))
        job_template(f"{name}-load-test", LOAD_TEST, ns.namespace, load_labels,
                     job_spec(pod_spec(None, [load]), load_labels, backoff_limit=1,
                              deadline_seconds=LOAD_TEST_DEADLINE_SECONDS,
                              fail_on_exit_codes={LOAD_TEST: [BAD_INPUT_EXIT_CODE]}), self)
        self.load_test_command = submit_command(ns.name, LOAD_TEST)
        self.port_forward = f"kubectl -n {ns.name} port-forward service/{SERVER} 8000:{SERVICE_PORT}"
        self.chat_example = (
            "curl -s http://localhost:8000/v1/chat/completions -H 'content-type: application/json' -d "
            f"'{{\"model\": \"{self.served_model}\", \"max_tokens\": 64, \"messages\": "
            "[{\"role\": \"user\", \"content\": \"What does a GPU node pool in AKS do?\"}]}'")
        self.register_outputs({"base_url": self.base_url})

    def _vllm(self, name: str, args: LlmServingArgs, st: VllmServer) -> dict[str, str]:
        ns, image = args.workspace, args.image
        assert image is not None, "vLLM runs the server image"
        labels = {"app.kubernetes.io/name": SERVER, "app.kubernetes.io/component": "inference"}
        gpus = args.pool.gpu.size.gpus
        # Compile and CUDA graph caches, and a hub download's weights.
        cache_gib = 8 + (st.weights_gib if st.hub_model else 0)
        volumes: list[dict[str, Any]] = [
            {"name": "cache", "emptyDir": {"sizeLimit": f"{cache_gib}Gi"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
        ]
        mounts: list[dict[str, Any]] = [
            {"name": "cache", "mountPath": CACHE_MOUNT},
            {"name": "shm", "mountPath": "/dev/shm"},  # noqa: S108 (the pod's shared memory)
        ]
        flags = ["--served-model-name", st.served_model_name, "--max-model-len", str(st.max_model_len),
                 "--gpu-memory-utilization", f"{st.gpu_memory_utilization:g}", "--dtype", st.dtype,
                 "--tensor-parallel-size", str(gpus), "--host", "0.0.0.0", "--port", str(VLLM_PORT)]  # noqa: S104 (vLLM serves its pod's Service)
        init: list[dict[str, Any]] = []
        if st.blob_folder is not None:
            assert args.weights is not None, "blob weights need the server's claim"
            (claim,) = args.weights.claims.values()
            volumes.append({"name": "weights", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
            weights_mount = {"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True}
            mounts.append(weights_mount)
            folder = f"{WEIGHTS_MOUNT}/{st.blob_folder}"
            model = ["--model", folder]
            # The weights arrive after the first deploy (uploadWeights): wait for them rather than crash-loop.
            init = [container("wait-for-weights", image, [
                "python3", "-c", WAIT_FOR_WEIGHTS.format(config=f"{folder}/config.json")],
                resources("100m", "128Mi"), [weights_mount])]
        elif st.weights_image is not None:
            # The node keeps the image, so a new pod here copies from local disk (seconds) instead of downloading.
            volumes.append({"name": "weights", "emptyDir": {"sizeLimit": f"{st.weights_gib}Gi"}})
            mounts.append({"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True})
            model = ["--model", WEIGHTS_MOUNT]
            init = [container("copy-weights", st.weights_image, ["cp", "-r", f"{IMAGE_WEIGHTS}/.", WEIGHTS_MOUNT],
                              resources("500m", "256Mi"), [{"name": "weights", "mountPath": WEIGHTS_MOUNT}],
                              tmp=False)]
        else:
            assert st.hub_model is not None, "vLLM needs blob, image or hub weights"
            assert st.revision is not None, "hub weights are pinned to a revision (settings check)"
            # The tokenizer has its own revision flag; unpinned it would follow the default branch.
            model = ["--model", st.hub_model, "--revision", st.revision, "--tokenizer-revision", st.revision]
            allow_https_to_internet(f"{name}-allow-hub", f"{SERVER}-to-hub", ns.namespace, labels, self)
        env = {
            "HOME": CACHE_MOUNT, "XDG_CACHE_HOME": CACHE_MOUNT, "HF_HOME": f"{CACHE_MOUNT}/huggingface",
            "USER": "vllm",
            # Blob and image weights are local files: never reach for the hub. No usage reports to vLLM's either.
            "HF_HUB_OFFLINE": "0" if st.hub_model else "1",
            "HF_HUB_DISABLE_TELEMETRY": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
        }
        probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 5}
        server = container(
            SERVER, image, None, _server_resources(args.pool), mounts, env,
            args=[*model, *flags],
            ports=[{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}],
            startupProbe={**probe, "failureThreshold": STARTUP_SECONDS // 10},
            readinessProbe={**probe, "failureThreshold": 3},
            livenessProbe={**probe, "periodSeconds": 30, "failureThreshold": 3},
        )
        pod = pod_spec(args.pool, [server], volumes=volumes, uid=UID,
                       service_account=args.weights.service_account if args.weights else None)
        if init:
            pod["initContainers"] = init
        scaling = args.scaling or GpuScaling(1, 1, st.waiting_per_replica)
        if scaling.scales and scaling.metrics is not None:  # scales: KEDA has metrics to read
            auth = trigger_authentication(f"{name}-keda-auth", ns.namespace, scaling.metrics, self)
            scaling = replace(scaling, auth=auth, query=queue_length_query)
        # Blob weights are uploaded after the first deploy, so that deploy cannot wait for a ready server.
        gpu_deployment(f"{name}-deployment", SERVER, ns.namespace, ns.name, labels, pod, scaling,
                       [*args.wait_for, args.pool], self, await_ready=st.blob_folder is None)
        core.v1.Service(
            f"{name}-service",
            metadata={"name": SERVER, "namespace": ns.namespace, "labels": labels},
            spec={"type": "ClusterIP", "selector": labels,
                  "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}]},
            opts=pulumi.ResourceOptions(parent=self))
        return labels

    def _kaito(self, name: str, args: LlmServingArgs, preset: str) -> dict[str, str]:
        """The Workspace selects the pool's own nodes (AKS labels them with the pool name), so KAITO finds them
        ready and provisions none; its webhook checks the preset against ``instanceType``."""
        pool, ns = args.pool, args.workspace
        KaitoWorkspace(
            f"{name}-workspace",
            metadata={"name": SERVER, "namespace": ns.namespace, "labels": {"app.kubernetes.io/name": SERVER}},
            resource={"instanceType": pool.nodes.vm_size, "count": 1,
                      "labelSelector": {"matchLabels": {POOL_LABEL: pool.pool_name}}},
            inference={"preset": {"name": preset}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.wait_for, args.pool]))
        pods = {KAITO_POD_LABEL: SERVER}
        # KAITO 0.6.0 pulls the preset's weights when its pod starts (an `oras pull` init container, from
        # mcr.microsoft.com and its *.data.mcr.microsoft.com CDN): the namespace's default deny would hold the pod
        # in Init forever. HTTPS to public addresses is as narrow as a NetworkPolicy gets: the CDN has no fixed
        # ranges, and the managed Cilium enforces FQDN rules only with Advanced Container Networking Services.
        allow_https_to_internet(f"{name}-allow-preset-pull", f"{SERVER}-to-registry", ns.namespace, pods, self)
        return pods


class KaitoWorkspace(pulumi.CustomResource):
    """A KAITO Workspace. Its fields sit at the top level, not under ``spec``, which
    ``apiextensions.CustomResource`` cannot express; the Kubernetes provider takes any object of a
    ``kubernetes:<group>/<version>:<Kind>`` type as it is given."""

    def __init__(self, name: str, metadata: dict[str, Any], resource: dict[str, Any], inference: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"kubernetes:{KAITO_API}:Workspace", name,
                         {"apiVersion": KAITO_API, "kind": "Workspace", "metadata": metadata,
                          "resource": resource, "inference": inference}, opts)


def _server_resources(pool: GpuPoolComponent) -> dict[str, Any]:
    """Every GPU of the node, and most of its CPUs and memory (the rest is the node's and its DaemonSets')."""
    size = pool.gpu.size
    return resources(str(max(1, size.vcpus * 3 // 4)), f"{size.memory_gib * 6 // 10}Gi", gpus=size.gpus)


def _pod_monitor(name: str, namespace: pulumi.Input[str], pods: dict[str, str], port: int | str,
                 parent: pulumi.Resource) -> apiextensions.CustomResource:
    """Managed Prometheus scrapes the server's ``/metrics`` (the add-on reads its own PodMonitor kind). ``port``: the
    container port's name, which every version of the add-on's PodMonitor CRD accepts, or, for a port without one,
    its number (``portNumber`` is only in recent CRDs; an older one drops it and the scrape falls back to every
    declared container port, which for KAITO's pods is that one)."""
    endpoint = {"port": port} if isinstance(port, str) else {"portNumber": port}
    return apiextensions.CustomResource(
        name, api_version=PODMONITOR_API, kind="PodMonitor",
        metadata={"name": f"{SERVER}-server", "namespace": namespace},
        spec={"selector": {"matchLabels": dict(pods)},
              "podMetricsEndpoints": [{**endpoint, "path": "/metrics", "interval": SCRAPE_INTERVAL}]},
        opts=pulumi.ResourceOptions(parent=parent))
