"""What the derive_*_cases.py scripts share: run a Go original against a checkout of its module, offline, and name
the checkout's version for the fixture they write."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

GO_ENV = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", GOWORK="off")


def checkout_version(checkout: Path) -> tuple[str, str]:
    """The checkout's commit and its nearest tag (``git describe``)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True, check=True).stdout.strip()
    return git("rev-parse", "HEAD"), git("describe", "--tags", "--always")


def go_run(checkout: Path, module: str, version: str, main_go: str, stdin: str) -> str:
    """stdout of ``main_go`` run with ``stdin`` in a throwaway module whose ``module`` (required at ``version``) is
    replaced by ``checkout``."""
    with tempfile.TemporaryDirectory() as work:
        go_dir = Path(work)
        (go_dir / "go.mod").write_text(f"module derive\n\ngo 1.19\n\nrequire {module} {version}\n\n"
                                       f"replace {module} => {checkout}\n")
        (go_dir / "main.go").write_text(main_go)
        return subprocess.run(["go", "run", "."], input=stdin, capture_output=True, text=True, check=True,
                              cwd=go_dir, env=GO_ENV).stdout


def go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True,
                          env=GO_ENV).stdout.strip()
