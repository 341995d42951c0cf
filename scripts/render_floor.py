"""How much CPU time the program itself adds to an offline render, against a floor.

    .venv/bin/python scripts/render_floor.py --stack STACK [--stack ...] [--repeat 7] [--ladder] [--process]
        [--json FILE] [--profile N] [--emit FILE]

The program: ``offline.render.render_stack(STACK)``, the render as every test and ``python -m offline render`` run
it (config loading, components, the stack transformation, invokes, outputs).

The floor: a flat program, generated from that render, that declares the same custom resources (same types, names,
inputs as the provider receives them, the same provider, ignoreChanges, replaceOnChanges and protect) straight
with the typed provider SDK classes: ``pulumi_azure_native.<module>.<Class>``,
``pulumi_kubernetes.<group>.<version>.<Kind>``, ``pulumi_kubernetes.apiextensions.CustomResource`` for CRD kinds,
``pulumi_kubernetes.helm.v3.Release``, ``pulumi_kubernetes.Provider``, ``pulumi_command``, ``pulumi_docker``,
``pulumi_random``. Top-level inputs become the SDK's snake_case keyword arguments, nested values plain dicts, all
as literals in generated Python source (compiled once, executed per run, like a program's module body). No
components, no parents, no dependsOn, no aliases of its own, no config, no invokes, no exports. It runs under
the same mocks and monitor setup the render uses (``AzureMocks`` in ``offline.mocks``, ``RecordingMonitor``,
``pulumi.runtime.mocks.set_mocks`` and the stack transformation ``without_provider_aliases``, as
``offline.render._run_program`` sets them up), in a fresh ``contextvars.Context`` per run. Without that
transformation azure-native's ~1,300 API-version aliases would make the flat program slower than the program (the
``floor_no_transform_cpu_s`` column, for reference). Before timing, the floor's recorded resources are checked
equal to the program's custom resources (type, name, provider, inputs, ignoreChanges, replaceOnChanges, protect).

Timing: both run once to warm up (imports, caches), then N rounds of one run of each, in a shuffled order per
round, each run after a ``gc.collect()``, measured with ``time.process_time()`` (CPU time of the process, the SDK's
worker threads included: the machine is shared, wall time is noise). Prints the medians, the ratio program / floor
and the resource counts of both.
``--ladder`` also times the floor plus, cumulatively, the program's components, parent tree and dependencies (see
``LADDER``), each checked against the program's URNs and dependsOn. ``--json FILE`` updates the results file (one
row per stack), ``--profile N`` prints the top N functions (cProfile, cumulative, main thread only) of one warm
program render and one warm floor run, ``--emit FILE`` writes the generated floor program.

``--process`` also times whole processes, start-up, imports and exit included, as a user meets them: the program as
``python -m offline render --stack STACK --out TMP`` (config checks of every stack file, the render, its files;
garbage collected between stacks only) against the floor as a script of its own (``floor_script``: it imports
pulumi, the SDK classes it declares, ``offline.mocks`` with the two small component modules it reads, and
``offline.runtime``), in the forms of ``PROCESS_FORMS``. ``transform+gc`` is the closest floor: the same
transformation and collector handling, while the render's recording monitor, its config checks of every stack file
and the files it writes count as the program's. ``plain`` is a typed-SDK program as written, which pays for
azure-native's API-version aliases. Compiling the floor script in each run (no ``.pyc``): 5 ms. Each round
runs the four commands in a shuffled order; CPU is the child's user + system time (``RUSAGE_CHILDREN``), and each
ratio is the median of the rounds' own ratios, so a drift in the machine's speed between rounds does not move it.
Each process's count of registered resources is checked.

    .venv/bin/python scripts/render_floor.py --stack av-resim --stack gpu-basics --stack llm-serving --repeat 15 \
        --ladder --process --json docs/results/render-floor.json
"""

from __future__ import annotations

import argparse
import contextvars
import cProfile
import datetime
import gc
import importlib
import inspect
import io
import json
import os
import pstats
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pulumi  # noqa: E402
from pulumi.runtime import mocks as pulumi_mocks  # noqa: E402

