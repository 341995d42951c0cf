"""Kueue: Job fan-outs wait in a queue for GPU capacity instead of flooding the scheduler and the autoscaler.

A ResourceFlavor per GPU pool (its agent pool label and taints), one ClusterQueue whose quota is what the pools
hold at their maximum size (nodes x GPUs or GPU shares, and the CPU and memory their nodes leave pods), and a
LocalQueue in each namespace that submits Jobs. A Job labelled ``kueue.x-k8s.io/queue-name`` is created suspended
and started when its pods fit the quota; the cluster autoscaler then adds the nodes. An Indexed Job larger than the
quota is admitted at the parallelism that fits (partial admission) and works through its indexes as pods finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import yaml
from pulumi_kubernetes import apiextensions

from components.azure.node_capacity import workload_capacity
from components.azure.node_provisioning import GpuPoolComponent
from components.gpu.network_operator import RDMA_HCA_MAX, RDMA_RESOURCE
from components.kubernetes import charts, helm
from components.kubernetes.scheduling import taint_fields
from components.kubernetes.security import RESTRICTED_NAMESPACE_LABELS, namespace
from components.kubernetes.workspace import Workspace

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""On a Job: which LocalQueue admits it."""
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
"""On a Job: the fewest pods Kueue may start it with (partial admission)."""
CLUSTER_QUEUE = "gpu"
LOCAL_QUEUE = "gpu-jobs"
NAMESPACE = "kueue-system"
"""Where the chart's README installs it."""


@dataclass(frozen=True)
class JobQueue:
    """Where a scenario's Jobs queue."""

    name: str
    """The LocalQueue in the Jobs' namespace."""
    ready: pulumi.Resource
    """Kueue and its queues: a queued Job created before Kueue's admission webhook answers is refused."""

    @property
    def labels(self) -> dict[str, str]:
        return {QUEUE_LABEL: self.name}


def queued(queue: JobQueue | None, partial: bool = False, labels: Mapping[str, str] | None = None
           ) -> dict[str, Any]:
    """``job_template``'s arguments for Jobs with ``labels`` that go to ``queue``: its label, with ``partial``
    Kueue's partial admission (an Indexed Job), and a dependency on Kueue, so a destroy deletes the template and
    the Jobs submitted from it (their owner) while Kueue still runs to release their Workloads."""
    if queue is None:
        return {"job_labels": dict(labels or {})}
    return {"job_labels": {**(labels or {}), **queue.labels},
            "job_annotations": partial_admission(queue) if partial else {}, "depends_on": [queue.ready]}


def queue_labels(queue: JobQueue | None) -> dict[str, str]:
    """The labels that put a Job in ``queue`` (none without a queue)."""
    return queue.labels if queue else {}


def partial_admission(queue: JobQueue | None) -> dict[str, str]:
    """On an Indexed Job: Kueue may start it with fewer pods than its parallelism when that is what fits."""
    return {MIN_PARALLELISM: "1"} if queue else {}


ALL_OR_NOTHING = {
    # A run whose pods are not all Ready within this time (a scale from zero, the drivers built on new nodes) is
    # evicted and requeued, its quota freed, instead of holding half the GPUs while the other half never comes.
    "timeout": "30m",
    # One admission at a time until its pods are Ready: two runs never each get half of the nodes.
    "blockAdmission": True,
    "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5, "backoffBaseSeconds": 60,
                          "backoffMaxSeconds": 3600},
}
"""Kueue's waitForPodsReady (kueue.sigs.k8s.io/docs/tasks/manage/setup_wait_for_pods_ready): all-or-nothing
admission for runs that only work whole."""
INFINIBAND_PODS_READY = "60m"
"""The timeout where runs take InfiniBand nodes from zero: such a node also builds the DOCA (OFED) driver the GPU
driver waits for before it loads nvidia-peermem (gpu-driver-container precompiled/nvidia-driver waits for MOFED),
about 20 minutes cold by the first-GPU-pod estimate (the distributed-training stack's timeline.md), which 30 would
cut close and requeue."""


