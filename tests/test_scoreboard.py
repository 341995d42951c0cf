"""Issue 37: the scoreboard of end-to-end runs, the estimates a committed run corrects, and the e2e workflow's budget
guard. The run fixture (tests/fixtures/runs/docs/results/) is a run file as ``python -m ops e2e`` writes it;
docs/results/ itself holds only real runs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from offline.docs import generated
from offline.estimates import e2e, measured, timeline
from offline.runs import RESULTS, RUN_PREFIX, RUN_SCHEMA, Clock, Leftover, Outcome, PhaseName, load_runs, run_files
from offline.scoreboard import NEVER, SCOREBOARD, scoreboard_markdown
from offline.stack_files import REPO_ROOT, stack_files
from ops.e2e import budget
from ops.runners import HOSTED, runner
from tests.helpers import command, load, shape

FIXTURE_ROOT = REPO_ROOT / "tests" / "fixtures" / "runs"
RUN_FIXTURE = FIXTURE_ROOT / RESULTS / "e2e-gpu-basics-20270105T101500Z.json"


def fixture_run():
    (run,) = load_runs(FIXTURE_ROOT)
    return run


RAN = "spot-from-zero"
"""The shape (tests/helpers.py SHAPES) of the fixture run's stack: a T4 spot pool from zero, its first node with the
pool, on the operator's precompiled driver."""


def as_committed(stack: str):
    """The fixture run's stack as committed: the shape it ran."""
    return load(shape(RAN), stack)