from offline.mocks import SUBSCRIPTION, AzureMocks  # noqa: E402
from offline.render import RecordingMonitor, Render, Resource, render_stack  # noqa: E402
from offline.runtime import run_program, without_provider_aliases  # noqa: E402
from program.config.keys import PROJECT  # noqa: E402

_PACKAGES = {"azure-native": "pulumi_azure_native", "kubernetes": "pulumi_kubernetes", "command": "pulumi_command",
             "docker": "pulumi_docker", "random": "pulumi_random"}
_K8S_SET_BY_CLASS = ("apiVersion", "kind")
"""Inputs a typed Kubernetes class sets itself."""
_REPLACE_SET_BY_CLASS = {"command:local:Command": ["triggers[*]"]}
"""replaceOnChanges a class adds itself (``pulumi_command.local.Command``)."""


@dataclass
class Floor:
    """The generated flat program: its source, the names it refers to, and what each run records."""
    source: str
    namespace: dict[str, Any]
    code: Any

    def run(self, stack: str, transform: bool = True) -> RecordingMonitor:
        return contextvars.Context().run(self._run, stack, transform)

    def _run(self, stack: str, transform: bool) -> RecordingMonitor:
        monitor = RecordingMonitor(AzureMocks(stack, SUBSCRIPTION))
        pulumi_mocks.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)

        def program() -> None:
            if transform:
                pulumi.runtime.register_stack_transformation(without_provider_aliases)
            exec(self.code, dict(self.namespace))

        run_program(program)
        return monitor


def _sdk_class(typ: str) -> tuple[Any, bool]:
    """The typed SDK class of a resource type token, and whether it is a CRD kind (``CustomResource``)."""
    if typ == "pulumi:providers:kubernetes":
        return importlib.import_module("pulumi_kubernetes").Provider, False
    package, module, name = typ.split(":")
    if package == "kubernetes":
        if module == "helm.sh/v3":
            return importlib.import_module("pulumi_kubernetes.helm.v3").Release, False
        group, version = module.split("/")
        try:
            cls = getattr(importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0]}.{version}"), name)
            return cls, False
        except (ImportError, AttributeError):
            return importlib.import_module("pulumi_kubernetes.apiextensions").CustomResource, True
    mod = _PACKAGES[package] if module.startswith("index") else f"{_PACKAGES[package]}.{module.replace('/', '.')}"
    return getattr(importlib.import_module(mod), name), False


def _kwarg_names(cls: Any) -> dict[str, str]:
    """Wire (camelCase) input name → the class's keyword argument, for its top-level inputs."""
    init = getattr(cls, "_internal_init", cls.__init__)
    params = [p for p in inspect.signature(init).parameters if p not in ("self", "resource_name", "opts", "__props__")]
    py_to_wire = pulumi._types.resource_py_to_pulumi_names(cls)
    names = {}
    for p in params:
        names[py_to_wire.get(p, p)] = p
        names.setdefault(p.replace("_", "").lower(), p)
    return names


def _kwarg(names: dict[str, str], key: str, typ: str) -> str:
    found = names.get(key) or names.get(key.lower())
    if found is None:
        raise KeyError(f"{typ}: no keyword argument for input {key!r}")
    return found


def _literal(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"fileAsset"}:
        return f"pulumi.FileAsset({value['fileAsset']!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


LADDER = ("components", "parents", "depends_on")
"""What each step of ``--ladder`` adds to the floor, cumulatively: the program's components (registered flat, each
with ``register_outputs({})``), its parent tree, its dependencies (``depends_on``, the union the engine sees)."""


def _ordered(resources: list[Resource]) -> list[Resource]:
    """Providers first, then each resource after its parent, provider and dependencies."""
    by_name = {r.name: r for r in resources}
    done: dict[str, Resource] = {}

    def visit(r: Resource) -> None:
        if r.name in done:
            return
        for dep in [r.parent, r.provider, *r.depends_on]:
            if dep in by_name:
                visit(by_name[dep])
        done[r.name] = r

    for r in sorted(resources, key=lambda r: (not r.type.startswith("pulumi:providers:"), r.type, r.name)):
        visit(r)
    return list(done.values())


