"""JobSet (kubernetes-sigs/jobset, pinned in charts.py): the engine that runs one distributed training as a group of
Jobs, one per node, started together, restarted together when one fails, finished when all succeed.

A run is a ``torchrun`` per node. JobSet gives every pod a stable name under a headless Service, so the first pod
(``<jobset>-<replicated job>-0-0.<jobset>.<namespace>.svc.cluster.local``) is the rendezvous host, and the pods
learn their node rank from the Job index JobSet labels them with. With Kueue (which knows JobSets) a run is admitted
whole or not at all.

Runs are started on demand: the JobSet manifest is kept in a ConfigMap, and ``submit_command`` creates it, so the
expensive nodes exist only while a run asks for them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_kubernetes import core

from components.kubernetes import charts, helm
from components.kubernetes.pods import fail_job_rules
from components.kubernetes.security import RESTRICTED_NAMESPACE_LABELS, namespace

API_VERSION = "jobset.x-k8s.io/v1alpha2"
NAMESPACE = "jobset-system"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
"""On each pod: the index of its Job within the replicated job (the node rank of a run)."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RENDEZVOUS_PORT = 29500
"""torchrun's c10d rendezvous on the first pod."""
MANIFEST_KEY = "jobset.json"
"""The manifest as JSON, which kubectl reads as it reads YAML and the policy pack parses with the standard library."""
OWNER_UID = "OWNER_UID"
"""Placeholder of the owner claim's uid in a run template; the submit command replaces it."""


def manifest_config_map(run_name: str) -> str:
    """The ConfigMap a run template keeps the JobSet ``run_name``'s manifest in (under ``MANIFEST_KEY``)."""
    return f"{run_name}-jobset"


def jobset_values() -> dict[str, Any]:
    """The release image (the chart in git names a staging build), pulled once per node."""
    return {"image": {"repository": charts.JOBSET_IMAGE, "tag": f"v{charts.JOBSET.version}",
                      "pullPolicy": "IfNotPresent"}}


@dataclass(frozen=True)
class JobSetControllerArgs:
    namespace: str = NAMESPACE
    """Namespace the program creates for the controller."""


class JobSetController(pulumi.ComponentResource):
    """The JobSet controller and its CRD, in its own restricted namespace."""

    release: pulumi.CustomResource

    def __init__(self, name: str, args: JobSetControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:training:JobSetController", name, None, opts)  # frozen: components/__init__.py
        ns = namespace(f"{name}-ns", args.namespace, RESTRICTED_NAMESPACE_LABELS, self)
        self.release = helm.release(f"{name}-release", "jobset", charts.JOBSET, ns.metadata["name"], jobset_values(),
                                    self)
        self.register_outputs({"release": self.release.id})


CLUSTER_DOMAIN = "cluster.local"
"""AKS's cluster DNS domain (it offers no other)."""


def rendezvous_host(jobset: str, replicated_job: str, namespace_name: str) -> str:
    """The first pod's fully qualified name: JobSet's pod hostname under the headless Service named after the JobSet.

    torchrun hosts the rendezvous store on the pod whose own name matches the endpoint, and without DNS it knows only
    the canonical name the kubelet writes into the pod's /etc/hosts, which is this one
    (torch/distributed/elastic/rendezvous/utils.py ``_matches_machine_hostname``). A shorter name matches only once
    the headless Service's DNS record answers, a race every pod may lose, and then none hosts the store."""
    return f"{jobset}-{replicated_job}-0-0.{jobset}.{namespace_name}.svc.{CLUSTER_DOMAIN}"


CHECKED_LAUNCH = ("python", "launch.py")
"""The jobs image's launcher (docker/jobs/launch.py): it runs the script's own checks (arguments, input) in the
container's main process and only then becomes torchrun, so what it refuses is the container's exit status, which
a pod failure policy sees. torchrun reports a worker's exit status as its own 1 (a ``ChildFailedError``)."""


def torchrun(jobset: str, replicated_job: str, namespace_name: str, nodes: int, gpus_per_node: int,
             script: Sequence[str], checked: bool = False) -> list[str]:
    """``torchrun`` across ``nodes`` pods of ``gpus_per_node`` processes each, rendezvous on the first pod;
    ``checked``: through ``CHECKED_LAUNCH``.

    No torchrun restarts: a lost pod fails its Job and JobSet restarts the whole group, every pod then resuming
    from the newest checkpoint."""
    return [*(CHECKED_LAUNCH if checked else ()), "torchrun", f"--nnodes={nodes}", f"--nproc-per-node={gpus_per_node}",
            "--max-restarts=0", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rendezvous_host(jobset, replicated_job, namespace_name)}:{RENDEZVOUS_PORT}",
            f"--rdzv-id={jobset}", *script]