def with_runs(tmp_path: Path, *runs) -> Path:
    """A repository root whose stack files are the fixture run's stack (``gpu-basics``, as ``RAN``) and another one
    never run (``other``), with ``runs`` as committed run files."""
    for stack, name in (("gpu-basics", RAN), ("other", "dev-minimal")):
        config = {f"aksgpu:{key}": value for key, value in shape(name).items()}
        (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
    results = tmp_path / RESULTS
    results.mkdir(parents=True)
    for run in runs:
        (results / run.file_name).write_text(run.model_dump_json(indent=2))
    return tmp_path


# The scoreboard


def test_no_run_is_committed_yet_and_the_scoreboard_says_every_stack_never_ran():
    assert run_files() == [] and [p.name for p in (REPO_ROOT / RESULTS).glob(f"{RUN_PREFIX}*")] == [RUN_SCHEMA.name]
    page = (REPO_ROOT / SCOREBOARD).read_text()
    assert "**No stack has been run end to end on Azure yet**" in page
    for stack in stack_files():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{stack}` |"))
        # Never run, beside the estimate a first run will be held to.
        assert row.split(" | ")[1] == NEVER and re.search(r"\| - \(est\. \d+\.\d min\) \|", row), row
    assert "`make e2e STACK=STACK`" in page and "the `e2e` workflow" in page  # how to run one


def test_offline_docs_writes_the_scoreboard_and_the_run_schema_from_the_model():
    files = generated(renders={})
    assert SCOREBOARD in files and json.loads(files[RUN_SCHEMA])["title"] == "Run"
    # The committed schema accepts what the model writes, so other tools can check a run file.
    jsonschema.validate(json.loads(RUN_FIXTURE.read_text()), json.loads((REPO_ROOT / RUN_SCHEMA).read_text()))


def test_a_committed_run_fills_its_stacks_row_and_its_section(tmp_path):
    page = scoreboard_markdown(with_runs(tmp_path, fixture_run()))
    row = next(line for line in page.splitlines() if line.startswith("| [`gpu-basics`](#gpu-basics) |"))
    assert row == ("| [`gpu-basics`](#gpu-basics) | 2027-01-05 (1 run) | **passed** | 27.7 min (est. 25.6 min) | "
                   "18.4 min (est. 16.2 min) | $1.12 | none |")
    assert "No stack has been run" not in page
    assert "| `other` | never run |" in page  # the others still say so
    section = page.split("\n## gpu-basics\n", 1)[1]
    assert "commit `5bcd642`, eastus" in section
    assert "(results/e2e-gpu-basics-20270105T101500Z.json)" in section
    assert ("| gpu-node-ready | from `pulumi up`'s start | 14.8 min | 12.6 min | Node/aks-t4-12345678-vmss000000 "
            "Ready |") in section
    assert "| node-replaced | from the spot eviction | 7.6 min | 5.5 min |" in section
    assert "| destroy | from `pulumi destroy`'s start | 21.8 min | 30.0 min |" in section
    assert "| nvidia-smi names the GPU | passed | 1.6 min | GPU 0: Tesla T4 (UUID: GPU-...) |" in section
    assert "final weights equal to an uninterrupted run's" in section


def test_the_latest_run_counts_and_a_failure_says_what_failed_and_what_was_left(tmp_path):
    passed = fixture_run()
    probe = passed.probes[1].model_copy(update={"passed": False, "output": "Job train: BackoffLimitExceeded"})
    steps = tuple(s.model_copy(update={"outcome": Outcome.FAILED, "detail": "the training Job failed"})
                  if s.step.value == "probes" else s for s in passed.steps)
    failed = passed.model_copy(update={
        "started": passed.started.replace(day=12), "finished": passed.finished.replace(day=12), "passed": False,
        "steps": steps, "probes": (passed.probes[0], probe), "cost_usd": None,
        "leftovers": (Leftover(id="/subscriptions/x/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/ip",
                               kind="Microsoft.Network/publicIPAddresses"),)})
    page = scoreboard_markdown(with_runs(tmp_path, passed, failed))
    row = next(line for line in page.splitlines() if line.startswith("| [`gpu-basics`]"))
    assert ("| 2027-01-12 (2 runs) | **failed**: probes failed, probe 'the training Job finishes' failed, 1 left "
            "over |") in row and "| unknown (a size without a price) | 1 |" in row
    section = page.split("\n## gpu-basics\n", 1)[1]
    assert "| the training Job finishes | **failed** | 5.2 min | Job train: BackoffLimitExceeded |" in section
    assert "- `Microsoft.Network/publicIPAddresses` `/subscriptions/x/resourceGroups/rg/providers/" in section


# The estimates a run corrects


def test_a_committed_run_replaces_the_rows_it_measured_and_names_itself_the_rest_stay_assumed():
    assumed = timeline.load_durations(root=None)
    table = timeline.load_durations()  # the repository's runs: none yet
    assert table == assumed and not measured.is_measured(table)
    found = measured.measurements([fixture_run()], config=as_committed)
    table = measured.with_measured(assumed, found)
    where = f"({RESULTS / RUN_FIXTURE.name}: stack gpu-basics, 2027-01-05)"
    expected = {("types", "azure-native:containerservice:ManagedCluster"): 512,  # cluster-ready from the start
                ("gpu_node", "vm_boot"): 890 - 512,  # gpu-node-ready after cluster-ready
                ("gpu_node", "driver_precompiled"): 975 - 890,  # gpu-basics runs NVIDIA's precompiled driver
                ("gpu_node", "device_plugin"): 1030 - 975}
    for (section, key), seconds in expected.items():
        row = table[section][key]
        assert row["seconds"] == seconds and row["source"].startswith(f"measured: {seconds} s ")
        assert row["source"].endswith(where), row["source"]
    # What no phase brackets keeps its assumed row, and the compiled driver's row is not gpu-basics'.
    # The destroy is the stack's own (test_a_destroy_measures_its_own_stacks_destroy_and_only_a_whole_one).
    for section, key in (("gpu_node", "scale_up"), ("gpu_node", "driver_compile"), ("gpu_node", "aks_driver"),
                         ("e2e", "probes"), ("e2e", "destroy")):
        assert table[section][key] == assumed[section][key]
    assert table["types"]["azure-native:containerservice:AgentPool"] == assumed["types"][
        "azure-native:containerservice:AgentPool"]


def test_the_timeline_of_a_render_uses_the_measured_rows_with_their_run(render_shape, tmp_path):
    root = with_runs(tmp_path, fixture_run())
    table = timeline.load_durations(root=root)  # the run's stack as the root's stack file has it
    render = render_shape(RAN)
    _, found = timeline.plan(render, table)
    boot = next(p for p in found.new_node.phases if p.what == "VM boots and joins the cluster")
    assert boot.seconds == 378 and "e2e-gpu-basics-20270105T101500Z.json" in boot.source
    # Measured 378 s against 300 s assumed: the new GPU node's estimate grows by the difference.
    _, before = timeline.plan(render, timeline.load_durations(root=None))
    assert found.new_node.ready - before.new_node.ready == pytest.approx(378 - 300 + (85 - 90) + (55 - 60))


def test_the_pages_say_which_figures_a_run_measured(render_shape, tmp_path):
    from offline.docs import estimates_markdown
    root = with_runs(tmp_path, fixture_run())
    render = render_shape(RAN)
    assert "none measured on Azure" in estimates_markdown({"gpu-basics": render})
    assert "some measured by an end-to-end run on Azure" in estimates_markdown({"gpu-basics": render}, root)
    table = timeline.load_durations(root=root)
    page = timeline.timeline_markdown(render, timeline.plan(render, table), table)
    assert "Rows an end-to-end run measured on Azure say so" in page
    boot = next(line for line in page.splitlines() if line.startswith("| VM boots and joins the cluster |"))
    assert "| measured: 378 s from the cluster's create finishing" in boot
    assert "None was measured on Azure." in timeline.timeline_markdown(render)


def test_a_run_of_a_stack_whose_gpu_pools_changed_since_measures_only_what_does_not_depend_on_them():
    run = fixture_run()
    other = run.model_copy(update={"pools": tuple(p.model_copy(update={"vm_size": "Standard_NC8as_T4_v3"})
                                                  if p.name == "t4" else p for p in run.pools)})
    found = measured.measurements([other], config=as_committed)
    assert set(found) == {("types", "azure-native:containerservice:ManagedCluster"), ("gpu_node", "device_plugin")}
    gone = measured.measurements([run.model_copy(update={"stack": "retired"})], config=lambda stack: None)
    assert ("gpu_node", "vm_boot") not in gone and ("gpu_node", "device_plugin") in gone


def test_a_destroy_measures_its_own_stacks_destroy_and_only_a_whole_one(render_shape):
    """Audit 37 W7: the destroy row, the budget's ceiling then, took the latest destroy of any stack, a half-built
    one's after a failed `pulumi up` too. A run records a destroy as measured only for a whole stack at its first
    attempt (ops/e2e/run.py), and it stands for its own stack's estimate alone."""
    run = fixture_run()
    partial = run.model_copy(update={"started": run.started.replace(year=2028), "phases": tuple(
        p.model_copy(update={"measured_seconds": None}) if p.name == PhaseName.DESTROY else p for p in run.phases)})
    found = measured.destroy_measurement([run, partial], "gpu-basics")
    assert found is not None and found.seconds == 1310 and found.run == run  # the later, partial one measures nothing
    assert measured.destroy_measurement([run], "other") is None
    table = timeline.load_durations(root=None)
    assumed = table["e2e"]["destroy"]["seconds"]
    ran = render_shape(RAN)  # a stack of another name than the run's: keeps the assumed destroy
    assert e2e.phase_estimates(ran, table, runs=[run])[(PhaseName.DESTROY, Clock.DESTROY)] == assumed
    own = dataclasses.replace(ran, stack="gpu-basics")  # the run's stack
    assert e2e.phase_estimates(own, table, runs=[run])[(PhaseName.DESTROY, Clock.DESTROY)] == 1310
    assert e2e.run_estimate(own, table=table, runs=[run]).parts[-1].seconds == 1310


def test_of_two_runs_the_later_measurement_counts_and_an_unreached_phase_measures_nothing():
    run = fixture_run()
    later = run.model_copy(update={"started": run.started.replace(year=2028), "phases": tuple(
        p.model_copy(update={"measured_seconds": None}) if p.name == PhaseName.DRIVER_READY else
        p.model_copy(update={"measured_seconds": 600.0}) if p.name == PhaseName.CLUSTER_READY else p
        for p in run.phases)})
    found = measured.measurements([later, run], config=as_committed)
    cluster = found[("types", "azure-native:containerservice:ManagedCluster")]
    assert cluster.seconds == 600 and cluster.run.started.year == 2028
    assert found[("gpu_node", "driver_precompiled")].run.started.year == 2027  # the later run never got there


def test_the_vm_boot_interval_is_the_rows_step_in_every_stack_it_applies_to(renders):
    """A run measures ``vm_boot`` from cluster-ready to the first GPU node Ready: that is the estimate's boot only
    where the GPU pool's create starts as the cluster's finishes."""
    applies = [s for s, r in renders.items() if measured._gpu_pools_boot_with_the_stack(r.cfg)]
    assert applies
    for stack in applies:
        steps, found = timeline.plan(renders[stack], timeline.load_durations(root=None))
        cluster = next(s for s in steps.values() if s.type == e2e.CLUSTER)
        boot = next(p for p in found.deploy.phases if p.what == "VM boots and joins the cluster")
        assert boot.start == cluster.finish, stack


def test_the_phase_estimates_a_run_sets_beside_its_own_follow_the_first_gpu_pod_chain(render_shape):
    estimates = e2e.phase_estimates(render_shape(RAN), timeline.load_durations(root=None))
    up = [estimates[(name, Clock.UP)] for name in (PhaseName.CLUSTER_READY, PhaseName.GPU_NODE_READY,
                                                   PhaseName.DRIVER_READY, PhaseName.DEVICE_PLUGIN_READY,
                                                   PhaseName.GPU_POD_READY, PhaseName.UP)]
    assert up == [455, 755, 845, 905, 973, 1535]  # the fixture run's estimates
    assert estimates[(PhaseName.NODE_REPLACED, Clock.EVICTION)] == 330 and (PhaseName.ENDPOINT_ANSWERING,
                                                                             Clock.UP) not in estimates
    later = e2e.phase_estimates(render_shape("infiniband"), timeline.load_durations(root=None))
    assert (PhaseName.GPU_NODE_READY, Clock.UP) not in later  # its GPU pods wait for a run


# The run estimate and the budget guard


def test_a_run_is_up_probes_drill_where_declared_on_spot_and_destroy_at_the_full_scale_rate(render_shape):
    table = timeline.load_durations(root=None)
    drilled = e2e.run_estimate(render_shape("training"), table=table)  # training-autoscale: a drill on spot
    steps, found = timeline.plan(render_shape("training"), table)
    assert [p.what for p in drilled.parts] == ["`pulumi up`", "probes", "spot drill", "the drill's replacement node",
                                               "`pulumi destroy`"]
    # The replacement node waits for its first workload's image too (a new node's estimate: timeline.md).
    assert drilled.hours == pytest.approx((timeline.total_seconds(steps) + 900 + 2400 + found.new_node_workload.ready
                                           + 1800) / 3600)
    assert drilled.usd == pytest.approx(drilled.hours * drilled.hourly)
    # gpu-basics' pool is spot, but its scenario declares no drill: a run has none to pay for.
    spot = e2e.run_estimate(render_shape(RAN), table=table)
    assert [p.what for p in spot.parts] == ["`pulumi up`", "probes", "`pulumi destroy`"]
    on_demand = e2e.run_estimate(render_shape("infiniband"), table=table)  # on-demand, its GPU pods wait for a run
    assert [p.what for p in on_demand.parts] == ["`pulumi up`", "probes", "a new GPU node for the probes",
                                                 "`pulumi destroy`"]


class Estimate:
    """A RunEstimate's stand-in: ``hourly`` dollars an hour at full scale."""

    def __init__(self, hourly: float, unpriced: tuple[str, ...] = ()):
        self.hourly, self.unpriced = hourly, unpriced

    def ceiling(self, hours: float) -> float:
        return hours * self.hourly

    def text(self, hours: float) -> str:
        return f"at most ${self.ceiling(hours):,.2f} ({hours:.1f} h at full scale)"


def test_the_guard_holds_each_run_to_its_ceiling_the_jobs_hours_at_full_scale(monkeypatch):
    """Audit 37 W7: the guard held a run to its expected hours, while a run may legitimately take its jobs' limits.
    It holds the most a run can cost: the run job's and the cleanup job's minutes at the full-scale hourly cost."""
    monkeypatch.setattr(budget, "runner", lambda stack: HOSTED)
    monkeypatch.setattr(budget, "matrix_row", lambda stack, runs_on: {"stack": stack, "runner": runs_on})
    hours = budget.CEILING_HOURS
    estimates = {"cheap": Estimate(1.0), "dear": Estimate(197.386), "at-cap": Estimate(10.0 / hours)}
    planned = budget.plan(["cheap", "dear", "at-cap"], 10.0, [], estimate=estimates.__getitem__,
                          region=lambda stack: "eastus", total_cap=1000.0)
    assert planned.include == [{"stack": "cheap", "runner": HOSTED}, {"stack": "at-cap", "runner": HOSTED}]
    dear = f"at most ${197.386 * hours:,.2f} ({hours:.1f} h at full scale)"
    assert planned.refused == {"dear": f"stack dear: run cost {dear} is above the cap $10.00"}
    assert f"| `dear` | {dear} | refused: above $10.00 |" in planned.summary


def test_the_guard_holds_the_runs_together_to_the_total_cap_in_the_order_asked(monkeypatch):
    monkeypatch.setattr(budget, "runner", lambda stack: HOSTED)
    monkeypatch.setattr(budget, "matrix_row", lambda stack, runs_on: {"stack": stack})
    each = Estimate(8.0 / budget.CEILING_HOURS)  # $8 at most a run
    planned = budget.plan(["a", "b", "c", "d"], 10.0, [], estimate=lambda stack: each if stack != "c" else
                          Estimate(1.0 / budget.CEILING_HOURS), region=lambda stack: "eastus", total_cap=20.0)
    assert planned.include == [{"stack": "a"}, {"stack": "b"}, {"stack": "c"}]  # $8 + $8 + $1; d's $8 is over
    assert planned.refused == {"d": f"stack d: run cost at most $8.00 ({budget.CEILING_HOURS:.1f} h at full scale) "
                                    "would take the matrix's total to $25.00, above the total cap $20.00"}
    assert "Cap: $10.00 a run and $20.00 in all ($17.00 planned)" in "\n".join(planned.summary)


def test_the_default_caps_let_every_stack_run_but_the_one_on_two_h100_nodes(render_of):
    # budget._estimate's estimate of each stack's render, from the renders the suite shares
    ceilings = {stack: e2e.run_estimate(render_of(stack)).ceiling(budget.CEILING_HOURS) for stack in stack_files()}
    over = {stack for stack, usd in ceilings.items() if usd > budget.DEFAULT_MAX_COST_USD}
    assert over == {"distributed-training"}
    assert sum(usd for stack, usd in ceilings.items() if stack not in over) <= budget.DEFAULT_MAX_TOTAL_COST_USD


def test_the_guard_refuses_a_stack_it_cannot_price_one_that_is_up_and_one_without_a_runner(monkeypatch):
    groups = [{"name": "rg-live", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "live", "lifetime": "demo"}},
              {"name": "rg-kept", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "kept", "lifetime": "retained"}},
              {"name": "rg-other", "tags": {"pulumi-project": "another", "pulumi-stack": "theirs"}}]
    monkeypatch.setattr(budget, "runner", lambda stack: None if stack == "private" else HOSTED)
    monkeypatch.setattr(budget, "matrix_row", lambda stack, runs_on: {"stack": stack, "runner": runs_on})
    estimates = {"kept": Estimate(0.1), "theirs": Estimate(0.1), "unpriced": Estimate(0.1, ("t4",))}
    planned = budget.plan(["live", "kept", "theirs", "unpriced", "private"], 10.0, groups,
                          estimate=estimates.__getitem__, region=lambda stack: "eastus")
    # A group kept only for protected data is not up; another project's group is not this stack's.
    assert [row["stack"] for row in planned.include] == ["kept", "theirs"]
    assert planned.refused == {
        "live": "stack live is up (its resource group exists): an end-to-end run destroys what it deploys; destroy it "
                "first (destroy.yml) or run another stack",
        "unpriced": f"stack unpriced: run cost at most ${0.1 * budget.CEILING_HOURS:.2f} ({budget.CEILING_HOURS:.1f} h "
                    "at full scale) cannot be held to the cap $10.00: no price for pool(s) t4 in eastus (refresh: "
                    "python -m ops catalogue --regions eastus)",
        "private": "stack private has a private API server and no ciRunner: hosted runners cannot reach it "
                   "(docs/deploying.md: Private clusters)"}


