"""The nightly batch run: a CronJob that fires on a schedule, its one GPU pod answering every new request file with
the newest checkpoint. Queued by Kueue like the other GPU Jobs, so a run waits for GPU capacity instead of pending;
spot evictions retry the pod without counting against its backoff limit, and a rerun skips what is answered."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.autoscaling.kueue import JobQueue, queued
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.pods import BAD_INPUT_EXIT_CODE, container, job_spec, job_template, pod_spec, submit_command
from components.kubernetes.security import resources
from components.kubernetes.workspace import Workspace
from components.volumes.blob_volume import WorkloadVolumes

REQUESTS_MOUNT, MODELS_MOUNT, ANSWERS_MOUNT = "/mnt/requests", "/mnt/models", "/mnt/answers"
NO_MODEL_EXIT_CODE = BAD_INPUT_EXIT_CODE
"""docker/jobs/batch_predict.py exits 2 when there is no checkpoint to answer with, or it refused every request it
read: retrying cannot help. Exit 1 (a request file it could not read) is retried."""
DEADLINE_SECONDS = 3 * 3600
"""A night's requests take minutes on a T4; three hours covers a node from zero and spot evictions."""
TEMPLATE = "batch-predict"


@dataclass(frozen=True)
class BatchInferenceArgs:
    pool: GpuPoolComponent
    """GPU pool of the run (one GPU): it may scale from zero."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs), which holds batch_predict.py."""
    workspace: Workspace
    """The scenario's namespace."""
    volumes: WorkloadVolumes
    """The run's ServiceAccount and its claims of the three containers (requests and models read-only)."""
    requests: str
    """Container of the request files."""
    models: str
    """Container of the checkpoints."""
    answers: str
    """Container the answers go to."""
    schedule: str
    """When the run fires (cron)."""
    time_zone: str = "Etc/UTC"
    """The schedule's time zone."""
    queue: JobQueue | None = None
    """Kueue's queue: the run waits there for a GPU."""


class BatchInference(pulumi.ComponentResource):
    run_now_command: str
    """Starts a run now (from the CronJob) and watches its pod."""

    def __init__(self, name: str, args: BatchInferenceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:BatchInference", name, None, opts)  # frozen: components/__init__.py
        claims = args.volumes.claims
        volumes = [
            {"name": "requests", "persistentVolumeClaim": {"claimName": claims[args.requests], "readOnly": True}},
            {"name": "models", "persistentVolumeClaim": {"claimName": claims[args.models], "readOnly": True}},
            {"name": "answers", "persistentVolumeClaim": {"claimName": claims[args.answers]}},
        ]
        mounts: list[dict[str, object]] = [{"name": "requests", "mountPath": REQUESTS_MOUNT, "readOnly": True},
                                           {"name": "models", "mountPath": MODELS_MOUNT, "readOnly": True},
                                           {"name": "answers", "mountPath": ANSWERS_MOUNT}]
        labels = {"app.kubernetes.io/name": TEMPLATE}
        predictor = container("batch-predict", args.jobs_image, [
            "python", "batch_predict.py", "--requests", REQUESTS_MOUNT, "--models", MODELS_MOUNT,
            "--answers", ANSWERS_MOUNT], resources("2", "8Gi", gpus=1), mounts=mounts)
        # No network policy opens anything: the blobs are mounted by the node's CSI plugin, the pod calls nothing.
        job_template(f"{name}-cronjob", TEMPLATE, args.workspace.namespace, labels, job_spec(
            pod_spec(args.pool, [predictor], volumes=volumes, service_account=args.volumes.service_account),
            labels, backoff_limit=3, deadline_seconds=DEADLINE_SECONDS,
            fail_on_exit_codes={"batch-predict": [NO_MODEL_EXIT_CODE]}), self,
            schedule=args.schedule, time_zone=args.time_zone,
            # Queued, a Job waits for Kueue's admission webhook, which suspends it until it fits.
            **queued(args.queue))
        self.run_now_command = submit_command(args.workspace.name, TEMPLATE)
        self.register_outputs({"run_now_command": self.run_now_command})
