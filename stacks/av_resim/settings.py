"""The ``resim`` section of an av-resim stack: how many re-simulation shards and GPU load pods a batch runs, and
the user's image for the 2-GPU job; the scenario's storage and data access."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from components.vocabulary import SharingMode
from program.config.errors import ConfigError
from program.config.model import ConfigModel
from program.config.schema import GpuPool, StackConfig
from program.needs import Needs

INPUT, OUTPUT = "input", "output"
"""Storage roles: recordings to re-simulate (mounted read-only), and results."""
RESIM, LARGE_MODEL = "resim", "large-model"
"""Workloads that touch data (their ServiceAccounts and identities)."""
_IMAGE_REF = re.compile(r"^[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$")


def _pinned_image(value: str) -> str:
    if not _IMAGE_REF.match(value) or value.endswith(":latest"):
        raise ValueError("must be REGISTRY/REPOSITORY:TAG or @sha256:DIGEST, with a tag other than latest")
    return value


class ResimSettings(ConfigModel):
    section: ClassVar[str] = "resim"

    jobs: int = Field(20, ge=1, le=1000)
    """Parallel re-simulation shards, pods of the gpu-io Indexed Job (the seed's `--njobs 20`)."""
    gpu_test_jobs: int = Field(10, ge=1, le=100)
    """Parallel GPU load pods, the gpu-test Indexed Job (the seed's `NUMBER_OF_JOBS=10`)."""
    large_model_image: Annotated[str, AfterValidator(_pinned_image)] | None = None
    """Your image (tag or digest, not `latest`) for the 2-GPU job on the multi-GPU pool; unset: no template."""


MOVED = {"workloads.resimJobs": "jobs", "workloads.gpuTestJobs": "gpuTestJobs",
         "workloads.largeModelImage": "largeModelImage"}


def multi_gpu_pool(cfg: StackConfig) -> GpuPool | None:
    """The pool of the 2-GPU job: the first whose nodes carry two or more whole GPUs."""
    return cfg.pick_gpu_pool(where=lambda g: g.size.gpus >= 2 and g.sharing.mode == SharingMode.NONE)


def check(cfg: StackConfig, st: ResimSettings) -> Iterator[ConfigError]:
    if st.large_model_image and multi_gpu_pool(cfg) is None:
        yield ConfigError("aksgpu:resim.largeModelImage", st.large_model_image,
                          "the 2-GPU job needs a GPU pool with 2 or more unshared GPUs per node, "
                          "e.g. Standard_NC48ads_A100_v4")


def needs(cfg: StackConfig, st: ResimSettings) -> Needs:
    """The shards read recordings and write results; the 2-GPU job, a user's image, the same with its own
    identity. uploadInput writes recordings, downloadOutput reads results."""
    access = {RESIM: {INPUT: False, OUTPUT: True}}
    if st.large_model_image:
        access[LARGE_MODEL] = {INPUT: False, OUTPUT: True}
    return Needs(images={"jobs": "docker/jobs"}, storage_roles=(INPUT, OUTPUT), namespace="av-resim",
                 data_access=access, deployer_blob_access={INPUT: True, OUTPUT: False}, job_queue=True)
