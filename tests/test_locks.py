"""Every Python dependency is locked with its hash (Why #9: 77 of 108 installed packages floated), and what is
exported from the locks is fresh."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest

from offline.stack_files import REPO_ROOT

UV = REPO_ROOT / ".venv-tools" / "bin" / "uv"


def uv(*args: str) -> subprocess.CompletedProcess:
    assert UV.is_file(), "make install puts uv in .venv-tools"
    return subprocess.run([str(UV), *args], capture_output=True, text=True, cwd=REPO_ROOT)


@pytest.mark.parametrize("project", [".", "tools/checkov"])
def test_each_lock_matches_its_pyproject(project):
    result = uv("lock", "--check", "--offline", "--project", project)
    assert result.returncode == 0, result.stderr


def test_every_locked_package_carries_hashes():
    for lock in (REPO_ROOT / "uv.lock", REPO_ROOT / "tools" / "checkov" / "uv.lock"):
        packages = tomllib.loads(lock.read_text())["package"]
        for package in packages:
            if package["source"].get("virtual"):
                continue  # the project itself
            files = package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else [])
            assert files and all(f["hash"].startswith("sha256:") for f in files), (lock.name, package["name"])


def test_the_policy_packs_requirements_are_the_lock_exported():
    """The Pulumi CLI installs the pack's environment with pip from policy/requirements.txt: it must be the lock's."""
    result = uv("export", "--frozen", "--only-group", "policy", "--no-emit-project")
    assert result.returncode == 0, result.stderr
    ours = (REPO_ROOT / "policy" / "requirements.txt").read_text()
    assert ours.split("\n", 2)[2] == result.stdout.split("\n", 2)[2], "run: make lock"


def test_the_tests_run_the_images_own_torch():
    """The CPU tests of docker/ load the torch the images pin, so a bump of one is a bump of both."""
    dev = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
    ours = next(d for d in dev if isinstance(d, str) and d.startswith("torch=="))
    for image in ("function", "jobs"):
        pins = (REPO_ROOT / "docker" / image / "requirements.in").read_text().split()
        assert ours in pins, (image, ours)


def test_the_runtime_pins_every_direct_dependency_exactly():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", d) for d in project["dependencies"]), project["dependencies"]
