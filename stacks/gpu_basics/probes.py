"""gpu-basics' acceptance: each pool's smoke-test Job (nvidia-smi naming the pool's GPU, with ``addons.smokeTest``;
a CUDA client on an MPS pool, always) and the training Job finish.

No spot drill: the training Job keeps its checkpoints in its pod (an emptyDir, as the scenario has no storage), so a
run evicted with its node starts again from step 0 on the next one. That is a restart, not the resume the drill
proves (``program/probes.py`` ``SpotDrill``); training-autoscale's runs checkpoint to blob storage and are drilled."""

from __future__ import annotations

import re

from components.gpu import nvidia_smi
from components.vocabulary import SharingMode
from program.config.schema import GpuPool, StackConfig
from program.probes import ExistingJob, JobCompletes, Probe, Probes
from stacks.gpu_basics.settings import NEEDS, TrainingSettings
from stacks.training_autoscale.probes import TRAINING_DONE
from stacks.training_autoscale.workloads import TRAIN_JOB

NAMESPACE = NEEDS.namespace or ""


def smoke_test(cfg: StackConfig, pool: GpuPool) -> Probe | None:
    """The platform's smoke-test Job of ``pool``, where the stack has one (``program/layers/gpu_software.py``)."""
    if pool.sharing.mode == SharingMode.MPS:
        return JobCompletes(f"a CUDA client computes on MPS pool {pool.name}", nvidia_smi.NAMESPACE,
                            ExistingJob(nvidia_smi.job_name(nvidia_smi.CUDA_CLIENT, pool.name)), timeout_s=1800)
    if not cfg.addons.smoke_test:
        return None
    # nvidia-smi's table names the GPU ("Tesla T4", "NVIDIA A100 80GB PCIe").
    return JobCompletes(f"nvidia-smi on pool {pool.name} names its {pool.size.gpu_model}", nvidia_smi.NAMESPACE,
                        ExistingJob(nvidia_smi.job_name(nvidia_smi.NVIDIA_SMI, pool.name)),
                        log_pattern=rf"\b{re.escape(pool.size.gpu_model)}\b", timeout_s=1800)


def probes(cfg: StackConfig, st: TrainingSettings) -> Probes:
    smoke = [p for pool in cfg.gpu_pools if (p := smoke_test(cfg, pool)) is not None]
    return (*smoke, JobCompletes("the training Job finishes", NAMESPACE, ExistingJob(TRAIN_JOB),
                                 log_pattern=TRAINING_DONE))
