"""GPU node repair: a CronJob that cordons and drains the GPU nodes that report sick (AKS's Node Problem Detector,
the GPU operator's DCGM exporter, the GPU node gate), so the autoscaler replaces them, and only marks them where the
pool cannot add a node (the job's own docstring, ``node_repair_job.py``, says how a run decides).

Why a CronJob of our own: AKS's node auto-repair reboots and reimages only NotReady nodes (node-auto-repair), and
the engines that act on node conditions are either archived (draino) or bring their own datastore, cert-manager and
a standalone DCGM on every node (NVIDIA's NVSentinel: MongoDB or PostgreSQL, Kubernetes 1.34+). Upstream NPD as a
second detector would need a privileged DaemonSet reading the kernel log and would share AKS's condition names with
AKS's own NPD, which rewrites its conditions every few minutes; the DCGM exporter already runs on every GPU node and
publishes the XIDs and row-remap failures. The job needs the standard library and a few kinds of API call, so it
runs a pinned Python image with its scripts in a ConfigMap: nothing to build, nothing on GPU nodes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi_kubernetes import core, rbac

from components.azure.node_provisioning import GpuPoolComponent
from components.gpu import kube_api, node_repair_job
from components.kubernetes import charts
from components.kubernetes.network_policy import allow_api_server, allow_egress_to_namespace
from components.kubernetes.pods import container, job_spec, job_template, pod_spec
from components.kubernetes.security import resources, workload_namespace
from components.monitoring.alert_rules import NPD_GPU_CONDITION_MINUTES, NPD_GPU_CONDITIONS

SCRIPTS = (Path(node_repair_job.__file__), Path(kube_api.__file__))
"""The job's script and the API client it imports, mounted side by side from a ConfigMap."""
EXPORTER = {"app": "nvidia-dcgm-exporter"}
"""The GPU operator's DCGM exporter pods (its DaemonSet's label): the job reads each sick-looking node's page."""
HOLD_TIMEOUT_MINUTES = 60
"""How long a cordoned node may wait for the autoscaler to replace it before it stops counting against its pool's
repair limit (and the alert asks for a person)."""
SCHEDULE = "*/5 * * * *"
"""Every 5 minutes: a sick node is cordoned 5-10 minutes after NPD sets its condition (``GRACE`` plus the wait
for the next run)."""


def repair_pools(pools: Sequence[GpuPoolComponent]) -> dict[str, dict[str, Any]]:
    """What the job reads of each GPU pool (``node_repair_job.Pool``): its node label, bounds and GPUs per node."""
    return {p.pool_name: {"label": next(iter(p.node_selector)), "min_count": p.nodes.min_count,
                          "max_count": p.nodes.max_count, "gpus": p.gpu.size.gpus} for p in pools}


@dataclass(frozen=True)
class GpuNodeRepairArgs:
    pools: Sequence[GpuPoolComponent]
    """The cluster's GPU pools: a node of one that cannot add a node is marked, not cordoned."""
    exporter_namespace: pulumi.Input[str] = "gpu-operator"
    """The GPU operator's namespace, where its DCGM exporter runs."""
    namespace: str = "gpu-node-repair"
    """Namespace the program creates for the job."""
    conditions: tuple[str, ...] = NPD_GPU_CONDITIONS
    """Node conditions that make a node sick; the GpuNodeProblem alert watches the same ones."""
    grace_minutes: int = NPD_GPU_CONDITION_MINUTES
    """How long a condition must hold before the node is cordoned: as long as before the alert fires."""
    max_repairing: int = 1
    """Nodes of one pool held cordoned at once; more sick nodes wait (and alert) until one is replaced."""


class GpuNodeRepair(pulumi.ComponentResource):
    cron_job_name: str
    """The CronJob: ``kubectl create job --from=cronjob/NAME`` runs it now."""

    def __init__(self, name: str, args: GpuNodeRepairArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:GpuNodeRepair", name, None, opts)  # frozen: components/__init__.py
        child = pulumi.ResourceOptions(parent=self)
        ns = workload_namespace(f"{name}-ns", args.namespace, self).metadata["name"]
        labels = {"app.kubernetes.io/name": name}
        allow_api_server(f"{name}-api-server", "api-server", ns, labels, self)
        allow_egress_to_namespace(f"{name}-dcgm-exporter", "dcgm-exporter", ns, labels, args.exporter_namespace,
                                  EXPORTER, node_repair_job.EXPORTER_PORT, self)
        account = core.v1.ServiceAccount(f"{name}-sa", metadata={"name": name, "namespace": ns}, opts=child)
        # Cluster-wide by nature: nodes are not namespaced, and a sick node's pods are in any namespace.
        role = rbac.v1.ClusterRole(f"{name}-role", metadata={"name": name}, rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        ], opts=child)
        binding = rbac.v1.ClusterRoleBinding(
            f"{name}-binding", metadata={"name": name},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata["name"]},
            subjects=[{"kind": "ServiceAccount", "name": account.metadata["name"], "namespace": ns}], opts=child)
        script = core.v1.ConfigMap(f"{name}-script", metadata={"name": f"{name}-script", "namespace": ns},
                                   data={p.name: p.read_text(encoding="utf-8") for p in SCRIPTS}, opts=child)

        job = container(name, charts.PYTHON_IMAGE, ["python", f"/script/{SCRIPTS[0].name}"], resources("100m", "128Mi"),
                        mounts=[{"name": "script", "mountPath": "/script", "readOnly": True}], tmp=False,
                        env={"CONDITIONS": ",".join(args.conditions), "GRACE_SECONDS": str(args.grace_minutes * 60),
                             "MAX_REPAIRING": str(args.max_repairing),
                             "HOLD_TIMEOUT_SECONDS": str(HOLD_TIMEOUT_MINUTES * 60),
                             "POOLS": json.dumps(repair_pools(args.pools), sort_keys=True),
                             "PYTHONDONTWRITEBYTECODE": "1"})
        pod = {**pod_spec(None, [job], volumes=[{"name": "script", "configMap": {"name": script.metadata["name"]}}],
                          tmp=False, service_account=account.metadata["name"]),
               # Unlike workloads, this pod is an API client: it needs its service account's token.
               "automountServiceAccountToken": True}
        # No GPU pool: the pod runs on the untainted system or CPU nodes, never on the nodes it drains.
        job_template(f"{name}-job", name, ns, labels, job_spec(pod, labels, backoff_limit=1, deadline_seconds=600),
                     # The binding: a run before it exists is refused every call (an edge Pulumi cannot see).
                     self, schedule=SCHEDULE, depends_on=[binding],
                     annotations={"checkov.io/skip1": "CKV_K8S_38=an API client: it lists nodes and evicts pods"})
        self.cron_job_name = name
        self.register_outputs({"cron_job_name": self.cron_job_name})
