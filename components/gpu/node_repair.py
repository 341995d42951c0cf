"""GPU node repair: a CronJob that cordons and drains the nodes AKS's Node Problem Detector reports sick, so the
autoscaler replaces them (the job's own docstring, ``node_repair_job.py``, says how a run decides).

Why a CronJob of our own: AKS's node auto-repair reboots and reimages only NotReady nodes (node-auto-repair), and
the engines that act on node conditions are either archived (draino) or bring their own datastore and agents on
every node (NVIDIA's NVSentinel). The job needs the standard library and four kinds of API call, so it runs a pinned
Python image with its script in a ConfigMap: nothing to build, nothing on GPU nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi
from pulumi_kubernetes import core, rbac

from components.gpu import node_repair_job
from components.kubernetes.network_policy import allow_api_server
from components.kubernetes.pods import container, job_spec, job_template, pod_spec
from components.kubernetes.security import resources, workload_namespace
from components.monitoring.alert_rules import NPD_GPU_CONDITION_MINUTES, NPD_GPU_CONDITIONS

PYTHON_IMAGE = ("docker.io/library/python:3.12.12-slim-bookworm"
                "@sha256:593bd06efe90efa80dc4eee3948be7c0fde4134606dd40d8dd8dbcade98e669c")
"""The job's interpreter: the tag for people, its multi-arch index digest for the kubelet (which picks amd64)."""
SCRIPT = Path(node_repair_job.__file__)
"""The job's script, mounted from a ConfigMap."""
SCHEDULE = "*/5 * * * *"
"""Every 5 minutes: a sick node is cordoned 5-10 minutes after NPD sets its condition (``GRACE`` plus the wait
for the next run)."""


@dataclass(frozen=True)
class GpuNodeRepairArgs:
    namespace: str = "gpu-node-repair"
    """Namespace the program creates for the job."""
    conditions: tuple[str, ...] = NPD_GPU_CONDITIONS
    """Node conditions that make a node sick; the GpuNodeProblem alert watches the same ones."""
    grace_minutes: int = NPD_GPU_CONDITION_MINUTES
    """How long a condition must hold before the node is cordoned: as long as before the alert fires."""
    max_repairing: int = 1
    """Nodes held cordoned at once; more sick nodes wait (and alert) until one is replaced."""


class GpuNodeRepair(pulumi.ComponentResource):
    cron_job_name: str
    """The CronJob: ``kubectl create job --from=cronjob/NAME`` runs it now."""

    def __init__(self, name: str, args: GpuNodeRepairArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:GpuNodeRepair", name, None, opts)  # frozen: components/__init__.py
        child = pulumi.ResourceOptions(parent=self)
        ns = workload_namespace(f"{name}-ns", args.namespace, self).metadata["name"]
        labels = {"app.kubernetes.io/name": name}
        allow_api_server(f"{name}-api-server", "api-server", ns, labels, self)
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
                                   data={SCRIPT.name: SCRIPT.read_text(encoding="utf-8")}, opts=child)

        job = container(name, PYTHON_IMAGE, ["python", f"/script/{SCRIPT.name}"], resources("100m", "128Mi"),
                        mounts=[{"name": "script", "mountPath": "/script", "readOnly": True}], tmp=False,
                        env={"CONDITIONS": ",".join(args.conditions), "GRACE_SECONDS": str(args.grace_minutes * 60),
                             "MAX_REPAIRING": str(args.max_repairing), "PYTHONDONTWRITEBYTECODE": "1"})
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
