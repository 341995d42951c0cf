"""Seed 002's first exercise, kept as a check: an nvidia-smi Job per GPU pool, awaited by ``pulumi up``.

No hostPath driver mounts (seed 002 mounted /usr/lib/nvidia-384 by hand): the operator's container toolkit
injects nvidia-smi and the driver libraries into any container that is given a GPU.

On an MPS pool nvidia-smi proves little: it opens no CUDA context, so it never talks to the MPS server. There the
Job runs a CUDA client instead, as the non-root UID every workload uses, and fails the deploy if it cannot compute
(the device plugin's MPS support is experimental, k8s-device-plugin v0.20.0 README, and non-root clients have
failed on a pipe directory they could not traverse, bottlerocket-os/bottlerocket#4673).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
from pulumi_kubernetes import batch

from components.azure.node_provisioning import GpuPoolComponent
from components.kubernetes import charts
from components.kubernetes.pods import (
    AWAIT_GPU_START,
    BAD_INPUT_EXIT_CODE,
    GPU_START_SECONDS,
    container,
    job_spec,
    pod_spec,
)
from components.kubernetes.security import GPU_CLIENT_UID, NONROOT_UID, resources, workload_namespace
from components.vocabulary import SharingMode

NAMESPACE = "gpu-smoke-test"
NVIDIA_SMI, CUDA_CLIENT = "nvidia-smi", "cuda-client"
"""The check a pool's Job runs: nvidia-smi, or on an MPS pool a CUDA client."""


def job_name(check: str, pool: str) -> str:
    """The Job that runs ``check`` on ``pool``'s GPU."""
    return f"{check}-{pool}"


@dataclass(frozen=True)
class GpuSmokeTestArgs:
    pools: Sequence[GpuPoolComponent]
    """GPU pools to prove schedulable, one Job each."""
    wait_for: Sequence[pulumi.Resource] = field(default_factory=list)
    """What the Jobs must wait for; nothing by default: a pending GPU pod makes the autoscaler add a node before
    the device plugin runs, and the Job waits on the node for the plugin."""
    namespace: str = NAMESPACE
    """Namespace the program creates for the Jobs."""
    image: str = charts.CUDA_BASE_IMAGE
    """Image with a libc; pinned by tag."""
    cuda_client_image: pulumi.Input[str] | None = None
    """An image with torch (the project's jobs image): the CUDA client on MPS pools, required when there is one."""


class GpuSmokeTest(pulumi.ComponentResource):
    job_names: list[str]

    def __init__(self, name: str, args: GpuSmokeTestArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:GpuSmokeTest", name, None, opts)  # frozen: components/__init__.py
        ns = workload_namespace(f"{name}-ns", args.namespace, self)
        self.job_names = []
        nvidia_smi = container(NVIDIA_SMI, args.image, ["nvidia-smi"], resources("100m", "128Mi", gpus=1),
                               tmp=False)
        for pool in args.pools:
            check, probe = NVIDIA_SMI, nvidia_smi
            if pool.gpu.sharing == SharingMode.MPS:
                if args.cuda_client_image is None:
                    raise ValueError(f"smoke test: MPS pool {pool.pool_name} needs a CUDA client image")
                check = CUDA_CLIENT
                probe = container(check, args.cuda_client_image, [
                    "python", "gpu_load.py", "--seconds", "5", "--size", "1024", "--require-cuda"],
                    resources("500m", "1Gi", gpus=1))
            labels = {"app.kubernetes.io/name": check, "aksgpu/pool": pool.pool_name}
            batch.v1.Job(
                f"{name}-{pool.pool_name}",
                metadata={"name": job_name(check, pool.pool_name), "namespace": ns.metadata["name"], "labels": labels,
                          # A Job that failed (no spot capacity, a driver build that broke) is replaced on the
                          # next `pulumi up` instead of failing every later one until someone deletes it.
                          "annotations": {**AWAIT_GPU_START, "pulumi.com/replaceUnready": "true"}},
                # No ttlSecondsAfterFinished: a Job deleted behind Pulumi's back is re-created by the next refresh,
                # which scales a GPU node from zero again.
                spec=job_spec(pod_spec(pool, [probe], tmp=probe is not nvidia_smi,
                                       uid=GPU_CLIENT_UID if probe is not nvidia_smi else NONROOT_UID),
                              labels, backoff_limit=2, deadline_seconds=GPU_START_SECONDS,
                              # gpu_load.py's bad argument; nvidia-smi's own exit codes are not the jobs image's.
                              fail_on_exit_codes={} if probe is nvidia_smi else {check: [BAD_INPUT_EXIT_CODE]}),
                # The pool: the Job is awaited, and its node is chosen by label (an edge Pulumi cannot see).
                # A Job's pod template is immutable: a change replaces it, under its fixed name deleting it first.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.wait_for, pool],
                                            delete_before_replace=True),
            )
            self.job_names.append(job_name(check, pool.pool_name))
        self.register_outputs({"job_names": self.job_names})