PERMANENT_FAILURE_RULE = {"name": "PermanentFailureFailsTheRun", "action": "FailJobSet",
                          "onJobFailureReasons": ["PodFailurePolicy"]}
"""JobSet ``failurePolicy`` rule: a Job its pod failure policy failed (``FailJob`` on an exit code in
``RunSpec.fail_on_exit_codes``; the Job's failure reason is then ``PodFailurePolicy``, kubernetes batch/v1
``JobReasonPodFailurePolicy``) fails the whole run instead of restarting the group (jobset v0.12.0
api/jobset/v1alpha2 ``FailurePolicyRule``)."""


@dataclass(frozen=True)
class RunSpec:
    """One distributed run: ``nodes`` pods of ``pod`` (each a whole node's GPUs), started and restarted together."""

    name: str
    """The JobSet's name (and its headless Service's)."""
    replicated_job: str
    """The name of its one group of Jobs."""
    nodes: int
    pod: Mapping[str, Any]
    """The pod spec every node's pod runs (its torchrun command included)."""
    labels: Mapping[str, str]
    """Labels of the JobSet and its pods (Kueue's queue label among the JobSet's)."""
    max_restarts: int = 3
    """Whole-group restarts after a pod fails (a lost node, an evicted pod) before the run fails."""
    deadline_seconds: int | None = None
    """Longest a run may take, restarts included."""
    fail_on_exit_codes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """Container name → exit codes that no restart can mend: a pod exiting with one fails its Job at once and the
    run with it (``PERMANENT_FAILURE_RULE``), instead of ``max_restarts`` restarts of every node."""


def jobset_manifest(run: RunSpec, namespace_name: str, queue_labels: Mapping[str, str] | None = None,
                    owner_claim: pulumi.Input[str] | None = None) -> dict[str, Any]:
    """The run as a JobSet; ``owner_claim``: the claim it is owned by (``RunTemplateArgs.owner_claim``), its uid
    ``OWNER_UID`` until the submit command fills it in."""
    pod_labels = dict(run.labels)
    job = {
        "parallelism": 1, "completions": 1,
        # JobSet restarts the group; a Job retrying its own pod would wait alone while the others hang in NCCL.
        "backoffLimit": 0,
        **({"activeDeadlineSeconds": run.deadline_seconds} if run.deadline_seconds else {}),
        **({"podFailurePolicy": {"rules": fail_job_rules(run.fail_on_exit_codes)}} if run.fail_on_exit_codes else {}),
        # Never: JobSet's webhook would default OnFailure, under which the kubelet restarts a failed torchrun in
        # place, alone, before its Job fails; a pod failure policy also requires Never (batch/v1 JobSpec).
        "template": {"metadata": {"labels": pod_labels}, "spec": {**run.pod, "restartPolicy": "Never"}},
    }
    rules = [PERMANENT_FAILURE_RULE] if run.fail_on_exit_codes else []
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "subdomain": run.name},
        "failurePolicy": {"maxRestarts": run.max_restarts, **({"rules": rules} if rules else {})},
        "successPolicy": {"operator": "All"},
        "replicatedJobs": [{"name": run.replicated_job, "replicas": run.nodes, "template": {"spec": job}}],
    }
    # Blocking: a foreground deletion of the claim (Pulumi's default) keeps the claim's foregroundDeletion finalizer
    # until the runs are gone. Without it the garbage collector may drop that finalizer first, then find the claim
    # still there (its protection finalizer, held by the pods of a run that mounts it) and leave the runs be:
    # neither ever goes (kubernetes pkg/controller/garbagecollector: processDeletingDependentsItem,
    # classifyReferences; seen on the test control plane in two destroys of eleven). AKS does not enable
    # OwnerReferencesPermissionEnforcement, so whoever may create the run may set it (learn.microsoft.com/azure/aks/faq,
    # admission controllers).
    owners = [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": owner_claim, "uid": OWNER_UID,
               "blockOwnerDeletion": True}]
    return {"apiVersion": API_VERSION, "kind": "JobSet",
            "metadata": {"name": run.name, "namespace": namespace_name,
                         "labels": {**run.labels, **(queue_labels or {})},
                         **({"ownerReferences": owners} if owner_claim is not None else {})},
            "spec": spec}


