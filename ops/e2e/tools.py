"""What an end-to-end run calls outside Python, behind one seam: kubectl, az and the clock. The command builds the
real ones; the tests hand in stand-ins that print recorded timelines, so every path of the run is tested offline."""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


class ToolFailed(Exception):
    """A kubectl or az call exited non-zero or ran past its timeout; the message is one line naming the call,
    ``status`` and ``stderr`` what the call said in full (None and "" after a timeout)."""

    def __init__(self, command: str, detail: str, timed_out: bool = False, status: int | None = None,
                 stderr: str = "") -> None:
        super().__init__(f"{command}: {'timed out' if timed_out else 'failed'}: {detail}")
        self.timed_out, self.status, self.stderr = timed_out, status, stderr


def run_tool(argv: list[str], timeout_s: float, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """stdout of ``argv``; ``ToolFailed`` with the last line of stderr when it fails or hangs past ``timeout_s`` (then
    killed: ``subprocess.run``)."""
    name = " ".join(argv[:3])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd, check=False)
    except subprocess.TimeoutExpired:
        raise ToolFailed(name, f"no answer in {timeout_s:.0f} s", timed_out=True) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ToolFailed(name, last, status=done.returncode, stderr=done.stderr)
    return done.stdout


@dataclass
class Tools:
    """The seam. ``kubectl`` runs against the stack's cluster (its kubeconfig), ``az`` against the signed-in
    subscription; both raise ``ToolFailed``."""

    kubeconfig: Path | None = None
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    sleep: Callable[[float], None] = time.sleep
    kubectl_argv: tuple[str, ...] = ("kubectl",)
    az_argv: tuple[str, ...] = ("az",)
    own_cluster_only: bool = False
    """kubectl runs only with the run's own kubeconfig while it exists: never with the machine's default context,
    which names some other cluster (a probe or drill thread left running past its step, or a call before the
    cluster's credentials came)."""

    def kubectl_config(self) -> tuple[str, ...]:
        """kubectl's ``--kubeconfig`` arguments; ``ToolFailed`` where the run has no kubeconfig of its own (now)."""
        if self.kubeconfig is not None and self.kubeconfig.exists():
            return ("--kubeconfig", str(self.kubeconfig))
        if self.own_cluster_only or self.kubeconfig is not None:
            raise ToolFailed("kubectl", "no kubeconfig of the run's cluster (not fetched yet, or removed when the run "
                                        "ended): kubectl would reach the machine's default cluster")
        return ()

    def kubectl(self, *args: str, timeout_s: float = 60) -> str:
        return run_tool([*self.kubectl_argv, *self.kubectl_config(), *args], timeout_s)

    def az(self, *args: str, timeout_s: float = 120) -> str:
        return run_tool([*self.az_argv, *args, "--output", "json"], timeout_s)
