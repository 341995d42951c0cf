"""Seed 002's GPU training Job and seed 004's train-then-serve: DigitNet on a GPU pool, predictions on CPU.

The training Job writes checkpoints to a volume and resumes from the newest one when its pod is
replaced (spot eviction, scale-down, failure). With a shared (blob) volume, a prediction Deployment
on a CPU pool serves ``/predict`` from the newest checkpoint as training writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_kubernetes import apps, batch, core

from components.autoscaling.kueue import JobQueue, queue_labels, queued
from components.azure.node_pools import CpuNodePool
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.network_policy import allow_https_to_internet, allow_ingress
from components.kubernetes.pods import BAD_INPUT_EXIT_CODE, container, job_spec, job_template, pod_spec
from components.kubernetes.security import resources
from components.kubernetes.workspace import Workspace
from components.volumes.blob_volume import WorkloadVolumes

CHECKPOINT_MOUNT = "/mnt/checkpoints"
CHECKPOINT_FOLDER = "digitnet"
"""The training Job's folder on the checkpoint volume (and in the blob container)."""
TRAIN_JOB, PREDICT = "train", "predict"
"""The training Job, and the prediction Deployment and its Service."""
PREDICT_PATH = "/predict"
PREDICT_PORT = 8080
SERVICE_PORT = 80
RUN_TEMPLATE = "train-run"
"""The Job template of parallel training runs."""
RUN_LABEL = {"app.kubernetes.io/component": "run"}
"""On each run's Job: what tells runs from the ``train`` Job (to list or delete them)."""
TRAINING_DEADLINE_SECONDS = 4 * 3600
"""2000 DigitNet steps take minutes on a T4; four hours covers spot evictions and scale-ups from zero."""


@dataclass(frozen=True)
class TrainingArgs:
    gpu_pool: GpuPoolComponent
    """Pool the training Job runs on (it may scale from zero)."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs)."""
    workspace: Workspace
    """Namespace of the workloads (and of the checkpoint claim)."""
    steps: int = 2000
    """Optimisation steps of the run."""
    checkpoint_container: str | None = None
    """Blob container of the checkpoints; none keeps them in the pod (lost with it)."""
    train_volumes: WorkloadVolumes | None = None
    """The training Job's (read-write) claim of that container, and its ServiceAccount."""
    predict_pool: CpuNodePool | None = None
    """CPU pool of the prediction service; none: no service."""
    predict_volumes: WorkloadVolumes | None = None
    """The prediction service's read-only claim of the container, and its ServiceAccount."""
    parallel_runs: int = 0
    """Runs the ``submit_runs_command`` starts at once from a Job template (seed 004's scale-out); 0: none."""
    queue: JobQueue | None = None
    """Kueue's queue: runs wait there for GPU capacity instead of all pending at once."""