def build_floor(render: Render, steps: tuple[str, ...] = ()) -> Floor:
    """The flat program declaring ``render``'s custom resources (and, with ``steps``, more of its structure)."""
    namespace: dict[str, Any] = {"pulumi": pulumi}
    classes: dict[str, str] = {}
    kept = [r for r in render.resources if r.custom or "components" in steps]
    names = {r.name for r in kept}
    var = {r.name: f"r{i}" for i, r in enumerate(_ordered(kept))}
    lines = []
    for r in _ordered(kept):
        opts = []
        if r.provider:
            opts.append(f"provider={var[r.provider]}")
        if "parents" in steps and r.parent:
            opts.append(f"parent={var[r.parent]}")
        if "depends_on" in steps and r.depends_on:
            opts.append(f"depends_on=[{', '.join(var[d] for d in r.depends_on if d in names)}]")
        if r.ignore_changes:
            opts.append(f"ignore_changes={r.ignore_changes!r}")
        replace = [p for p in r.replace_on_changes if p not in _REPLACE_SET_BY_CLASS.get(r.type, [])]
        if replace:
            opts.append(f"replace_on_changes={replace!r}")
        if r.protect:
            opts.append("protect=True")
        opts_arg = f"opts=pulumi.ResourceOptions({', '.join(opts)})" if opts else None
        if not r.custom:
            lines.append(f"{var[r.name]} = pulumi.ComponentResource({r.type!r}, {r.name!r}, None"
                         f"{', ' + opts_arg if opts_arg else ''})")
            lines.append(f"{var[r.name]}.register_outputs({{}})")
            continue
        cls, crd = _sdk_class(r.type)
        alias = classes.setdefault(r.type, f"C{len(classes)}")
        namespace[alias] = cls
        args = [repr(r.name)]
        inputs = dict(r.revealed)
        if crd:
            args += [f"api_version={_literal(inputs.pop('apiVersion'))}", f"kind={_literal(inputs.pop('kind'))}"]
            for key in ("metadata", "spec"):
                if key in inputs:
                    args.append(f"{key}={_literal(inputs.pop(key))}")
            if inputs:
                args.append(f"**{_literal(inputs)}")
        else:
            kwargs = _kwarg_names(cls)
            for key, value in inputs.items():
                if r.type.startswith("kubernetes:") and key in _K8S_SET_BY_CLASS:
                    continue
                args.append(f"{_kwarg(kwargs, key, r.type)}={_literal(value)}")
        if opts_arg:
            args.append(opts_arg)
        lines.append(f"{var[r.name]} = {alias}({', '.join(args)})")
    header = [f"# {alias} = {cls.__module__}.{cls.__qualname__}" for alias, cls in
              ((a, namespace[a]) for a in classes.values())]
    source = "\n".join([*header, *lines]) + "\n"
    return Floor(source, namespace, compile(source, f"<floor {render.stack}>", "exec"))


PROCESS_FORMS = ("plain", "transform", "transform+gc")
"""The floor script's forms under ``--process``, each adding to the last: a typed-SDK program as written, then with
the render's alias transformation, then with the garbage collector handled as the render command handles it."""

_SCRIPT = """\
import gc, sys
FORM = sys.argv[1]
if FORM == "transform+gc":
    gc.disable()
import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from offline.mocks import SUBSCRIPTION, AzureMocks
from offline.runtime import run_program, without_provider_aliases
{imports}


class Counting(AzureMocks):
    registered = 0

    def new_resource(self, args):
        Counting.registered += 1
        return super().new_resource(args)


def settle():
    if FORM == "transform+gc":
        gc.collect()
        gc.freeze()


def program():
    if FORM != "plain":
        pulumi.runtime.register_stack_transformation(without_provider_aliases)
{body}


pulumi_mocks.set_mocks(Counting({stack!r}, SUBSCRIPTION), project={project!r}, stack={stack!r}, preview=False)
settle()
run_program(program)
settle()
print(Counting.registered)
"""


