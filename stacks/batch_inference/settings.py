"""The ``batch`` section of a batch-inference stack (when the nightly run fires, on which pool), what the scenario
needs of the platform (two storage accounts, an identity of its own, a Kueue queue) and its rules."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from typing import Annotated, ClassVar

from pydantic import AfterValidator

from components.vocabulary import StorageAuth
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
_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                      "dec"), start=1)}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS))
"""The five fields of the standard cron spec the CronJob controller parses (robfig/cron v3 ParseStandard, as
Kubernetes validates spec.schedule): their names, bounds and the names each accepts."""


def _field_problem(text: str, name: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """What is wrong with one field, read as robfig/cron's getRange reads it: comma-separated ranges of ``*``, ``?``,
    ``N`` or ``N-M`` (numbers or names), each with an optional ``/step``; ``N/step`` runs to the field's end."""
    def number(word: str) -> int:
        if word.lower() in names:
            return names[word.lower()]
        if not word.isdigit():
            raise ValueError(f"{name} {word!r} is not a number{' or a name' if names else ''}")
        return int(word)

    try:
        for part in filter(None, text.split(",")):
            span, *steps = part.split("/")
            bounds = span.split("-")
            if len(steps) > 1 or len(bounds) > 2:
                return f"{name} {part!r} has too many '/' or '-'"
            start, end = (low, high) if bounds[0] in ("*", "?") else (number(bounds[0]), number(bounds[-1]))
            step = number(steps[0]) if steps else 1
            if steps and len(bounds) == 1:
                end = high
            if start < low or end > high or start > end or step == 0:
                return f"{name} {part!r} is outside {low}-{high}" if start <= end and step else \
                    f"{name} {part!r} is an empty range or a zero step"
    except ValueError as error:
        return str(error)
    return None


def _schedule(value: str) -> str:
    allowed = ("must be a cron schedule of 5 fields (minute hour day month weekday), such as '0 2 * * *', or one of "
               f"{', '.join(_MACROS)}")
    if "TZ" in value:
        raise ValueError(f"set the time zone in batch.timeZone, not in the schedule (the API server refuses both); "
                         f"{allowed}")
    if value in _MACROS:
        return value
    fields = value.split()
    if len(fields) != 5:
        raise ValueError(allowed)
    for text, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        if problem := _field_problem(text, name, low, high, names):
            raise ValueError(f"{problem}: {allowed}")
    return value


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

    schedule: Annotated[str, AfterValidator(_schedule)] = "0 2 * * *"
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