def manager_config(namespaces: Sequence[str], job_sets: bool = False, rdma: bool = False) -> dict[str, Any]:
    """The chart's controller configuration with these changes. Kueue manages only batch Jobs (the chart also
    turns on Pods, Deployments and StatefulSets, whose webhooks then refuse every new pod while Kueue is down),
    and JobSets where a scenario runs them, with all-or-nothing admission; and only in ``namespaces``: its webhooks
    skip the GPU operator's and every other namespace."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": ["batch/job", *(["jobset.x-k8s.io/jobset"] if job_sets else [])]},
        "managedJobsNamespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]},
    }
    if job_sets:
        config["waitForPodsReady"] = {**ALL_OR_NOTHING, **({"timeout": INFINIBAND_PODS_READY} if rdma else {})}
    return config


def kueue_values(namespaces: Sequence[str], job_sets: bool = False, rdma: bool = False) -> dict[str, Any]:
    """The release image (the chart in git names a staging build), pulled once per node; ``manager_config``."""
    return {
        "controllerManager": {"manager": {"image": {
            "repository": charts.KUEUE_IMAGE, "tag": f"v{charts.KUEUE.version}", "pullPolicy": "IfNotPresent"}}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(namespaces, job_sets, rdma),
                                                                        sort_keys=False)},
    }


def flavor_quota(pool: GpuPoolComponent, rdma: bool = False) -> dict[str, str]:
    """What a pool's pods can use at its maximum size: the ClusterQueue's nominal quota for its flavor. CPU and
    memory are what each node leaves pods after AKS's reservations and the DaemonSets (node_capacity): counting the
    VM size instead, Kueue would admit a Job that then stays Pending. With ``rdma`` the RDMA devices too: what the
    device plugin offers on an InfiniBand node, none elsewhere (a run asking for them fits only there)."""
    nodes, size = pool.nodes.max_count, pool.gpu.size
    per_node = workload_capacity(size.vcpus, size.memory_gib)
    quota = {"cpu": f"{nodes * per_node.cpu_m}m", "memory": f"{nodes * per_node.memory_mi}Mi",
             "nvidia.com/gpu": str(nodes * pool.gpu.per_node)}
    if rdma:
        quota[RDMA_RESOURCE] = str(nodes * RDMA_HCA_MAX if size.infiniband else 0)
    return quota


@dataclass(frozen=True)
class KueueArgs:
    pools: Sequence[GpuPoolComponent]
    """The GPU pools Jobs may run on: a flavor each."""
    job_sets: pulumi.Resource | None = None
    """The JobSet controller: JobSets are queued too, each admitted whole (``ALL_OR_NOTHING``), and Kueue starts
    after JobSet's CRD exists (it turns on an integration only for the CRDs it finds)."""
    rdma: bool = False
    """The quota counts RDMA devices (the Network Operator runs)."""
    workspaces: Sequence[Workspace] = ()
    """The namespaces whose Jobs the ClusterQueue admits, each with a LocalQueue. Kueue outlives them: a Workload
    keeps Kueue's finalizer until Kueue's controller removes it (kueue v0.19.2
    pkg/controller/jobframework/utils.go:273, reconciler.go:440-460), so a namespace deleted after Kueue would hang
    in Terminating."""


class Kueue(pulumi.ComponentResource):
    queue: JobQueue
    """The LocalQueue Jobs label themselves with, in every namespace of ``namespaces``."""

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:autoscaling:Kueue", name, None, opts)  # frozen: components/__init__.py
        # Restricted, but without a default-deny policy: the API server calls Kueue's admission webhook.
        ns = namespace(f"{name}-ns", NAMESPACE, RESTRICTED_NAMESPACE_LABELS, self)
        namespaces = [w.name for w in args.workspaces]
        release = helm.release(f"{name}-release", "kueue", charts.KUEUE, ns.metadata["name"],
                               kueue_values(namespaces, args.job_sets is not None, args.rdma), self,
                               depends_on=[*args.workspaces, *([args.job_sets] if args.job_sets else [])])
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[release])
        flavors = []
        for pool in args.pools:
            flavor = apiextensions.CustomResource(
                f"{name}-flavor-{pool.pool_name}", api_version=KUEUE_API, kind="ResourceFlavor",
                metadata={"name": pool.pool_name},
                spec={"nodeLabels": dict(pool.node_selector),
                      # Only Jobs that tolerate the pool's taints are given its capacity.
                      "nodeTaints": [taint_fields(t) for t in pool.taints]},
                opts=after_release)
            flavors.append((pool, flavor))
        cluster_queue = apiextensions.CustomResource(
            f"{name}-cluster-queue", api_version=KUEUE_API, kind="ClusterQueue",
            metadata={"name": CLUSTER_QUEUE},
            spec={
                "namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]},
                # A Job that does not fit does not block smaller ones behind it.
                "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [{
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu", *([RDMA_RESOURCE] if args.rdma else [])],
                    "flavors": [{"name": pool.pool_name, "resources": [
                        {"name": resource, "nominalQuota": quota}
                        for resource, quota in flavor_quota(pool, args.rdma).items()]} for pool, _ in flavors],
                }],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release, *(f for _, f in flavors)]))
        for workspace in args.workspaces:
            apiextensions.CustomResource(
                f"{name}-local-queue-{workspace.name}", api_version=KUEUE_API, kind="LocalQueue",
                metadata={"name": LOCAL_QUEUE, "namespace": workspace.namespace},
                spec={"clusterQueue": CLUSTER_QUEUE},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_queue]))
        self.queue = JobQueue(LOCAL_QUEUE, self)
        self.register_outputs({})
