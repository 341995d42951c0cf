"""What a deployed stack must do to pass: its scenario's acceptance probes, and the training run the spot drill
evicts, as values. The e2e run carries them out (``ops/e2e/probes.py``, ``ops/e2e/drill.py``); no scenario writes
code for it.

A scenario declares its probes in its own folder (``stacks/<name>/probes.py``) from the names its workloads use, so
a probe names only what the stack deploys: the tests render every committed stack and check each name against it.
Probes run in the order declared, each within its own timeout. ``RUN`` in a Job or blob name stands for the e2e
run's id, so a rerun against a kept stack never reads an earlier run's results as its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from components.gpu.node_repair_job import EXPORTER_PORT
from components.gpu.operator import NAMESPACE as GPU_OPERATOR_NAMESPACE
from components.monitoring.gpu_scraping import EXPORTER_LABELS
from components.monitoring.gpu_utilisation import MIG_INSTANCE, WHOLE_GPU

RUN = "{run}"
"""In a Job, blob or prefix name: the e2e run's id (``ops.e2e.probes.run_id``)."""


@dataclass(frozen=True)
class ExistingJob:
    """A Job ``pulumi up`` created: the probe waits for it."""

    name: str


@dataclass(frozen=True)
class JobFromTemplate:
    """A Job the e2e run creates from a suspended CronJob template, as the stack's submit commands do
    (``kubectl create job --from=cronjob/<template>``), named ``<template>-e2e-<run id>``."""

    template: str


@dataclass(frozen=True)
class JobSetFromTemplate:
    """A JobSet created from the manifest a run template keeps in a ConfigMap (``components/training/jobset.py``),
    its owner claim's uid filled in; the previous run of the name is deleted first, as the submit command does."""

    name: str
    """The JobSet's name."""
    config_map: str
    key: str
    """Where the manifest is: the ConfigMap and its key."""


JobRun = ExistingJob | JobFromTemplate | JobSetFromTemplate
"""A run a probe waits for: one ``pulumi up`` made, or one the e2e run starts."""


class Content(StrEnum):
    """Blob contents too large to write into a probe's declaration."""

    DIGITNET_CHECKPOINT = "digitnet-checkpoint"
    """A DigitNet checkpoint (``ckpt-<step>.pt``) that ``docker/jobs/train.py`` wrote after one step on the CPU,
    committed (``ops/e2e/probes.py`` ``DIGITNET_CHECKPOINT``): the machine that drives a run needs no torch."""


@dataclass(frozen=True)
class BlobUpload:
    """A blob the e2e run uploads before a run reads it, as the deployer (``az storage blob upload --auth-mode
    login``)."""

    role: str
    """The storage account's role (``storage.accounts[].role``)."""
    container: str
    name: str
    """The blob's name (``RUN`` allowed)."""
    content: bytes | Content


@dataclass(frozen=True)
class JobCompletes:
    """A Job (or JobSet) finishes successfully, and its log (the leader's, for a JobSet) matches ``log_pattern``."""

    name: str
    """What the verdict is called: what the probe proves, in a few words."""
    namespace: str
    run: JobRun
    log_pattern: str | None = None
    """A regular expression the log must contain (``re.search``, multiline); None: finishing is enough."""
    leader: str | None = None
    """For a JobSet: the label selector of the pod whose log is read."""
    given: tuple[BlobUpload, ...] = ()
    """Uploaded before the run starts."""
    timeout_s: float = 3600


@dataclass(frozen=True)
class HttpAnswers:
    """A Service answers a request with a body matching ``expect``, reached through ``kubectl port-forward`` (the
    way the stacks' own outputs reach their internal services, and the one that works whatever the exposure);
    retried until it does or the timeout passes (a service may still be loading its model)."""

    name: str
    namespace: str
    service: str
    port: int
    """The Service's port."""
    path: str
    expect: str
    """A regular expression the answer's body must contain."""
    method: str = "GET"
    body: str | None = None
    """JSON sent with a POST."""
    timeout_s: float = 1800


