"""Seed 003's workloads as Job templates: GPU load tests, re-simulation shards with blob I/O, a 2-GPU job.

The seed rendered ``template_job.yaml`` N times with envsubst. Here each batch is one Indexed Job
(completions = parallelism = N): pod i reads its own shard of the input volume, and the Job retries
a failed index without counting spot evictions against ``backoffLimit``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.autoscaling.kueue import JobQueue, queued
from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes.pods import BAD_INPUT_EXIT_CODE, container, job_spec, job_template, pod_spec, submit_command
from components.kubernetes.security import resources
from components.kubernetes.workspace import Workspace
from components.volumes.blob_volume import WorkloadVolumes

INPUT_MOUNT, OUTPUT_MOUNT = "/mnt/input", "/mnt/output"
GPU_TEST, RESIM = "gpu-test", "gpu-io"
"""The Job templates of the GPU load pods and of the re-simulation shards."""
RESULT_SUFFIX = ".result.json"
"""docker/jobs/resim.py writes each recording's result under its own path with this suffix."""
RESIM_USAGE_EXIT_CODE = BAD_INPUT_EXIT_CODE
"""docker/jobs/resim.py exits 2 when retrying cannot help (no input volume, bad index)."""
GPU_TEST_SECONDS = 120
"""How long each GPU-load pod keeps its GPU busy (the seed's load test ran for two minutes)."""
DEADLINES = {GPU_TEST: 3600, RESIM: 6 * 3600, "large-model": 24 * 3600}
"""Seconds each batch may run: the GPU load is minutes of work, a re-simulation batch hours, the 2-GPU job a
day; each leaves room for spot evictions and the pool scaling up from its minimum."""
LARGE_MODEL_CPU, LARGE_MODEL_MEMORY = "16", "200Gi"
"""The 2-GPU job's share of a Standard_NC48ads_A100_v4 (48 vCPU, 440 GiB): a third of the CPUs, enough memory
to stage a model of two A100s' size."""


@dataclass(frozen=True)
class ResimArgs:
    gpu_pool: GpuPoolComponent
    """Pool of the GPU-load and re-simulation jobs (one GPU, or one share of one, per pod)."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs)."""
    workspace: Workspace
    """The scenario's namespace (it holds the input and output claims)."""
    input_container: str
    """Blob container of the recordings (mounted read-only)."""
    output_container: str
    """Blob container of the results."""
    resim_volumes: WorkloadVolumes
    """The re-simulation shards' claims of both containers, and their ServiceAccount."""
    resim_jobs: int = 20
    """Parallel re-simulation shards (the seed's ``--njobs 20``)."""
    gpu_test_jobs: int = 10
    """Parallel GPU load pods (the seed's ``NUMBER_OF_JOBS=10``)."""
    multi_gpu_pool: GpuPoolComponent | None = None
    """Pool of the 2-GPU job (the seed's Metaseq on A100): two or more whole GPUs per node."""
    large_model_image: str | None = None
    """User-supplied image for the 2-GPU job; no template without one."""
    large_model_volumes: WorkloadVolumes | None = None
    """The 2-GPU job's own claims of both containers and ServiceAccount (a user image gets its own identity)."""
    queue: JobQueue | None = None
    """Kueue's queue: submitted batches wait there for GPU capacity (an Indexed Job larger than the pools runs
    at the parallelism that fits)."""


class ResimWorkloads(pulumi.ComponentResource):
    submit_commands: dict[str, str]
    """Job template name (``gpu-test``, ``gpu-io``, ``large-model``) → the shell command that submits a run."""

    def __init__(self, name: str, args: ResimArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:ResimWorkloads", name, None, opts)  # frozen: components/__init__.py
        ns = args.workspace.namespace

        def volumes(data: WorkloadVolumes) -> list[dict]:
            return [
                {"name": "input", "persistentVolumeClaim": {"claimName": data.claims[args.input_container],
                                                            "readOnly": True}},
                {"name": "output", "persistentVolumeClaim": {"claimName": data.claims[args.output_container]}},
            ]

        mounts: list[dict[str, object]] = [{"name": "input", "mountPath": INPUT_MOUNT, "readOnly": True},
                                           {"name": "output", "mountPath": OUTPUT_MOUNT}]
        gpu = resources("1", "4Gi", gpus=1)

        labels = {"app.kubernetes.io/name": GPU_TEST}
        load = container(GPU_TEST, args.jobs_image, ["python", "gpu_load.py", "--seconds", str(GPU_TEST_SECONDS)],
                         gpu)
        job_template(f"{name}-gpu-test", GPU_TEST, ns, labels, job_spec(
            pod_spec(args.gpu_pool, [load]), labels, completions=args.gpu_test_jobs, indexed=True,
            backoff_limit=1, deadline_seconds=DEADLINES[GPU_TEST],
            fail_on_exit_codes={GPU_TEST: [BAD_INPUT_EXIT_CODE]}), self,
            **queued(args.queue, partial=True))

        labels = {"app.kubernetes.io/name": RESIM}
        shard = container("resim", args.jobs_image, [
            "python", "resim.py", "--input", INPUT_MOUNT, "--output", OUTPUT_MOUNT,
            "--shards", str(args.resim_jobs)], gpu, mounts=mounts)
        job_template(f"{name}-gpu-io", RESIM, ns, labels, job_spec(
            pod_spec(args.gpu_pool, [shard], volumes=volumes(args.resim_volumes),
                     service_account=args.resim_volumes.service_account),
            labels, completions=args.resim_jobs, indexed=True,
            backoff_limit=2, deadline_seconds=DEADLINES[RESIM],
            fail_on_exit_codes={"resim": [RESIM_USAGE_EXIT_CODE]}), self, **queued(args.queue, partial=True))

        self.submit_commands = {template: submit_command(args.workspace.name, template)
                                for template in (GPU_TEST, RESIM)}
        if args.large_model_image and args.multi_gpu_pool is not None and args.large_model_volumes is not None:
            labels = {"app.kubernetes.io/name": "large-model"}
            # The user's image keeps its own entrypoint; the volumes are where the seed's job read and wrote.
            big = container("large-model", args.large_model_image, None,
                            resources(LARGE_MODEL_CPU, LARGE_MODEL_MEMORY, gpus=2), mounts=mounts, read_only_root=False)
            job_template(f"{name}-large-model", "large-model", ns, labels, job_spec(
                pod_spec(args.multi_gpu_pool, [big], volumes=volumes(args.large_model_volumes),
                         service_account=args.large_model_volumes.service_account),
                labels, backoff_limit=3,
                deadline_seconds=DEADLINES["large-model"]), self, **queued(args.queue))
            self.submit_commands["large-model"] = submit_command(args.workspace.name, "large-model")
        self.register_outputs({"submit_commands": self.submit_commands})
