"""Build contexts are pure: which files go in, one digest for their content, a reproducible tarball."""

from __future__ import annotations

import hashlib
import tarfile

import pulumi
import pytest

from aksgpu.images.built import image_reference
from aksgpu.images.context import ignore_rules, is_excluded, load_context


def folder(tmp_path, files: dict[str, str], ignore: str | None = None):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if ignore is not None:
        (tmp_path / ".dockerignore").write_text(ignore)
    return tmp_path


@pytest.mark.parametrize(
    "path, ignore, excluded",
    [
        ("app.py", "*\n!app.py\n", False),
        ("notes.md", "*\n!app.py\n", True),
        ("tests/test_app.py", "tests\n", True),
        ("src/__pycache__/app.pyc", "**/__pycache__\n", True),
        ("app.py", "# comment\n\n*.py\n!app.py\n", False),
        ("app.py", "!app.py\n*.py\n", True),  # the last matching rule wins
    ],
)
def test_dockerignore_rules_decide_like_docker(path, ignore, excluded):
    assert is_excluded(path, ignore_rules(ignore)) is excluded


def test_function_context_holds_exactly_what_the_dockerfile_copies():
    context = load_context("docker/function")
    assert context.files == ("Dockerfile", "answer_request.py", "device_status.py", "function_app.py",
                             "host.json", "reader.py", "requirements.txt")


def test_digest_changes_with_content_and_not_with_ignored_files(tmp_path):
    root = folder(tmp_path, {"Dockerfile": "FROM scratch\n", "app.py": "print(1)\n"}, ignore="*.log\n")
    first = load_context(str(root))
    (root / "debug.log").write_text("noise")
    assert load_context(str(root)).digest == first.digest
    (root / "app.py").write_text("print(2)\n")
    changed = load_context(str(root))
    assert changed.digest != first.digest and changed.tag != first.tag
    assert len(changed.tag) == 16


def test_a_context_without_dockerfile_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Dockerfile"):
        load_context(str(folder(tmp_path, {"app.py": ""})))


def test_tarball_is_byte_identical_for_identical_content(tmp_path):
    root = folder(tmp_path / "ctx", {"Dockerfile": "FROM scratch\n", "bin/run.sh": "#!/bin/sh\n"})
    (root / "bin/run.sh").chmod(0o755)
    context = load_context(str(root))
    a = context.write_tarball(tmp_path / "a.tar.gz")
    b = context.write_tarball(tmp_path / "b.tar.gz")
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    with tarfile.open(a) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == ["Dockerfile", "bin/run.sh"]
    assert members["bin/run.sh"].mode == 0o755 and members["Dockerfile"].mode == 0o644
    assert {(m.mtime, m.uid, m.gid) for m in members.values()} == {(0, 0, 0)}


def test_a_succeeded_build_gives_the_pushed_digest():
    result = {"status": "Succeeded", "run_id": "ca1",
              "output_images": [{"repository": "function", "tag": "abc", "digest": "sha256:99"}]}
    assert image_reference("cr.azurecr.io", "function", "abc", result) == "cr.azurecr.io/function@sha256:99"


@pytest.mark.parametrize("result, says", [
    ({"status": "Failed", "run_id": "ca7", "output_images": []}, "image build ca7 of function:abc ended Failed"),
    ({"status": "Queued", "run_id": "ca8"}, "ended Queued"),
    (None, "ended without a status"),
    ({"status": "Succeeded", "run_id": "ca9", "output_images": []}, "succeeded but reported no pushed digest"),
])
def test_a_build_that_did_not_push_a_digest_stops_pulumi_up_naming_the_run(result, says):
    with pytest.raises(pulumi.RunError) as error:
        image_reference("cr.azurecr.io", "function", "abc", result)
    assert says in str(error.value) and "\n" not in str(error.value)