@pytest.mark.parametrize("value, cap", [("", budget.DEFAULT_MAX_COST_USD), ("25", 25.0), ("$7.5", 7.5)])
def test_the_cap_is_dollars_and_empty_means_the_default(value, cap):
    assert budget.max_cost(value) == cap
    assert budget.max_total_cost(value) == (budget.DEFAULT_MAX_TOTAL_COST_USD if not value else cap)


def test_stacks_are_named_by_commas_or_spaces_or_all():
    known = ["a", "b", "c"]
    assert budget.requested("all", known) == known == budget.requested("", known)
    assert budget.requested("c, a a", known) == ["c", "a"]


def test_the_workflows_command_prints_the_matrix_and_one_error_line_per_refused_stack(tmp_path):
    stack = next(s for s in stack_files() if runner(s) == HOSTED)
    summary = tmp_path / "summary.md"
    # In this process (tests/helpers.py command); the workflow runs it as its own (tests/test_workflows.py).
    done = command("ops", "e2e-matrix", stack, "--max-cost", "1000000", "--summary", summary, input="[]")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [row["stack"] for row in json.loads(done.stdout)["include"]] == [stack]
    assert f"| `{stack}` | $" in summary.read_text() and "| runs |" in summary.read_text()
    # Nothing of what was asked can run: the plan fails, so the workflow says so, in one line per stack.
    refused = command("ops", "e2e-matrix", stack, "--max-cost", "0.01", input="[]")
    assert refused.returncode == 1 and json.loads(refused.stdout) == {"include": []}
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f"::error::stack {stack}: run cost $") and line.endswith("above the cap $0.01")
