"""The e2e workflow's plan (``python -m ops e2e-matrix``): which of the requested stacks run end to end, each on its
runner in its scenario's environment, and which are refused, each in one line.

Refused: a stack whose run can cost more than the cap, or cannot be held to it because a pool has no price; a stack
whose run would take the matrix's total over the total cap; and a stack that is up now (its resource group exists
and is not merely kept for protected data), since a run destroys what it deploys. What a run can cost is its
ceiling (offline/estimates/e2e.py): the longest the workflow can keep the stack up, the run job's limit and then the
cleanup job's, which follows it at once (``RUN_JOB_MINUTES``, ``CLEANUP_JOB_MINUTES``: the tests hold e2e-stack.yml
to them, and them to the run's longest, ``ops.e2e.run.Settings.longest_s``), at the stack's full-scale hourly cost.
The expected cost is shown beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.cli import error, json_input, unknown_stack
from offline.stack_files import stack_files
from ops.runners import matrix_row, runner
from program.config.expiry import LIFETIME, RETAINED, stack_groups
from program.config.keys import PROJECT
from program.markdown import table

RUN_JOB_MINUTES = 355
"""e2e-stack.yml's run job ``timeout-minutes``: its e2e step's own limit (``RUN_STEP_MINUTES``), the job's setup
before it and two minutes after it (the upload, "Complete job"), five minutes inside a GitHub-hosted job's 6 hours
("Each job in a workflow can run for up to 6 hours of execution time", Actions limits)."""
RUN_STEP_MINUTES = 338
"""e2e-stack.yml's e2e step ``timeout-minutes``: the run's longest (``Settings.longest_s``, 336 minutes) and two more
for what it leaves uncounted (each wait's last tick, starting processes). A step past its own limit fails and the job
goes on, its outputs reported and the cleanup after it, rather than the job being cancelled; the run's file, written
at its end, is then lost."""
CLEANUP_JOB_MINUTES = 125
"""e2e-stack.yml's cleanup job ``timeout-minutes``: ``python -m ops e2e-cleanup`` (``Settings.cleanup_longest_s``, 107
minutes: its start with a second try of each read, `pulumi cancel`, the Jobs' drain, a destroy and its cancel grace,
the leftover check) and its setup, right after a run job that did not pass (cancelled, timed out, or failed before
its destroy was done)."""
CEILING_HOURS = (RUN_JOB_MINUTES + CLEANUP_JOB_MINUTES) / 60
DEFAULT_MAX_COST_USD = 40.0
"""The per-run cap where neither the dispatch's ``max_cost`` nor the repository variable ``E2E_MAX_COST_USD`` names
one: above every stack's ceiling today (the dearest, gpu-sharing-mig's and llm-serving-kaito's, about $35) but
distributed-training's two ND96 H100 nodes (docs/lifecycle.md)."""
DEFAULT_MAX_TOTAL_COST_USD = 200.0
"""The cap on the sum of the matrix's ceilings where neither ``max_total_cost`` nor ``E2E_MAX_TOTAL_COST_USD`` names
one: every stack but distributed-training fits in it today."""
ALL = "all"


@dataclass(frozen=True)
class Planned:
    include: list[dict[str, Any]]
    """The job matrix's rows, as ``python -m ops matrix`` writes them (``ops.runners.matrix_row``)."""
    refused: dict[str, str]
    """Stack → why it does not run, one line naming the stack."""
    summary: list[str]
    """The plan as a Markdown table (the workflow's step summary)."""


def requested(value: str, known: Iterable[str]) -> list[str]:
    """``all``, or stack names separated by commas or spaces, in the order given, each once."""
    names = list(known) if value.strip() in ("", ALL) else value.replace(",", " ").split()
    return list(dict.fromkeys(names))


def budget_refusal(stack: str, cost: float, text: str, unpriced: Iterable[str], region: str, cap: float) -> str | None:
    """Why a stack's run is over the cap, in one line, or None. ``cost``: its ceiling; ``text``: the estimate as the
    line shows it."""
    unpriced = list(unpriced)
    if unpriced:
        return (f"stack {stack}: run cost {text} cannot be held to the cap ${cap:,.2f}: no price for pool(s) "
                f"{', '.join(unpriced)} in {region} (refresh: python -m ops catalogue --regions {region})")
    if cost > cap:
        return f"stack {stack}: run cost {text} is above the cap ${cap:,.2f}"
    return None


Estimator = Callable[[str], Any]
"""Stack → its ``offline.estimates.e2e.RunEstimate`` (a stand-in in tests)."""


def _estimate(stack: str) -> Any:
    from offline.estimates.e2e import run_estimate
    from offline.render import render_stack
    return run_estimate(render_stack(stack, stack_files()[stack]))