def floor_script(render: Render, floor: Floor) -> str:
    """The floor as a script of its own: what a typed-SDK program declaring the same resources imports and runs."""
    imports = [f"from {cls.__module__.rsplit('.', 1)[0]} import {cls.__name__} as {alias}"
               for alias, cls in floor.namespace.items() if alias != "pulumi"]
    body = "\n".join(f"    {line}" for line in floor.source.splitlines() if not line.startswith("#"))
    return _SCRIPT.format(imports="\n".join(imports), body=body, stack=render.stack, project=PROJECT)


def _child_cpu(cmd: list[str]) -> tuple[float, str]:
    """CPU seconds (user + system) of one child process, from the children's accounting, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # the floor script imports offline.mocks
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done.stdout


def measure_process(render: Render, floor: Floor, repeat: int) -> dict[str, Any]:
    """Whole-process CPU of the render command and of the floor script's forms (see ``--process``)."""
    custom = sum(r.custom for r in render.resources)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "floor.py"
        script.write_text(floor_script(render, floor))
        commands = {"program": [sys.executable, "-m", "offline", "render", "--stack", render.stack, "--out", tmp],
                    **{f"floor {form}": [sys.executable, str(script), form] for form in PROCESS_FORMS}}
        times: dict[str, list[float]] = {k: [] for k in commands}
        order = random.Random(render.stack)
        for i in range(repeat + 1):  # the first round warms the page cache and is not counted
            for key, cmd in order.sample(list(commands.items()), len(commands)):
                cpu, out = _child_cpu(cmd)
                count, want = (out.split()[1], len(render.resources)) if key == "program" else (out.split()[-1], custom)
                if int(count) != want:
                    raise SystemExit(f"{key} registered {count} resources, not {want}")
                if i:
                    times[key].append(cpu)
    median = {k: round(statistics.median(v), 3) for k, v in times.items()}
    ratios = {form: round(statistics.median(p / f for p, f in zip(times["program"], times[f"floor {form}"],
                                                                   strict=True)), 2) for form in PROCESS_FORMS}
    return {"cpu_s": median, "ratio": ratios, "all_cpu_s": {k: [round(t, 3) for t in v] for k, v in times.items()}}


def _key(r: Resource, steps: tuple[str, ...]) -> tuple:
    return (r.type, r.name, r.provider, json.dumps(r.revealed, sort_keys=True), tuple(r.ignore_changes),
            tuple(r.replace_on_changes), r.protect, r.urn if "parents" in steps else None,
            tuple(r.depends_on) if "depends_on" in steps else None)


def check_floor(render: Render, floor: Floor, steps: tuple[str, ...] = ()) -> list[Resource]:
    """Run the floor once and check it registered exactly the program's custom resources (with ``steps``, its
    components, URNs, dependencies too); returns its records."""
    recorded = floor.run(render.stack).recorded
    want = sorted(_key(r, steps) for r in render.resources if r.custom or "components" in steps)
    got = sorted(_key(r, steps) for r in recorded)
    if want != got:
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        raise SystemExit(f"floor {'+'.join(steps)} differs from the program's resources:\n  missing {missing[:3]}\n"
                         f"  extra {extra[:3]}")
    return recorded


def _cpu(fn: Any) -> float:
    gc.collect()  # each run starts from a collected heap: the previous run's garbage is not charged to this one
    start = time.process_time()
    fn()
    return time.process_time() - start


