"""The one way this project builds pods, containers, Jobs and Job templates (for every workload kind).

Jobs that users submit on demand (re-simulation batches, GPU load, the load test) are declared as
*templates*: a suspended CronJob whose schedule never fires. ``kubectl create job --from=cronjob/NAME``
starts a run, and ``pulumi up`` neither runs nor waits for them. A CronJob with a schedule runs on it, and can be
started now the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_kubernetes import batch

from components.azure.node_pools import CpuNodePool
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.security import NONROOT_UID, container_security_context, pod_security_context

NEVER = "0 0 31 2 *"
"""February 31st: a CronJob schedule that never fires, for templates."""
TMP_MOUNT = {"name": "tmp", "mountPath": "/tmp"}  # noqa: S108 (a mount path in the container)
"""The jobs image keeps HOME and caches in /tmp, so the root filesystem can be read-only."""
GPU_START_SECONDS = 1800
"""How long a GPU pod may take to start on a pool scaled to zero: a node (about 5 min), the operator's driver
build (about 5 min), a multi-GB image pull and the model load."""
AWAIT_GPU_START = {"pulumi.com/timeoutSeconds": str(GPU_START_SECONDS)}
"""Annotation: how long ``pulumi up`` waits for a GPU workload to become ready."""
GPU_ROLLOUT = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
"""Deployment strategy for pods that hold a GPU or a GPU share where the pool has no spare one: replace, never
surge. A surge pod needs one more GPU than the pool has when its pods fill it (and a pool at max cannot grow), so
the default rollout would wait forever and every later `pulumi up` time out. A single replica is down while its
replacement starts."""
GPU_SURGE_ROLLOUT = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
"""Where the pool at its maximum holds a spare GPU (or share) beyond every replica its Deployments may run: the new
pod starts before an old one stops, so a rollout takes nothing down."""
DISRUPTIONS_DO_NOT_COUNT = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
"""Spot evictions, preemptions and drains retry the pod without using up backoffLimit."""
BAD_INPUT_EXIT_CODE = 2
"""The jobs image's scripts exit with it on a bad argument or input, which no retry mends (docker/jobs/jobio.py
``EXIT_BAD_INPUT``; a test holds the two equal): their Jobs fail at once on it (``fail_on_exit_codes``)."""


def fail_job_rules(fail_on_exit_codes: Mapping[str, Sequence[int]]) -> list[dict[str, Any]]:
    """Pod failure policy rules that fail the Job at once when a container exits with one of its codes (batch/v1
    ``PodFailurePolicyOnExitCodesRequirement``: the codes sorted, unique, never 0 with ``In``)."""
    return [{"action": "FailJob", "onExitCodes": {"containerName": name, "operator": "In",
                                                  "values": sorted(set(codes))}}
            for name, codes in fail_on_exit_codes.items()]


def submit_command(namespace: str, template: str) -> str:
    """How a user starts a run of a Job template and watches its pods."""
    return (f"job={template}-$(date +%s) && kubectl -n {namespace} create job --from=cronjob/{template} $job && "
            f"kubectl -n {namespace} get pods -l job-name=$job -w")


def container(name: str, image: pulumi.Input[str], command: Sequence[pulumi.Input[str]] | None,
              resources: Mapping[str, Any], mounts: Sequence[Mapping[str, Any]] = (),
              env: Mapping[str, pulumi.Input[str]] | None = None, read_only_root: bool = True, tmp: bool = True,
              env_from_fields: Mapping[str, str] | None = None,
              **extra: Any) -> dict[str, Any]:
    """A container of the restricted kind; ``command`` None keeps the image's entrypoint.

    ``tmp`` mounts the pod's /tmp emptyDir (``pod_spec(tmp=True)``): this project's images keep HOME there.
    ``env_from_fields``: variables from the pod's own fields (downward API), e.g. its Job's name.
    """
    all_mounts = [*([TMP_MOUNT] if tmp else []), *mounts]
    spec: dict[str, Any] = {
        "name": name,
        "image": image,
        "resources": dict(resources),
        "securityContext": container_security_context(read_only_root=read_only_root),
        **({"volumeMounts": all_mounts} if all_mounts else {}),
        **extra,
    }
    if command is not None:
        spec["command"] = list(command)
    variables: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in (env or {}).items()]
    variables += [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": path}}}
                  for k, path in (env_from_fields or {}).items()]
    if variables:
        spec["env"] = variables
    return spec


def pod_spec(pool: GpuPoolComponent | CpuNodePool | None, containers: Sequence[Mapping[str, Any]],
             volumes: Sequence[Mapping[str, Any]] = (), uid: int = NONROOT_UID, gid: int | None = None,
             tmp: bool = True, service_account: str | None = None) -> dict[str, Any]:
    """A restricted pod on ``pool`` (its node selector and tolerations), or on any untainted node.

    ``tmp`` adds the emptyDir that ``container()`` mounts at /tmp (images of this project keep HOME there).
    ``service_account``: the workload's own, whose identity mounts its blob volumes; the token stays out of the
    pod either way (the CSI driver asks the kubelet for one).
    """
    spec: dict[str, Any] = {
        **({"serviceAccountName": service_account} if service_account else {}),
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(uid, gid),
        "containers": list(containers),
    }
    all_volumes = [*([{"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}}] if tmp else []), *volumes]
    if all_volumes:
        spec["volumes"] = all_volumes
    if pool is not None:
        spec["nodeSelector"] = pool.node_selector
        spec["tolerations"] = pool.tolerations
    return spec


def job_spec(pod: Mapping[str, Any], labels: Mapping[str, str], *, completions: int = 1, indexed: bool = False,
             backoff_limit: int = 6, deadline_seconds: int = 6 * 3600,
             fail_on_exit_codes: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """A Job whose disruptions never count as failures; exit codes in ``fail_on_exit_codes`` (per container)
    fail the whole Job at once instead of retrying what cannot succeed. An Indexed Job counts ``backoff_limit`` per
    index (``backoffLimitPerIndex``, GA in Kubernetes 1.33): a shard that keeps failing cannot use up the other
    shards' retries, and the Job still runs every other index."""
    rules = [DISRUPTIONS_DO_NOT_COUNT, *fail_job_rules(fail_on_exit_codes or {})]
    spec: dict[str, Any] = {
        "completions": completions,
        "parallelism": completions,
        **({"backoffLimitPerIndex": backoff_limit} if indexed else {"backoffLimit": backoff_limit}),
        "activeDeadlineSeconds": deadline_seconds,
        "podFailurePolicy": {"rules": rules},
        "template": {"metadata": {"labels": dict(labels)}, "spec": {**pod, "restartPolicy": "Never"}},
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return spec


def job_template(resource_name: str, name: str, namespace: pulumi.Input[str], labels: Mapping[str, str],
                 spec: Mapping[str, Any], parent: pulumi.Resource, job_labels: Mapping[str, str] | None = None,
                 job_annotations: Mapping[str, str] | None = None, schedule: str | None = None,
                 time_zone: str = "Etc/UTC", depends_on: Sequence[pulumi.Resource] = (),
                 annotations: Mapping[str, str] | None = None) -> batch.v1.CronJob:
    """A CronJob holding the Job ``spec``: on ``schedule`` (cron syntax, in ``time_zone``), or, without one, a
    suspended template users submit with ``submit_command``. ``job_labels`` and ``job_annotations`` go on each Job
    (not its pods): a Kueue queue, say; ``annotations`` on the CronJob. A scheduled run is skipped while the
    previous one still runs."""
    job_metadata: dict[str, Any] = {"labels": {**labels, **(job_labels or {})}}
    if job_annotations:
        job_metadata["annotations"] = dict(job_annotations)
    timing = {"schedule": NEVER, "suspend": True} if schedule is None else \
        {"schedule": schedule, "timeZone": time_zone, "suspend": False, "startingDeadlineSeconds": 3600}
    return batch.v1.CronJob(
        resource_name,
        metadata={"name": name, "namespace": namespace, "labels": dict(labels),
                  **({"annotations": dict(annotations)} if annotations else {})},
        spec={
            **timing,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": job_metadata, "spec": dict(spec)},
        },
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