def plan(stacks: Iterable[str], cap: float, groups: Iterable[Mapping[str, Any]], estimate: Estimator = _estimate,
         project: str = PROJECT, region: Callable[[str], str] | None = None,
         total_cap: float = DEFAULT_MAX_TOTAL_COST_USD) -> Planned:
    """The matrix of the stacks that may run, and why each other one may not. Stacks are taken in the order asked;
    one whose ceiling would take the matrix's over ``total_cap`` is refused, and the ones after it still tried."""
    from offline.stack_files import stack_config
    region = region or (lambda stack: stack_config(stack).location)
    live = stack_groups(groups, project)
    include, refused, rows = [], {}, []
    total = 0.0
    for stack in stacks:
        tags = live.get(stack)
        if tags is not None and tags.get(LIFETIME) != RETAINED:
            refused[stack] = (f"stack {stack} is up (its resource group exists): an end-to-end run destroys what it "
                              "deploys; destroy it first (destroy.yml) or run another stack")
            rows.append((stack, "-", "refused: up now"))
            continue
        runs_on = runner(stack)
        if runs_on is None:
            refused[stack] = (f"stack {stack} has a private API server and no ciRunner: hosted runners cannot reach it "
                              "(docs/deploying.md: Private clusters)")
            rows.append((stack, "-", "refused: no runner"))
            continue
        found = estimate(stack)
        ceiling, text = found.ceiling(CEILING_HOURS), found.text(CEILING_HOURS)
        if why := budget_refusal(stack, ceiling, text, found.unpriced, region(stack), cap):
            refused[stack] = why
            rows.append((stack, text, "refused: no price" if found.unpriced else f"refused: above ${cap:,.2f}"))
            continue
        if total + ceiling > total_cap:
            refused[stack] = (f"stack {stack}: run cost {text} would take the matrix's total to "
                              f"${total + ceiling:,.2f}, above the total cap ${total_cap:,.2f}")
            rows.append((stack, text, f"refused: total above ${total_cap:,.2f}"))
            continue
        total += ceiling
        include.append(matrix_row(stack, runs_on))
        rows.append((stack, text, "runs"))
    summary = ["### End-to-end runs", "",
               f"Cap: ${cap:,.2f} a run and ${total_cap:,.2f} in all (${total:,.2f} planned): the most a run can cost, "
               f"the {CEILING_HOURS:.1f} h the workflow can keep a stack up (the run job's limit and the cleanup "
               "job's) with every pool at its maximum; the expected cost beside it (`pulumi up`, probes, spot drill, "
               "`pulumi destroy`). The stacks go one at a time, each run followed by its cleanup (e2e.yml: "
               "max-parallel).", "",
               *table(["stack", "run cost", "verdict"], [(f"`{s}`", cost, v) for s, cost, v in rows])]
    return Planned(include, refused, summary)


def _dollars(value: str, default: float, flag: str, what: str) -> float:
    if not value.strip():
        return default
    try:
        cap = float(value.strip().removeprefix("$"))
    except ValueError:
        cap = -1.0
    if not cap > 0 or cap == float("inf"):
        raise argparse.ArgumentTypeError(f"{flag} {value!r}: expected US dollars {what}, a number above 0")
    return cap


def max_cost(value: str) -> float:
    """The per-run cap in US dollars; empty: ``DEFAULT_MAX_COST_USD`` (the workflow passes the input, else the
    variable)."""
    return _dollars(value, DEFAULT_MAX_COST_USD, "--max-cost", "a run may cost")


def max_total_cost(value: str) -> float:
    """The cap on the matrix's total in US dollars; empty: ``DEFAULT_MAX_TOTAL_COST_USD``."""
    return _dollars(value, DEFAULT_MAX_TOTAL_COST_USD, "--max-total-cost", "the runs together may cost")


def e2e_matrix_command(args: argparse.Namespace) -> int:
    known = stack_files()
    names = requested(args.stacks, known)
    if problems := [p for n in names if (p := unknown_stack(n))]:
        return error(problems[0])
    groups = json_input(sys.stdin.read(), "stdin (az group list --output json)")
    planned = plan(names, args.max_cost, groups, project=args.project, total_cap=args.max_total_cost)
    for why in planned.refused.values():
        print(f"::error::{why}", file=sys.stderr)
    if args.summary:
        with Path(args.summary).open("a") as out:
            out.write("\n".join(planned.summary) + "\n")
    print(json.dumps({"include": planned.include}))
    # Nothing to run of what was asked: the workflow fails, saying why above; a partial plan runs what passed.
    return 1 if names and not planned.include else 0