def _profile(label: str, fn: Any, top: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    print(f"--- {label}: {stats.total_tt * 1000:.0f} ms under cProfile")
    stats.sort_stats("cumulative").print_stats(top)
    print(out.getvalue())


def measure(stack: str, repeat: int, ladder: bool = False, process: bool = False) -> dict[str, Any]:
    render = render_stack(stack)  # warm-up of the program
    floor = build_floor(render)
    recorded = check_floor(render, floor)  # warm-up of the floor
    floor.run(stack, transform=False)
    runs: dict[str, Any] = {"program": lambda: render_stack(stack), "floor": lambda: floor.run(stack),
                            "floor_no_transform": lambda: floor.run(stack, transform=False)}
    if ladder:
        for i in range(1, len(LADDER) + 1):
            steps = LADDER[:i]
            step_floor = build_floor(render, steps)
            check_floor(render, step_floor, steps)
            runs["floor+" + "+".join(steps)] = lambda f=step_floor: f.run(stack)
    times: dict[str, list[float]] = {k: [] for k in runs}
    order = random.Random(stack)
    for _ in range(repeat):
        for key, fn in order.sample(list(runs.items()), len(runs)):  # a shuffled round: no variant always runs first
            times[key].append(_cpu(fn))
    median = {k: statistics.median(v) for k, v in times.items()}
    custom = sum(r.custom for r in render.resources)
    row = {
        "stack": stack,
        "resources": {"program": len(render.resources), "program_custom": custom,
                      "program_components": len(render.resources) - custom, "floor": len(recorded),
                      "floor_custom": sum(r.custom for r in recorded)},
        "repeat": repeat,
        "program_cpu_s": round(median["program"], 4),
        "floor_cpu_s": round(median["floor"], 4),
        "ratio": round(median["program"] / median["floor"], 2),
        "floor_no_transform_cpu_s": round(median["floor_no_transform"], 4),
        "min_cpu_s": {"program": round(min(times["program"]), 4), "floor": round(min(times["floor"]), 4)},
    }
    if ladder:
        row["ladder_cpu_s"] = {k: round(v, 4) for k, v in median.items() if k.startswith("floor+")}
    if process:
        row["process"] = measure_process(render, floor, repeat)
    row["all_cpu_s"] = {k: [round(t, 4) for t in v] for k, v in times.items()}
    row["machine"] = {"nproc": len(os.sched_getaffinity(0)), "python": sys.version.split()[0]}
    row["date"] = datetime.date.today().isoformat()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stack", required=True, action="append", help="repeatable")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path, help="results file to update (a list of rows, one per stack)")
    parser.add_argument("--profile", type=int, metavar="N", help="print the top N functions of each, warm")
    parser.add_argument("--emit", type=Path, help="write the generated floor program here")
    parser.add_argument("--process", action="store_true",
                        help="also time whole processes: the render command against the floor as a script")
    parser.add_argument("--ladder", action="store_true",
                        help="also time the floor plus the program's components, parents, dependencies (cumulative)")
    args = parser.parse_args(argv)
    rows = []
    for stack in args.stack:
        row = measure(stack, args.repeat, args.ladder, args.process)
        rows.append(row)
        res = row["resources"]
        print(f"{stack:14} resources program {res['program']} ({res['program_custom']} custom + "
              f"{res['program_components']} components), floor {res['floor']} custom | CPU median of "
              f"{args.repeat}: program {row['program_cpu_s'] * 1000:.0f} ms, floor {row['floor_cpu_s'] * 1000:.0f} ms,"
              f" ratio {row['ratio']:.2f} (floor without the transformation "
              f"{row['floor_no_transform_cpu_s'] * 1000:.0f} ms)")
        for key, value in row.get("ladder_cpu_s", {}).items():
            print(f"{'':14} {key:32} {value * 1000:.0f} ms")
        if "process" in row:
            cpu, ratio = row["process"]["cpu_s"], row["process"]["ratio"]
            print(f"{'':14} whole process: program {cpu['program']:.2f} CPU-s; " + ", ".join(
                f"floor {form} {cpu[f'floor {form}']:.2f} (ratio {ratio[form]:.2f})" for form in PROCESS_FORMS))
        if args.profile or args.emit:
            floor = build_floor(render_stack(stack))
            if args.emit:
                args.emit.write_text(floor.source)
            if args.profile:
                _profile(f"program {stack}", lambda: render_stack(stack), args.profile)  # noqa: B023
                _profile(f"floor {stack}", lambda: floor.run(stack), args.profile)  # noqa: B023
    if args.json:
        old = json.loads(args.json.read_text()) if args.json.exists() else []
        keep = [r for r in old if r["stack"] not in {r["stack"] for r in rows}]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(keep + rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
