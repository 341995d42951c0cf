"""The ``training`` section of a training-autoscale stack, and the scenario's rules: a GPU pool that scales from
zero for the runs, a CPU pool for predictions, checkpoints in blob storage read with identities."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, ClassVar

from pydantic import Field

from components.vocabulary import StorageAuth
from program.config.errors import ConfigError
from program.config.model import ConfigModel
from program.config.schema import GpuPool, StackConfig
from program.needs import Needs

CHECKPOINTS = "ckpt"
"""Storage role of the checkpoint account."""
TRAIN, PREDICT = "train", "predict"
"""Workloads that touch data: training writes checkpoints, the prediction service only reads them."""

Steps = Annotated[int, Field(ge=1, le=1_000_000, description="Optimisation steps of each training run.")]


class ScaledTrainingSettings(ConfigModel):
    section: ClassVar[str] = "training"

    steps: Steps = 2000
    parallel_runs: int = Field(3, ge=1, le=50)
    """Training runs the `submitTrainingRuns` output starts at once: each asks for a GPU, so the pool grows."""


MOVED = {"workloads.trainingSteps": "steps", "workloads.parallelTrainingRuns": "parallelRuns"}


def scaling_pool(cfg: StackConfig) -> GpuPool | None:
    """The GPU pool training runs on: the first that scales from zero."""
    return cfg.pick_gpu_pool(where=lambda g: g.min_count == 0)


def check(cfg: StackConfig, st: ScaledTrainingSettings) -> Iterator[ConfigError]:
    if scaling_pool(cfg) is None:
        yield ConfigError("aksgpu:gpuPools", {g.name: g.min_count for g in cfg.gpu_pools},
                          "scenario training-autoscale needs a GPU pool that scales from 0 (minCount 0)")
    if not cfg.cpu_pools:
        yield ConfigError("aksgpu:cpuPools", [], "scenario training-autoscale serves predictions on a CPU pool")
    if cfg.storage.auth == StorageAuth.SAS:
        # The Blob CSI driver reads a SAS once, at mount; the predict Deployment keeps its mount for good, so its
        # reads would start failing when the token expires (a renewed Secret never reaches a mounted volume).
        yield ConfigError("aksgpu:storage.auth", cfg.storage.auth,
                          "the always-on predict service would lose its checkpoints when the SAS expires; use identity")


NEEDS = Needs(images={"jobs": "docker/jobs"}, storage_roles=(CHECKPOINTS,), namespace="training",
              data_access={TRAIN: {CHECKPOINTS: True}, PREDICT: {CHECKPOINTS: False}},
              # downloadCheckpoints (and the e2e run's blob probe) read the container as the deployer: Owner and
              # Contributor grant no blob data access (components/azure/storage.py).
              deployer_blob_access={CHECKPOINTS: False}, job_queue=True)