@dataclass(frozen=True)
class BlobsWritten:
    """At least ``count`` blobs appear under ``prefix`` in a container of the stack (``az storage blob list
    --auth-mode login``, as the deployer)."""

    name: str
    role: str
    container: str
    prefix: str
    """``RUN`` allowed."""
    count: int = 1
    after: str | None = None
    """The probe whose run writes them (declared before this one): skipped as failed when that one failed."""
    timeout_s: float = 600


@dataclass(frozen=True)
class GpuMetricUnderLoad:
    """While a load Job runs, the DCGM exporter reports a non-zero GPU series for a pod of each of ``pods`` (its
    per-pod series: ``pod`` and ``namespace`` labels), read from the exporter pods' ``/metrics`` through
    ``kubectl port-forward``, so it needs no monitoring add-on."""

    name: str
    namespace: str
    pods: tuple[str, ...]
    """Label selectors: each must select a pod whose GPU series is above zero."""
    load: JobFromTemplate
    metrics: tuple[str, ...] = (WHOLE_GPU, MIG_INSTANCE)
    """Any of these counts: a whole or time-sliced GPU's utilisation, a MIG instance's engine activity
    (``components/monitoring/gpu_utilisation.py``)."""
    exporter_namespace: str = GPU_OPERATOR_NAMESPACE
    exporter_selector: str = ",".join(f"{k}={v}" for k, v in EXPORTER_LABELS.items())
    exporter_port: int = EXPORTER_PORT
    timeout_s: float = 1200


@dataclass(frozen=True)
class AllReduceVerdict:
    """The NCCL all-reduce check's JSON verdict (``docker/jobs/allreduce.py``, the leader's last line) passes the
    size's thresholds: ``pass`` where the size has published ones (and the run used them), ``measured`` where it
    has none."""

    name: str
    namespace: str
    run: JobSetFromTemplate
    leader: str
    """The label selector of the leader's pod."""
    warn_below: float | None
    faulty_below: float | None = None
    """The thresholds the check was deployed with (GB/s of bus bandwidth); None: none published for the size."""
    timeout_s: float = 3600


Probe = JobCompletes | HttpAnswers | BlobsWritten | GpuMetricUnderLoad | AllReduceVerdict
Probes = tuple[Probe, ...]


@dataclass(frozen=True)
class SpotDrill:
    """The training run the spot drill evicts, on a GPU pool of the stack: it starts the run, evicts its node, times
    the new node and the resume, checks that the run went on from its checkpoint, then starts the same run again,
    uninterrupted, and compares their final weights."""

    namespace: str
    pool: str
    """The GPU pool (``gpuPools[].name``) the run's pods take; the drill runs only where it is spot."""
    run: JobFromTemplate
    """A ``docker/jobs/train.py`` run that keeps its checkpoints on a persistent volume (they outlive the evicted
    node) in a folder of its own Job's name (each run starts from nothing). A run whose checkpoints live in its pod
    (an emptyDir) goes with the node: after an eviction it starts again from step 0, which proves nothing about a
    resume, so a scenario with only such a run declares no drill."""


def problems(probes: Probes) -> list[str]:
    """What is wrong with a scenario's probes as a list, one line each: no probe, a name twice, an ``after`` that
    names no earlier probe, a pattern that is no regular expression."""
    found = [] if probes else ["no acceptance probe declared"]
    seen: list[str] = []
    for probe in probes:
        if probe.name in seen:
            found.append(f"probe {probe.name!r} is declared twice")
        if isinstance(probe, BlobsWritten) and probe.after is not None and probe.after not in seen:
            found.append(f"probe {probe.name!r} follows {probe.after!r}, which is not declared before it")
        pattern = getattr(probe, "log_pattern", None) or getattr(probe, "expect", None)
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as error:
                found.append(f"probe {probe.name!r}: {pattern!r} is no regular expression ({error})")
        seen.append(probe.name)
    return found
