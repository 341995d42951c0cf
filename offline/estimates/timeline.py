"""How long `pulumi up` takes, from the stack's real dependency graph (``dependsOn`` in resources.json)
and a table of typical creation times (durations.yaml, with the rows committed end-to-end runs measured in place of
the assumed ones: measured.py). Pulumi creates a resource as soon as everything it depends on exists, so the
estimate is the longest path through the graph: the critical path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline.estimates import Step, load_table, minutes
from offline.estimates.first_gpu_pod import FirstGpuPod, first_gpu_pod, repository
from offline.estimates.first_gpu_pod import markdown as first_gpu_pod_markdown
from offline.estimates.measured import is_measured, measurements, with_measured
from offline.runs import load_runs
from offline.stack_files import REPO_ROOT, stack_config, stack_files
from program.markdown import table

if TYPE_CHECKING:
    from offline.render import Render, Resource
    from program.config.schema import StackConfig

DURATIONS = Path(__file__).with_name("durations.yaml")


def load_durations(path: Path = DURATIONS, root: Path | None = REPO_ROOT) -> dict[str, Any]:
    """durations.yaml, each row that a run committed under ``root`` measured replaced by that measurement (with the
    run in its source); ``root`` None: the assumed table alone."""
    assumed = load_table(path)
    if root is None:
        return assumed
    files = stack_files(root)

    def config(stack: str) -> StackConfig | None:
        return stack_config(stack, files[stack]) if stack in files else None
    return with_measured(assumed, measurements(load_runs(root), config))


def _image_row(inputs: Mapping[str, Any], table: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``images`` row of a container image in a workload's pod template (by repository, whatever registry
    serves it), if the table has one."""
    template = ((inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
    for c in template.get("containers") or []:
        if row := (table.get("images") or {}).get(repository(str(c.get("image", "")))):
            return row
    return None


def _command_row(inputs: Mapping[str, Any], table: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``commands`` row whose key starts a local command's script (``az acr build``), if any."""
    script = str(inputs.get("create") or "")
    return next((row for start, row in (table.get("commands") or {}).items() if script.startswith(start)), None)


def duration(resource: Resource, table: Mapping[str, Any]) -> tuple[float, str]:
    """Seconds to create ``resource`` and where that number comes from. Components take no time themselves.

    A Helm release is looked up by its chart first, a workload by its image, a command by its script, everything
    else by its type.
    """
    if not resource.custom:
        return 0.0, "component: finishes with its children"
    inputs = resource.inputs
    row = ((table.get("charts") or {}).get(inputs.get("chart")) or _image_row(inputs, table)
           or _command_row(inputs, table) or table["types"].get(resource.type) or table["default"])
    if "empty_pool_seconds" in row and inputs.get("count") == 0:
        return row["empty_pool_seconds"], row["source"]
    if "loadbalancer_seconds" in row and (inputs.get("spec") or {}).get("type") == "LoadBalancer":
        return row["loadbalancer_seconds"], row["source"]
    if "skip_await_seconds" in row and skips_await(resource):
        return row["skip_await_seconds"], row["source"]
    return row["seconds"], row["source"]


def _waits_for(resource: Resource) -> list[str]:
    """What a resource waits for: its dependencies and its explicit provider (created before it is used)."""
    return [*resource.depends_on, *([resource.provider] if resource.provider else [])]


def _graph(resources: Sequence[Resource]) -> tuple[dict[str, Resource], dict[str, list[str]]]:
    """Resources by name, and each component's children by the component's name."""
    by_name: dict[str, Resource] = {}
    children: dict[str, list[str]] = {}
    for r in resources:
        if r.name not in by_name or r.custom:  # a name shared by a component and a resource: the resource
            by_name[r.name] = r
        if r.parent:
            children.setdefault(r.parent, []).append(r.name)
    return by_name, children


def _waits(resource: Resource, children: Mapping[str, list[str]]) -> list[str]:
    """What ``resource`` must see finished: its dependencies and provider, and a component its children."""
    return _waits_for(resource) + ([] if resource.custom else children.get(resource.name, []))


def schedule(resources: Sequence[Resource], table: Mapping[str, Any],
             overrides: Mapping[str, tuple[float, str]] | None = None) -> dict[str, Step]:
    """Earliest start and finish of every resource when each starts as soon as its dependencies finish.

    Depending on a component means waiting for all of its descendants. ``overrides``: seconds and source by
    resource name, in place of the table's row (an awaited GPU workload's own estimate).
    """
    by_name, children = _graph(resources)
    steps: dict[str, Step] = {}
    visiting: set[str] = set()

    def finish(name: str) -> float:
        if name in steps:
            return steps[name].finish
        if name in visiting:
            raise ValueError(f"dependency cycle through {name}")
        visiting.add(name)
        r = by_name[name]
        waits = [finish(d) for d in _waits(r, children) if d in by_name]
        seconds, source = (overrides or {}).get(name) or duration(r, table)
        start = max(waits, default=0.0)
        steps[name] = Step(name, r.type, seconds, source, start if r.custom else 0.0, start + seconds)
        visiting.discard(name)
        return steps[name].finish

    for name in by_name:
        finish(name)
    return steps


def critical_path(steps: Mapping[str, Step], resources: Sequence[Resource]) -> list[Step]:
    """The chain of resources that decides the total, first to last (resources that take time only)."""
    by_name, children = _graph(resources)
    path = []
    current: str | None = max(steps.values(), key=lambda s: (s.finish, s.name)).name
    while current:
        step = steps[current]
        if step.seconds:
            path.append(step)
        waits = [d for d in _waits(by_name[current], children) if d in steps]
        target = step.start if step.seconds else step.finish
        current = next((d for d in sorted(waits) if abs(steps[d].finish - target) < 1e-9), None)
    return list(reversed(path))


def plan(render: Render, table: Mapping[str, Any] | None = None) -> tuple[dict[str, Step], FirstGpuPod]:
    """The `pulumi up` schedule and the first-GPU-pod estimates, each awaited GPU workload taking as long as its
    pod needs to turn Ready (node, driver, image, start) instead of its type's row."""
    table = table or load_durations()
    steps = schedule(render.resources, table)
    found = first_gpu_pod(render, steps, table)
    by_name = {r.name: r for r in render.resources if r.custom}
    overrides = {e.pod: (e.ready - steps[e.pod].start, "awaited until its pod is Ready: First GPU pod below")
                 for e in found.workloads if not skips_await(by_name[e.pod])}
    return schedule(render.resources, table, overrides), found


def skips_await(resource: Resource) -> bool:
    """Pulumi creates the resource and moves on without waiting for it to be ready."""
    annotations = (resource.inputs.get("metadata") or {}).get("annotations") or {}
    return annotations.get("pulumi.com/skipAwait") == "true"


def total_seconds(steps: Mapping[str, Step]) -> float:
    """How long the whole `pulumi up` takes: when its last resource finishes."""
    return max(s.finish for s in steps.values())


def gantt(path: Sequence[Step]) -> list[str]:
    """The critical path as a Mermaid Gantt chart: one bar per step, its axis in minutes from the start of `pulumi
    up` (hours and minutes past the hour)."""
    # Clock times, not epoch seconds: Mermaid reads and draws both in the viewer's time zone, so 00:05:00 shows
    # as 00:05 everywhere. The axis labels say "min" so they do not read as a time of day.
    long = max((s.finish for s in path), default=0) >= 3600
    lines = ["```mermaid", "gantt", "  title Critical path of pulumi up (estimated), minutes from its start",
             "  dateFormat HH:mm:ss", f"  axisFormat {'%H h %M min' if long else '%M min'}"]
    for i, s in enumerate(path):
        label = re.sub(r"[:;#]", " ", s.name)
        start = round(s.start)
        lines.append(f"  {label} : s{i}, {start // 3600:02d}:{start % 3600 // 60:02d}:{start % 60:02d}, "
                     f"{max(1, round(s.seconds))}s")
    return [*lines, "```"]


def timeline_markdown(render: Render, planned: tuple[Mapping[str, Step], FirstGpuPod] | None = None,
                      durations: Mapping[str, Any] | None = None) -> str:
    """timeline.md; ``durations``: the table ``planned`` came from (default: durations.yaml with the committed
    runs' measurements)."""
    durations = durations or load_durations()
    steps, found = planned or plan(render, durations)
    total = total_seconds(steps)
    serial = sum(s.seconds for s in steps.values())
    path = critical_path(steps, render.resources)
    lines = [
        f"# Stack `{render.stack}`: estimated `pulumi up` duration",
        "",
        "**Estimate.** Computed from this render's dependency graph (`dependsOn` in resources.json) and the "
        "typical creation times in `estimates/durations.yaml` (each with its source). "
        + ("Rows an end-to-end run measured on Azure say so and name the run's file; the rest were not measured."
           if is_measured(durations) else "None was measured on Azure."),
        "",
        f"- With Pulumi's parallelism (each resource starts when its dependencies are done): **{minutes(total)}**.",
        f"- One step after another, as the seed's guide runs its commands: {minutes(serial)} "
        f"({serial / total:.1f}x longer).",
        f"- Resources: {sum(1 for r in render.resources if r.custom)}; on the critical path: {len(path)}.",
        "",
        *first_gpu_pod_markdown(found, render.stack),
        *gantt(path),
        "",
        "## Critical path",
        "",
        *table(["start", "takes", "resource", "type", "why that long"],
               [(minutes(s.start), minutes(s.seconds), f"`{s.name}`", f"`{s.type}`", s.source) for s in path]),
    ]
    return "\n".join(lines) + "\n"