class TrainingWorkload(pulumi.ComponentResource):
    logs_command: str
    """Follows the training Job's log."""
    submit_runs_command: str | None
    """Starts ``parallel_runs`` training runs at once (with ``parallel_runs``)."""
    predict_port_forward: str | None
    """Forwards the prediction Service to localhost:8080 (with a predict pool)."""
    predict_example: str | None
    """A ``curl`` of ``/predict`` through that port-forward."""

    def __init__(self, name: str, args: TrainingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:TrainingWorkload", name, None, opts)  # frozen: components/__init__.py
        blob_container, reader = args.checkpoint_container, args.predict_volumes
        if args.predict_pool is not None and (blob_container is None or reader is None):
            raise ValueError(f"training {name}: the prediction service reads checkpoints from a shared volume")
        train = args.train_volumes
        if blob_container is not None and train is not None:
            volume = {"name": "checkpoints", "persistentVolumeClaim": {"claimName": train.claims[blob_container]}}
        else:
            volume = {"name": "checkpoints", "emptyDir": {"sizeLimit": "5Gi"}}
        folder = f"{CHECKPOINT_MOUNT}/{CHECKPOINT_FOLDER}"
        labels = {"app.kubernetes.io/name": "train"}
        trainer = container("train", args.jobs_image, [
            "python", "train.py", "--checkpoints", folder, "--steps", str(args.steps), "--data", "auto"],
            resources("2", "8Gi", gpus=1), mounts=[{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT}])
        # MNIST comes from a public mirror over HTTPS (docker/jobs/digits.py; synthetic digits without it).
        allow_https_to_internet(f"{name}-train-allow-https", "train-https", args.workspace.namespace, labels, self)
        batch.v1.Job(
            f"{name}-job",
            metadata={"name": TRAIN_JOB, "namespace": args.workspace.namespace,
                      "labels": {**labels, **queue_labels(args.queue)},
                      # `pulumi up` does not wait for training: a pool scaled to zero needs minutes for a node.
                      "annotations": {"pulumi.com/skipAwait": "true"}},
            spec=job_spec(pod_spec(args.gpu_pool, [trainer], volumes=[volume],
                                   service_account=train.service_account if train else None),
                          labels, backoff_limit=6, deadline_seconds=TRAINING_DEADLINE_SECONDS,
                          fail_on_exit_codes={"train": [BAD_INPUT_EXIT_CODE]}),
            # A Job's pod template is immutable: a new image or argument replaces the Job under its fixed name.
            # Queued, it waits for Kueue's admission webhook, which suspends it until it fits.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True,
                                        depends_on=[args.queue.ready] if args.queue else []),
        )
        self.submit_runs_command = None
        if args.parallel_runs:
            self._run_template(name, args, volume, train, labels)
        self.logs_command = f"kubectl -n {args.workspace.name} logs -f job/{TRAIN_JOB}"
        self.predict_port_forward = self.predict_example = None
        if args.predict_pool is not None and blob_container is not None and reader is not None:  # all: see above
            self._predictor(name, args, folder, reader, blob_container)
        self.register_outputs({"logs_command": self.logs_command})

    def _run_template(self, name: str, args: TrainingArgs, volume: dict, train: WorkloadVolumes | None,
                      labels: dict[str, str]) -> None:
        """Seed 004's scale-out: a template for independent training runs, each checkpointing under its own Job
        name, so N of them at once ask for N GPUs and the pool grows from zero (and shrinks back after)."""
        runner = container(
            "train", args.jobs_image,
            ["python", "train.py", "--checkpoints", f"{CHECKPOINT_MOUNT}/runs/$(RUN)", "--steps", str(args.steps),
             "--data", "auto"],
            resources("2", "8Gi", gpus=1), mounts=[{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT}],
            env_from_fields={"RUN": "metadata.labels['batch.kubernetes.io/job-name']"})
        job_template(f"{name}-run-template", RUN_TEMPLATE, args.workspace.namespace, labels, job_spec(
            pod_spec(args.gpu_pool, [runner], volumes=[volume],
                     service_account=train.service_account if train else None),
            labels, backoff_limit=6, deadline_seconds=TRAINING_DEADLINE_SECONDS,
            fail_on_exit_codes={"train": [BAD_INPUT_EXIT_CODE]}), self, **queued(args.queue, labels=RUN_LABEL))
        namespace = args.workspace.name
        self.submit_runs_command = (
            f"for i in $(seq 1 {args.parallel_runs}); do kubectl -n {namespace} create job "
            f"--from=cronjob/{RUN_TEMPLATE} {RUN_TEMPLATE}-$(date +%s)-$i; done")

    def _predictor(self, name: str, args: TrainingArgs, folder: str, reader: WorkloadVolumes,
                   blob_container: str) -> None:
        labels = {"app.kubernetes.io/name": PREDICT}
        probe = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 5}
        server = container(
            "predict", args.jobs_image, ["python", "predict.py", "--checkpoints", folder, "--port", str(PREDICT_PORT)],
            resources("1", "2Gi"), mounts=[{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT, "readOnly": True}],
            ports=[{"name": "http", "containerPort": PREDICT_PORT, "protocol": "TCP"}],
            # Unready until training writes its first checkpoint; alive as long as the process answers.
            readinessProbe=probe,
            livenessProbe={"tcpSocket": {"port": "http"}, "periodSeconds": 20},
        )
        volume = {"name": "checkpoints", "persistentVolumeClaim": {
            "claimName": reader.claims[blob_container], "readOnly": True}}
        # Callers in the namespace use the Service; people use port-forward, which policies do not see.
        allow_ingress(f"{name}-predict-allow-http", "predict-http", args.workspace.namespace, labels, PREDICT_PORT,
                      self, from_pods={})
        apps.v1.Deployment(
            f"{name}-predict",
            metadata={"name": PREDICT, "namespace": args.workspace.namespace, "labels": labels,
                      # Ready only after the first checkpoint, which needs a GPU node and training time.
                      "annotations": {"pulumi.com/skipAwait": "true"}},
            spec={"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": pod_spec(args.predict_pool, [server], volumes=[volume],
                                                service_account=reader.service_account)}},
            opts=pulumi.ResourceOptions(parent=self),
        )
        core.v1.Service(
            f"{name}-predict-service",
            metadata={"name": PREDICT, "namespace": args.workspace.namespace, "labels": labels},
            spec={"type": "ClusterIP", "selector": labels,
                  "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}]},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.predict_port_forward = (f"kubectl -n {args.workspace.name} port-forward svc/{PREDICT} "
                                     f"{PREDICT_PORT}:{SERVICE_PORT}")
        self.predict_example = (
            f"curl -s -X POST http://127.0.0.1:{PREDICT_PORT}{PREDICT_PATH} -H 'content-type: application/json' "
            "-d \"{\\\"images\\\": [$(python3 -c 'print([0.0]*784)')]}\"")
