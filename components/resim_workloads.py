"""Seed 003's workloads as Job templates: GPU load tests, re-simulation shards with blob I/O, a 2-GPU job.

The seed rendered ``template_job.yaml`` N times with envsubst. Here each batch is one Indexed Job
(completions = parallelism = N): pod i reads its own shard of the input volume, and the Job retries
a failed index without counting spot evictions against ``backoffLimit``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.jobs import container, job_spec, job_template, pod_spec, submit_command
from components.k8s_security import resources
from components.node_pools import GpuNodePool
from components.workspace import Workspace

INPUT_MOUNT, OUTPUT_MOUNT = "/mnt/input", "/mnt/output"
RESIM_USAGE_EXIT_CODE = 2
"""docker/jobs/resim.py exits 2 when retrying cannot help (no input volume, bad index)."""


@dataclass(frozen=True)
class ResimArgs:
    t4_pool: GpuNodePool
    """Pool of the GPU-load and re-simulation jobs."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs)."""
    workspace: Workspace
    """The scenario's namespace (it holds the input and output claims)."""
    input_claim: str
    """PersistentVolumeClaim of the input container (read-only)."""
    output_claim: str
    """PersistentVolumeClaim of the output container."""
    resim_jobs: int = 20
    """Parallel re-simulation shards (the seed's ``--njobs 20``)."""
    gpu_test_jobs: int = 10
    """Parallel GPU load pods (the seed's ``NUMBER_OF_JOBS=10``)."""
    a100_pool: GpuNodePool | None = None
    """Pool of the 2-GPU job (the seed's Metaseq on A100)."""
    large_model_image: str | None = None
    """User-supplied image for the 2-GPU job; no template without one."""


class ResimWorkloads(pulumi.ComponentResource):
    commands: dict[str, str]
    """Output name -> shell command that submits a run."""

    def __init__(self, name: str, args: ResimArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:ResimWorkloads", name, None, opts)
        ns = args.workspace.namespace
        volumes = [
            {"name": "input", "persistentVolumeClaim": {"claimName": args.input_claim, "readOnly": True}},
            {"name": "output", "persistentVolumeClaim": {"claimName": args.output_claim}},
        ]
        mounts = [{"name": "input", "mountPath": INPUT_MOUNT, "readOnly": True},
                  {"name": "output", "mountPath": OUTPUT_MOUNT}]
        gpu = resources("1", "4Gi", gpus=1)

        labels = {"app.kubernetes.io/name": "gpu-test"}
        load = container("gpu-test", args.jobs_image, ["python", "gpu_load.py", "--seconds", "120"], gpu)
        job_template(f"{name}-gpu-test", "gpu-test", ns, labels, job_spec(
            pod_spec(args.t4_pool, [load]), labels, completions=args.gpu_test_jobs, indexed=True,
            backoff_limit=args.gpu_test_jobs, deadline_seconds=3600), self)

        labels = {"app.kubernetes.io/name": "gpu-io"}
        shard = container("resim", args.jobs_image, [
            "python", "resim.py", "--input", INPUT_MOUNT, "--output", OUTPUT_MOUNT,
            "--shards", str(args.resim_jobs)], gpu, mounts=mounts)
        job_template(f"{name}-gpu-io", "gpu-io", ns, labels, job_spec(
            pod_spec(args.t4_pool, [shard], volumes=volumes), labels, completions=args.resim_jobs, indexed=True,
            backoff_limit=2 * args.resim_jobs, deadline_seconds=6 * 3600,
            fail_on_exit_codes={"resim": [RESIM_USAGE_EXIT_CODE]}), self)

        self.commands = {
            "submitGpuTest": submit_command(args.workspace.name, "gpu-test"),
            "submitResim": submit_command(args.workspace.name, "gpu-io"),
        }
        if args.large_model_image and args.a100_pool is not None:
            labels = {"app.kubernetes.io/name": "large-model"}
            # The user's image keeps its own entrypoint; the volumes are where the seed's job read and wrote.
            big = container("large-model", args.large_model_image, None, resources("16", "200Gi", gpus=2),
                            mounts=mounts, read_only_root=False)
            job_template(f"{name}-large-model", "large-model", ns, labels, job_spec(
                pod_spec(args.a100_pool, [big], volumes=volumes), labels, backoff_limit=3,
                deadline_seconds=24 * 3600), self)
            self.commands["submitLargeModel"] = submit_command(args.workspace.name, "large-model")
        self.register_outputs({"commands": self.commands})
