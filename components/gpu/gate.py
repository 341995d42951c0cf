"""The GPU node gate: a new GPU node takes workloads only after a short check of its own GPUs has passed.

A Deployment on the system nodes (``node_gate_job.py`` says what each pass does) holds every new node of a GPU pool
under ``GATE_TAINT`` until a Job on it, running ``docker/jobs/gpu_check.py``, has found each GPU computing at a
fair share of its datasheet rate, its memory sound and, on InfiniBand sizes, every port up at its speed. A node that
fails stays tainted and alerts (GpuNodeNotAdmitted); GPU node repair replaces it where its pool can grow. The same
controller moves a node to the compiled driver when NVIDIA has not built the precompiled one for its kernel.

Why our own controller: kubernetes-sigs/node-readiness-controller (v0.5.0) removes a taint once node conditions
hold, but it only accepts taint keys under ``readiness.k8s.io/``, which the cluster autoscaler does not know as a
startup taint (it would scale up again for the pods a gated node holds back, node-readiness-controller#279), it
runs no check itself, and AKS's ``nodeInitializationTaints`` is a preview settable only on the cluster's own pool
list (AKS use-node-taints). NVIDIA's NVSentinel gates new nodes only in unreleased code and brings a datastore.
The GPU operator's validator does not withdraw ``nvidia.com/gpu`` when its CUDA pod fails (gpu-operator v26.7.0
cmd/nvidia-validator/main.go: the resource is checked first), so it gates nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi_kubernetes import apps, core, rbac

from components.azure.node_provisioning import GpuPoolComponent
from components.gpu import kube_api, node_gate_job
from components.kubernetes import charts
from components.kubernetes.network_policy import allow_api_server
from components.kubernetes.pods import container, pod_spec
from components.kubernetes.security import resources, workload_namespace
from components.vocabulary import GpuNodes, SharingMode

GATE_TAINT_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/gpu-check"
"""The cluster autoscaler treats a node tainted under this prefix as not ready yet, not as a node that cannot take
the pods (kubernetes/autoscaler cluster-autoscaler utils/taints/taints.go StartupTaintPrefix, CA 1.29 on; FAQ "How
can I prevent Cluster Autoscaler from scaling up when a node is still initializing")."""
GATE_TAINT = {"key": GATE_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}
GATE_TOLERATION = {"key": GATE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
"""What the GPU software a gated node needs before its check tolerates: the operator's and NFD's DaemonSets, the
Network Operator's, the image pull-ahead, the check itself."""
FLOOR_FRACTION = 0.25
"""Share of the datasheet's dense 16-bit rate a GPU must reach in the check's matrix multiply. A healthy H100 reaches
0.79 (778-783 TFLOPS bf16, docs/results/gpu-check-h100.json); a 70 W T4 holds well under its 65 TFLOPS datasheet
figure once it reaches its power limit, so the floor sits at a quarter: a GPU below it is throttled or broken (a
failed clock, a thermal fault), while a healthy T4's power-capped rate stays above it."""
CHECK_SECONDS = 60
"""The check's time on a node once its image is there: about 6 s on an H100 (docs/results/gpu-check-h100.json),
with room for eight GPUs and slower ones."""
CHECK_RESOURCES = ("2", "8Gi")
"""The check's CPU and memory (torch and a CUDA context per GPU): within what every GPU size leaves pods."""
INTERVAL_SECONDS = 10
FALLBACK_MINUTES = 5
"""How long a node's precompiled driver may fail to pull before the node moves to the compiled driver."""
SCRIPTS = (Path(node_gate_job.__file__), Path(kube_api.__file__))
HEARTBEAT_PROBE = {
    "exec": {"command": ["python", "-c", "import os, sys, time; "
                         f"sys.exit(time.time() - os.path.getmtime({node_gate_job.HEARTBEAT!r}) > 120)"]},
    "initialDelaySeconds": 30, "periodSeconds": 30}
"""Ready once a pass reached the API server, restarted when none has for two minutes."""


def check_args(gpu: GpuNodes) -> tuple[str, int, list[str]]:
    """(the resource and how many the check asks for, its arguments) for a pool's nodes: every GPU of an unshared
    node; one share of a shared or MIG one (the device plugin refuses more than one share), its rate scaled to what
    one share computes (an MPS share is a replica's part of the GPU, a MIG instance its slices' part of seven)."""
    size = gpu.size
    floor = size.dense_tflops * FLOOR_FRACTION
    if gpu.sharing == SharingMode.MIG and gpu.mig_profile:
        request, floor = 1, floor * int(gpu.mig_profile[3]) / 7
    elif gpu.sharing == SharingMode.MPS:
        request, floor = 1, floor / gpu.replicas
    elif gpu.sharing.has_replicas:
        request = 1
    else:
        request = size.gpus
    args = ["python", "gpu_check.py", "--gpus", str(request), "--min-tflops", f"{floor:.0f}",
            "--dtype", "bf16" if size.compute_capability >= 8.0 else "fp16"]
    if size.infiniband and request == size.gpus:
        args += ["--ib-ports", str(size.gpus), "--ib-rate-gbps", str(size.infiniband_gbps)]
    return "nvidia.com/gpu", request, args


def gate_pools(pools: Sequence[GpuPoolComponent]) -> dict[str, dict[str, Any]]:
    """What the controller reads of each GPU pool: how to find its nodes, what the check asks for and is given."""
    found = {}
    for p in pools:
        resource, request, args = check_args(p.gpu)
        found[p.pool_name] = {"label": next(iter(p.node_selector)), "resource": resource, "request": request,
                              "tolerations": [*p.tolerations, GATE_TOLERATION], "args": args}
    return found


@dataclass(frozen=True)
class GpuNodeGateArgs:
    pools: Sequence[GpuPoolComponent]
    """The GPU pools whose new nodes are checked."""
    check_image: pulumi.Input[str]
    """The project's jobs image (``gpu_check.py`` and torch), by digest."""
    operator_namespace: pulumi.Input[str] = "gpu-operator"
    """Where the GPU operator's driver pods run (the precompiled driver's fallback reads them)."""
    namespace: str = "gpu-node-gate"
    """Namespace the program creates for the controller and the checks."""


class GpuNodeGate(pulumi.ComponentResource):
    deployment: pulumi.CustomResource
    """What GPU workloads wait for: the controller, ready to hold a new node before its GPUs are advertised."""

    def __init__(self, name: str, args: GpuNodeGateArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:GpuNodeGate", name, None, opts)  # frozen: components/__init__.py
        child = pulumi.ResourceOptions(parent=self)
        ns = workload_namespace(f"{name}-ns", args.namespace, self).metadata["name"]
        labels = {"app.kubernetes.io/name": name}
        allow_api_server(f"{name}-api-server", "api-server", ns, labels, self)
        account = core.v1.ServiceAccount(f"{name}-sa", metadata={"name": name, "namespace": ns}, opts=child)
        subject = [{"kind": "ServiceAccount", "name": account.metadata["name"], "namespace": ns}]
        # Nodes are cluster-wide; the driver pods it reads are the operator's; its check Jobs are its own.
        cluster_role = rbac.v1.ClusterRole(f"{name}-role", metadata={"name": name}, rules=[
            # get: a taint patch refused as a conflict is made again on the node read afresh.
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        ], opts=child)
        cluster_binding = rbac.v1.ClusterRoleBinding(
            f"{name}-binding", metadata={"name": name}, subjects=subject,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                      "name": cluster_role.metadata["name"]}, opts=child)
        role = rbac.v1.Role(f"{name}-jobs-role", metadata={"name": f"{name}-jobs", "namespace": ns}, rules=[
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "create", "delete"]},
        ], opts=child)
        binding = rbac.v1.RoleBinding(
            f"{name}-jobs-binding", metadata={"name": f"{name}-jobs", "namespace": ns}, subjects=subject,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata["name"]},
            opts=child)
        script = core.v1.ConfigMap(f"{name}-script", metadata={"name": f"{name}-script", "namespace": ns},
                                   data={p.name: p.read_text(encoding="utf-8") for p in SCRIPTS}, opts=child)
        # The controller sets each node's arguments and adds its GPUs to the limits; the check's last line, its
        # JSON report, is the failed container's termination message the controller reads.
        check = container("gpu-check", args.check_image, None, resources(*CHECK_RESOURCES),
                          terminationMessagePolicy="FallbackToLogsOnError")
        check_pod = pod_spec(None, [check])
        controller = container(
            name, charts.PYTHON_IMAGE, ["python", f"/script/{SCRIPTS[0].name}"], resources("50m", "96Mi"),
            mounts=[{"name": "script", "mountPath": "/script", "readOnly": True}],
            livenessProbe=HEARTBEAT_PROBE, readinessProbe=HEARTBEAT_PROBE,
            env={"NAMESPACE": args.namespace, "POOLS": json.dumps(gate_pools(args.pools), sort_keys=True),
                 "TAINT": json.dumps(GATE_TAINT), "INTERVAL_SECONDS": str(INTERVAL_SECONDS),
                 "FALLBACK_SECONDS": str(FALLBACK_MINUTES * 60), "PYTHONDONTWRITEBYTECODE": "1",
                 "CHECK_POD": pulumi.Output.json_dumps(check_pod), "OPERATOR_NAMESPACE": args.operator_namespace})
        pod = {**pod_spec(None, [controller], volumes=[{"name": "script", "configMap": {
            "name": script.metadata["name"]}}], service_account=account.metadata["name"]),
               # Unlike workloads, this pod is an API client: it needs its service account's token.
               "automountServiceAccountToken": True}
        self.deployment = apps.v1.Deployment(
            f"{name}-controller",
            metadata={"name": name, "namespace": ns, "labels": labels,
                      "annotations": {"checkov.io/skip1": "CKV_K8S_38=an API client: it taints nodes and runs "
                                                          "their checks"}},
            spec={"replicas": 1, "selector": {"matchLabels": labels},
                  # One controller at a time: two would start the same node's check twice.
                  "strategy": {"type": "Recreate"},
                  "template": {"metadata": {"labels": labels}, "spec": pod}},
            # The bindings: a controller before them is refused every call (an edge Pulumi cannot see).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_binding, binding]))
        self.register_outputs({"deployment": self.deployment.id})

