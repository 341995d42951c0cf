"""What an end-to-end run of a stack (``python -m ops e2e``) is expected to take and cost, the most it can cost (the
budget guard's figure), and the render's estimate of each phase a run measures (``phase_estimates``), which a run
writes beside its own.

A run is `pulumi up`, the scenario's probes, the spot drill where the scenario declares one on a spot GPU pool,
and `pulumi destroy`. Its expected hours are the `pulumi up` estimate (timeline.py) plus durations.yaml's ``e2e``
rows, each with the new GPU node's estimate where that step waits for one (the destroy: the stack's own latest
destroy of a whole stack where a committed run measured one). Its ceiling is the longest the workflow can keep the
stack up (the run job's limit and then the cleanup job's, ``ops.e2e.budget``) at the stack's full-scale hourly cost
(cost.py: every pool at its maximum): a run's probes may scale any pool to its maximum, and a run that hangs is
stopped only at those limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offline.estimates.cost import load_prices, totals
from offline.estimates.first_gpu_pod import BOOT, DEVICE_PLUGIN, Estimate, joined
from offline.estimates.measured import destroy_measurement
from offline.estimates.timeline import load_durations, plan, total_seconds
from offline.runs import Clock, PhaseName, Run, load_runs

if TYPE_CHECKING:
    from offline.render import Render
    from program.config.schema import StackConfig

CLUSTER = "azure-native:containerservice:ManagedCluster"


@dataclass(frozen=True)
class RunPart:
    what: str
    seconds: float
    source: str


@dataclass(frozen=True)
class RunEstimate:
    stack: str
    parts: tuple[RunPart, ...]
    hourly: float
    """$/h at full scale, the priced pools only."""
    unpriced: tuple[str, ...]
    """Pools without a price in the stack's region: the cost is then a lower bound."""

    @property
    def hours(self) -> float:
        return sum(p.seconds for p in self.parts) / 3600

    @property
    def usd(self) -> float:
        """The expected cost."""
        return self.hours * self.hourly

    def ceiling(self, hours: float) -> float:
        """The most a run kept up for at most ``hours`` costs."""
        return hours * self.hourly

    def text(self, hours: float) -> str:
        """``$1.23 expected (1.4 h); at most $6.53 (7.5 h at $0.871/h at full scale)``."""
        least = "at least " if self.unpriced else ""
        return (f"{least}${self.usd:,.2f} expected ({self.hours:.1f} h); at most {least}${self.ceiling(hours):,.2f} "
                f"({hours:.1f} h at {least}${self.hourly:,.3f}/h at full scale)")


def drills(cfg: StackConfig) -> bool:
    """Whether a run of the stack has a spot drill: its scenario declares a drill run, on a spot pool."""
    from stacks import REGISTRY
    plan = REGISTRY[cfg.scenario].drill_of(cfg, cfg.settings)
    return plan is not None and cfg.gpu_pool(plan.pool).spot


def _with_stack_destroy(table: Mapping[str, Any], stack: str, runs: Iterable[Run] | None) -> Mapping[str, Any]:
    """``table`` with its destroy row replaced by ``stack``'s own latest destroy of a whole stack, where a run
    measured one (``runs``; None: the committed ones). One stack's destroy, or a partial one, says nothing about
    another's."""
    found = destroy_measurement(load_runs() if runs is None else runs, stack)
    if found is None:
        return table
    return {**table, "e2e": {**table["e2e"], "destroy": {"seconds": found.seconds, "source": found.source,
                                                         "measured": True}}}


def run_estimate(render: Render, prices: dict[str, Any] | None = None, table: Mapping[str, Any] | None = None,
                 runs: Iterable[Run] | None = None) -> RunEstimate:
    """The expected hours and cost of an end-to-end run of ``render``'s stack."""
    table = _with_stack_destroy(table or load_durations(), render.stack, runs)
    steps, found = plan(render, table)
    rows = table["e2e"]
    new_node = found.new_node_workload or found.new_node
    parts = [RunPart("`pulumi up`", total_seconds(steps), "the `pulumi up` estimate (timeline.md)")]
    probes = rows["probes"]
    parts.append(RunPart("probes", probes["seconds"], probes["source"]))
    if found.deploy is None:
        parts.append(RunPart("a new GPU node for the probes", new_node.ready, "the new GPU node estimate "
                             "(timeline.md: First GPU pod): the stack starts no GPU pod at deploy"))
    if drills(render.cfg):
        drill = rows["drill"]
        parts += [RunPart("spot drill", drill["seconds"], drill["source"]),
                  RunPart("the drill's replacement node", new_node.ready, "the new GPU node estimate (timeline.md: "
                          "First GPU pod)")]
    destroy = rows["destroy"]
    parts.append(RunPart("`pulumi destroy`", destroy["seconds"], destroy["source"]))
    cost = totals(render, prices or load_prices())
    return RunEstimate(render.stack, tuple(parts), cost.full, cost.unpriced)


def _node_phases(render: Render, estimate: Estimate) -> dict[PhaseName, float]:
    """When the estimate's node turns Ready, its driver loads and its device plugin advertises the GPUs."""
    pool = next(g for g in render.cfg.gpu_pools if g.name == estimate.pool)
    phases = list(estimate.phases)
    boot = next(i for i, p in enumerate(phases) if p.what == BOOT)
    plugin = next(p for p in phases if p.what == DEVICE_PLUGIN)
    return {PhaseName.GPU_NODE_READY: joined(pool, phases), PhaseName.DRIVER_READY: phases[boot + 1].finish,
            PhaseName.DEVICE_PLUGIN_READY: plugin.finish, PhaseName.GPU_ALLOCATABLE: plugin.finish}


def phase_estimates(render: Render, table: Mapping[str, Any] | None = None, runs: Iterable[Run] | None = None
                    ) -> dict[tuple[PhaseName, Clock], float]:
    """(phase, clock) → the render's estimate in seconds from the clock's zero, for each phase of offline/runs.py the
    estimate has: the `pulumi up` schedule, the first GPU pod chain from `pulumi up` and on a new node (scale from
    zero and a spot replacement: one chain, counted from the pending pod), and the destroy."""
    table = _with_stack_destroy(table or load_durations(), render.stack, runs)
    steps, found = plan(render, table)
    up = Clock.UP
    estimates = {(PhaseName.UP, up): total_seconds(steps),
                 (PhaseName.DESTROY, Clock.DESTROY): float(table["e2e"]["destroy"]["seconds"])}
    if clusters := [s for s in steps.values() if s.type == CLUSTER]:
        estimates[(PhaseName.CLUSTER_READY, up)] = clusters[0].finish
    if found.deploy is not None:
        estimates |= {(name, up): t for name, t in _node_phases(render, found.deploy).items()}
    if found.deploy_workload is not None:
        estimates[(PhaseName.GPU_POD_READY, up)] = found.deploy_workload.ready
    if found.endpoint is not None:
        estimates[(PhaseName.ENDPOINT_ANSWERING, up)] = found.endpoint
    new_node = _node_phases(render, found.new_node)
    replaced = new_node.pop(PhaseName.GPU_NODE_READY)
    estimates |= {(PhaseName.NODE_REPLACED, clock): replaced for clock in (Clock.SCALE_UP, Clock.EVICTION)}
    estimates |= {(name, Clock.SCALE_UP): t for name, t in new_node.items()}
    if found.new_node_workload is not None:
        estimates[(PhaseName.GPU_POD_READY, Clock.SCALE_UP)] = found.new_node_workload.ready
    return estimates
