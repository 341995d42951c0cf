"""Durations an end-to-end run measured on Azure (``docs/results/e2e-*.json``), in place of durations.yaml's rows.

A run records when each phase happened, counted from its clock's zero (offline/runs.py); a row of durations.yaml is
how long one step takes. A row is measured where two of a run's phases bracket exactly that step, for the
configurations in which they do (``MEASURED``); every other row keeps its assumed or cited value. Of several runs
that measured a row, the latest counts, and the row's source names its file, stack and date. The destroy row is the
stack's own: its latest whole destroy (``destroy_measurement``), for that stack's estimate alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.vocabulary import GpuDriver
from offline.runs import RESULTS, Clock, PhaseName, Run

if TYPE_CHECKING:
    from program.config.schema import StackConfig


def _always(cfg: StackConfig) -> bool:
    return True


def _gpu_pools_boot_with_the_stack(cfg: StackConfig) -> bool:
    """Every GPU pool is an AgentPool that `pulumi up` creates with a node and whose driver the GPU operator installs:
    the pool's create starts when the cluster's finishes, and its first node turns Ready before any driver loads."""
    return bool(cfg.gpu_pools) and all(not g.nap and g.initial_count > 0 and g.gpu_driver.operator_owned
                                       for g in cfg.gpu_pools)


def _every_gpu_pool_runs(driver: GpuDriver) -> Callable[[StackConfig], bool]:
    def applies(cfg: StackConfig) -> bool:
        return bool(cfg.gpu_pools) and all(g.gpu_driver == driver for g in cfg.gpu_pools)
    return applies


@dataclass(frozen=True)
class Interval:
    """A row of durations.yaml and the two phases of a run that bracket it."""

    row: tuple[str, str]
    """(section, key) of durations.yaml."""
    to: PhaseName
    since: PhaseName | None
    """None: the clock's zero."""
    what: str
    """What the measured interval is, as its source says it."""
    applies: Callable[[StackConfig], bool] = _always
    """Whether the interval is the row's step for a stack configured so (checked on the stack file as committed)."""


MEASURED = (
    Interval(("types", "azure-native:containerservice:ManagedCluster"), PhaseName.CLUSTER_READY, None,
             "from `pulumi up`'s start to the cluster's create finishing (Pulumi engine events; it includes the "
             "seconds the cluster waits for its resource group and network)"),
    Interval(("gpu_node", "vm_boot"), PhaseName.GPU_NODE_READY, PhaseName.CLUSTER_READY,
             "from the cluster's create finishing to the first GPU node Ready: the GPU pool's create, its VM's boot "
             "and join", _gpu_pools_boot_with_the_stack),
    Interval(("gpu_node", "driver_precompiled"), PhaseName.DRIVER_READY, PhaseName.GPU_NODE_READY,
             "from the GPU node Ready to the operator's driver pod Ready", _every_gpu_pool_runs(GpuDriver.PRECOMPILED)),
    Interval(("gpu_node", "driver_compile"), PhaseName.DRIVER_READY, PhaseName.GPU_NODE_READY,
             "from the GPU node Ready to the operator's driver pod Ready", _every_gpu_pool_runs(GpuDriver.NONE)),
    Interval(("gpu_node", "device_plugin"), PhaseName.DEVICE_PLUGIN_READY, PhaseName.DRIVER_READY,
             "from the driver loaded to the device plugin pod Ready on that node"),
)
"""Rows any stack's run measures for every stack. The destroy is not one: one stack's says nothing about another's,
so a run's whole destroy stands for its own stack's only (``destroy_measurement``)."""
DESTROY = Interval(("e2e", "destroy"), PhaseName.DESTROY, None, "`pulumi destroy` of the whole stack")


@dataclass(frozen=True)
class Measurement:
    seconds: float
    run: Run
    interval: Interval

    @property
    def source(self) -> str:
        return (f"measured: {self.seconds:.0f} s {self.interval.what}, by an end-to-end run "
                f"({RESULTS / self.run.file_name}: stack {self.run.stack}, {self.run.started:%Y-%m-%d})")


def _seconds(run: Run, interval: Interval) -> float | None:
    """The interval in ``run``, or None where the run did not measure both ends."""
    if interval.to == PhaseName.DESTROY:  # its own clock
        phase = run.phase(PhaseName.DESTROY, Clock.DESTROY)
        return None if phase is None else phase.measured_seconds
    end = run.phase(interval.to, Clock.UP)
    start = 0.0 if interval.since is None else getattr(run.phase(interval.since, Clock.UP), "measured_seconds", None)
    if end is None or end.measured_seconds is None or start is None or end.measured_seconds < start:
        return None
    return end.measured_seconds - start


def destroy_measurement(runs: Iterable[Run], stack: str) -> Measurement | None:
    """``stack``'s latest destroy of a whole stack at its first attempt (a run records no other as measured:
    ops/e2e/run.py), or None."""
    found = None
    for run in sorted((r for r in runs if r.stack == stack), key=lambda r: r.started):
        if (seconds := _seconds(run, DESTROY)) is not None:
            found = Measurement(seconds, run, DESTROY)
    return found


def _as_run(run: Run, config: Callable[[str], StackConfig | None]) -> StackConfig | None:
    """The stack's committed config, if its GPU pools are still the ones the run deployed (else the run says
    nothing about today's configuration)."""
    cfg = config(run.stack)
    if cfg is None:
        return None
    ran = {(p.name, p.vm_size) for p in run.pools}
    return cfg if all((g.name, g.vm_size) in ran for g in cfg.gpu_pools) else None


def measurements(runs: Iterable[Run], config: Callable[[str], StackConfig | None]
                 ) -> dict[tuple[str, str], Measurement]:
    """Each row a committed run measured → the latest run's measurement. ``config``: a stack's committed config
    (None for a stack that no longer exists)."""
    found: dict[tuple[str, str], Measurement] = {}
    for run in sorted(runs, key=lambda r: r.started):
        cfg = _as_run(run, config)
        for interval in MEASURED:
            if interval.applies is not _always and (cfg is None or not interval.applies(cfg)):
                continue
            if (seconds := _seconds(run, interval)) is not None:
                found[interval.row] = Measurement(seconds, run, interval)
    return found


def with_measured(table: Mapping[str, Any], found: Mapping[tuple[str, str], Measurement]) -> dict[str, Any]:
    """durations.yaml with each measured row's seconds and source replaced (its special cases, such as a pool created
    empty, kept); the table itself where nothing is measured."""
    if not found:
        return dict(table)
    measured = copy.deepcopy(dict(table))
    for (section, key), m in found.items():
        row = measured[section][key]
        row["seconds"], row["source"], row["measured"] = m.seconds, m.source, True
    return measured


def is_measured(table: Mapping[str, Any]) -> bool:
    """Whether any row of the table comes from a run."""
    return any(isinstance(row, Mapping) and row.get("measured")
               for section in table.values() if isinstance(section, Mapping) for row in section.values())
