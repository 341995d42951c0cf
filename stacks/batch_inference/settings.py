"""The ``batch`` section of a batch-inference stack (when the nightly run fires, on which pool), what the scenario
needs of the platform (two storage accounts, an identity of its own, a Kueue queue) and its rules."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from typing import Annotated, ClassVar

from components.vocabulary import StorageAuth
from program.config.cron import schedule_error
from program.config.errors import ConfigError, did_you_mean
from program.config.model import ConfigModel, derived
from program.config.rules import unknown_gpu_pool
from program.config.schema import GpuPool, StackConfig, valid
from program.needs import Needs

INPUT, OUTPUT = "input", "output"
"""Storage roles: requests and the model (read-only to the job), and answers."""
REQUESTS, MODELS, ANSWERS = "requests", "models", "answers"
"""Blob containers: request files, DigitNet checkpoints, answers."""
BATCH = "batch"
"""The workload that touches data: its ServiceAccount and identity."""


def _time_zone_error(name: str) -> str | None:
    """Why ``name`` is not a zone the API server accepts for a CronJob's ``timeZone`` (validateTimeZone:
    time.LoadLocation, and never Local); None for one. Checked with the standard library's tz database (zoneinfo,
    the system's or the tzdata package's); where the machine has neither, only the shape is."""
    if name.lower() in ("local", "localtime"):
        return "must be an IANA time zone name such as Etc/UTC or Europe/Paris (Kubernetes refuses Local)"
    try:
        zoneinfo.ZoneInfo(name)
        return None
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        pass
    zones = zoneinfo.available_timezones()
    if not zones and re.fullmatch(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*", name):
        return None
    return f"{did_you_mean(name, zones)}must be an IANA time zone name such as Etc/UTC or Europe/Paris"


_time_zone = valid(_time_zone_error)


class BatchSettings(ConfigModel):
    section: ClassVar[str] = "batch"

    schedule: Annotated[str, valid(lambda value: schedule_error(value, "batch.timeZone"))] = "0 2 * * *"
    """When the run fires (cron): the default is every night at 02:00 in `timeZone`."""
    time_zone: Annotated[str, _time_zone] = "Etc/UTC"
    """The schedule's time zone (the CronJob's `timeZone`, an IANA name)."""
    pool: str | None = derived("the first GPU pool that scales from zero")
    """GPU pool the run's pod goes to: a node exists only while a run needs it."""


def batch_pool(cfg: StackConfig, st: BatchSettings) -> GpuPool | None:
    """The pool the run goes to: the named one, or the first that scales from zero."""
    return cfg.pick_gpu_pool(st.pool, where=lambda g: g.min_count == 0)


def check(cfg: StackConfig, st: BatchSettings) -> Iterator[ConfigError]:
    unknown = list(unknown_gpu_pool(cfg, "aksgpu:batch.pool", st.pool))
    yield from unknown
    pool = None if unknown else batch_pool(cfg, st)
    if not unknown and (pool is None or pool.min_count != 0):
        yield ConfigError("aksgpu:gpuPools", {g.name: g.min_count for g in cfg.gpu_pools},
                          "a nightly run needs a GPU pool that scales from 0 (minCount 0): a GPU node only while "
                          "it runs")
    containers = {a.role: a.container_names for a in cfg.storage.accounts}
    if (containers.get(INPUT), containers.get(OUTPUT)) != ((REQUESTS, MODELS), (ANSWERS,)):
        yield ConfigError("aksgpu:storage.accounts", {r: list(c) for r, c in containers.items()},
                          f"batch-inference reads {REQUESTS} and {MODELS} from the {INPUT} account and writes "
                          f"{ANSWERS} to the {OUTPUT} account: set those roles with those containers")
    if cfg.storage.auth == StorageAuth.SAS:
        # The SAS in the volume's Secret is renewed only by `pulumi up`; a nightly job runs for weeks without one.
        yield ConfigError("aksgpu:storage.auth", cfg.storage.auth,
                          "a scheduled run outlives the SAS it would mount with; use identity")


NEEDS = Needs(images={"jobs": "docker/jobs"}, storage_roles=(INPUT, OUTPUT), namespace="batch-inference",
              data_access={BATCH: {INPUT: False, OUTPUT: True}},
              # uploadRequests and uploadModel write the input account; downloadAnswers reads the output one.
              deployer_blob_access={INPUT: True, OUTPUT: False}, job_queue=True)
