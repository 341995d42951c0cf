"""The e2e probe and drill tests' stand-ins: kubectl and az as fake executables (tests/fake_cli.py) answering from
rules of recorded output, and a clock whose sleep moves it on at once."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ops.e2e.tools import Tools
from tests.fake_cli import shim

START = dt.datetime(2026, 5, 4, 10, 0, tzinfo=dt.UTC)
RUN_ID = "20260504100000"


class Clock:
    """The probes' clock: a sleep moves it on at once."""

    def __init__(self, start: dt.datetime = START) -> None:
        self.at = start

    def now(self) -> dt.datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += dt.timedelta(seconds=seconds)


class Fake:
    """kubectl and az as fake executables answering from rules (tests/fake_cli.py)."""

    def __init__(self, folder: Path, kubectl: Sequence[dict[str, Any]], az: Sequence[dict[str, Any]] = (),
                 clock: Clock | None = None) -> None:
        self.folder = folder
        for tool, rules in (("kubectl", kubectl), ("az", az)):
            (folder / f"{tool}.json").write_text(json.dumps({"rules": list(rules)}))
        clock = clock or Clock()
        fake = str(shim(folder))
        self.tools = Tools(now=clock.now, sleep=clock.sleep,
                           kubectl_argv=(fake, str(folder / "kubectl.json")),
                           az_argv=(fake, str(folder / "az.json")))

    def calls(self, tool: str) -> list[list[Any]]:
        log = self.folder / f"{tool}.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def requests(self) -> list[list[str]]:
        log = self.folder / "kubectl.requests"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def rule(*match: str, answers: list[dict[str, Any]] | None = None, **answer: Any) -> dict[str, Any]:
    return {"match": list(match), "answers": answers or [answer]}


def job_logs(job: str, text: str, *phases: str) -> list[dict[str, Any]]:
    """A Job's pods (oldest first: a pod evicted, then its replacement) and the log of each."""
    phases = phases or ("Succeeded",)
    pods = [{"metadata": {"name": f"{job}-{i}", "creationTimestamp": f"2026-05-04T10:0{i}:00Z"},
             "status": {"phase": phase}} for i, phase in enumerate(phases)]
    return [rule("get", "pods", f"batch.kubernetes.io/job-name={job}", stdout=json.dumps({"items": pods})),
            *(rule("logs", f"pod/{job}-{i}", stdout=text if i == len(phases) - 1 else "evicted\n")
              for i in range(len(phases)))]


def status(kind: str, condition: str | None, reason: str = "", message: str = "") -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True", "reason": reason, "message": message}] if condition else []
    return {"stdout": json.dumps({"kind": kind, "status": {"conditions": conditions}})}