@dataclass(frozen=True)
class RunTemplateArgs:
    manifest: pulumi.Input[dict[str, Any]]
    """The JobSet (``jobset_manifest``)."""
    namespace: str
    """Its namespace (the ConfigMap's too)."""
    run_name: str
    """The JobSet's name."""
    after: tuple[pulumi.Resource, ...] = ()
    """What the manifest must be created after and deleted before: its namespace (named as text in it), the
    JobSet controller, Kueue (whose Workloads the runs made from it hold)."""
    owner_claim: pulumi.Input[str] | None = None
    """The PersistentVolumeClaim each run is owned by, blocking: deleting it in the foreground (``pulumi destroy``,
    ``kubectl delete pvc --cascade=foreground``) deletes the runs first and waits for them. Without an owner, the
    finished pods of a run that mounts the claim would hold its deletion for good (the claim's protection counts
    every scheduled pod that names it, kubernetes pkg/controller/volume/pvcprotection podUsesPVCForDeletion: found
    on the test control plane). A background deletion (kubectl's default) still waits, while a run's pods mount the
    claim, until the runs are deleted: the collector takes a dependent only once its owner is gone. Kueue, which
    lets a deleted run's Workload go, must outlive the claim."""


class RunTemplate(pulumi.ComponentResource):
    """A JobSet kept as a ConfigMap manifest, created on demand by ``submit_command``."""

    submit_command: pulumi.Input[str]
    """Deletes the previous run of the name (its checkpoints stay) and creates the JobSet."""

    def __init__(self, name: str, args: RunTemplateArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:training:RunTemplate", name, None, opts)  # frozen: components/__init__.py
        manifest, namespace_name, run_name = args.manifest, args.namespace, args.run_name
        config_map = manifest_config_map(run_name)
        core.v1.ConfigMap(
            f"{name}-manifest",
            metadata={"name": config_map, "namespace": namespace_name,
                      "labels": {"app.kubernetes.io/component": "run-template"}},
            data={MANIFEST_KEY: pulumi.Output.from_input(manifest).apply(lambda m: json.dumps(m, indent=2) + "\n")},
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)))
        key = MANIFEST_KEY.replace(".", "\\.")
        delete = f"kubectl -n {namespace_name} delete jobset {run_name} --ignore-not-found --wait"
        read = f"kubectl -n {namespace_name} get configmap {config_map} -o jsonpath='{{.data.{key}}}'"
        if args.owner_claim is None:
            self.submit_command = f"{delete} && {read} | kubectl create -f -"
        else:
            # The claim's uid exists only once it does: the template names it OWNER_UID, the command fills it in.
            self.submit_command = pulumi.Output.format(
                "{0} && owner=$(kubectl -n {1} get pvc {2} -o jsonpath='{{.metadata.uid}}') && {3} | "
                "sed \"s/{4}/$owner/\" | kubectl create -f -", delete, namespace_name, args.owner_claim, read,
                OWNER_UID)
        self.register_outputs({"submit_command": self.submit_command})
