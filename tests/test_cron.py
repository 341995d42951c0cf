"""A CronJob's schedule as the API server reads it (program/config/cron.py), held to robfig/cron's own answers."""

from __future__ import annotations

import json

import pytest

from program.config.cron import duration_error, schedule_error
from tests.upstream import FIXTURES

CASES = json.loads((FIXTURES / "cron" / "cases.json").read_text())
"""robfig/cron v3.0.1 ParseStandard's answer for each schedule (scripts/derive_cron_cases.py runs the Go original)."""


@pytest.mark.parametrize("case", CASES["cases"], ids=[repr(c["schedule"]) for c in CASES["cases"]])
def test_a_schedule_is_taken_exactly_when_robfig_cron_parses_it_and_it_names_no_time_zone(case):
    """Issue 35 audit NIT: '@every 6h' and '+1 2 * * *' were refused though the API server takes them
    (kubernetes pkg/apis/batch/validation validateScheduleFormat: cron.ParseStandard, then no TZ in the schedule)."""
    ours = schedule_error(case["schedule"], "timeZone")
    if "TZ" in case["schedule"]:
        assert ours is not None and "timeZone" in ours
    else:
        assert (ours is None) == ("error" not in case), (ours, case.get("error"))


def test_the_cases_cover_what_the_audit_found_and_both_verdicts():
    verdicts = {c["schedule"]: "error" not in c for c in CASES["cases"]}
    assert verdicts["@every 6h"] and verdicts["+1 2 * * *"] and not verdicts["@every 1d"]
    assert sum(verdicts.values()) >= 40 and sum(not v for v in verdicts.values()) >= 40
    assert "v3.0.1" in CASES["source"]


@pytest.mark.parametrize("text, problem", [
    ("1x", "unknown unit 'x'"), ("1", "without a unit"), ("", "is not a duration"), ("2562048h", "longer than")])
def test_a_bad_every_names_what_go_refuses_in_its_duration(text, problem):
    assert problem in (duration_error(text) or "")
    assert problem in (schedule_error(f"@every {text}", "timeZone") or "")
