"""Build contexts are pure: which files go in, one digest for their content."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from components.images import context as contexts
from components.images.context import PROJECT_ROOT, DockerIgnore, az_disagreement, load_context, read_ignore, stage


def folder(tmp_path, files: dict[str, str], ignore: str | None = None):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if ignore is not None:
        (tmp_path / ".dockerignore").write_text(ignore)
    return tmp_path


CASES = json.loads((Path(__file__).parent / "fixtures" / "dockerignore" / "cases.json").read_text())
"""moby/patternmatcher's own answers (scripts/derive_dockerignore_cases.py)."""


def test_every_path_is_excluded_or_sent_as_docker_decides():
    wrong = [(case["source"], case["patterns"], answer["path"], answer["excluded"])
             for case in CASES["match"] if not case.get("error")
             for answer in case["answers"]
             if DockerIgnore(case["patterns"]).excludes(answer["path"]) is not answer["excluded"]]
    assert not wrong, f"Docker answers otherwise (source, patterns, path, Docker's answer): {wrong}"
    assert sum(len(case.get("answers") or []) for case in CASES["match"]) > 200


def test_a_pattern_docker_refuses_is_refused():
    refused = [case["patterns"] for case in CASES["match"] if case.get("error")]
    assert len(refused) > 10
    for patterns in refused:
        with pytest.raises(ValueError, match="pattern"):
            DockerIgnore(patterns).excludes("x")


def test_dockerignore_files_are_read_into_the_patterns_docker_reads():
    project = [{"text": c["text"], "patterns": c["patterns"]} for c in CASES["match"] if c.get("text")]
    for ignore in [*CASES["ignore"], *project]:
        assert read_ignore(ignore["text"]) == ignore["patterns"], ignore["text"]


@pytest.mark.parametrize("ignore", sorted(PROJECT_ROOT.glob("docker/*/.dockerignore")), ids=lambda p: p.parent.name)
def test_the_project_dockerignore_files_are_the_ones_docker_was_asked_about(ignore):
    asked = {c["source"]: c["text"] for c in CASES["match"] if c.get("text")}
    assert asked.get(ignore.relative_to(PROJECT_ROOT).as_posix()) == ignore.read_text(), \
        "regenerate tests/fixtures/dockerignore/cases.json (scripts/derive_dockerignore_cases.py)"


def test_a_star_does_not_cross_folders_so_a_nested_file_changes_the_digest(tmp_path):
    root = folder(tmp_path, {"Dockerfile": "FROM scratch\n", "top.tmp": "", "sub/a.tmp": "1"}, ignore="*.tmp\n")
    first = load_context(str(root))
    assert "sub/a.tmp" in first.files and "top.tmp" not in first.files
    (root / "sub" / "a.tmp").write_text("2")
    assert load_context(str(root)).digest != first.digest


def test_function_context_holds_exactly_what_the_dockerfile_copies():
    context = load_context("docker/function")
    assert context.files == ("Dockerfile", "answer_request.py", "device_status.py", "fetch_model.py",
                             "function_app.py", "host.json", "reader.py", "requirements.txt")


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


# What `az acr build` (build mode acr) reads differs: Azure/azure-cli src/azure-cli/azure/cli/command_modules/acr/
# _archive_utils.py, _load_dockerignore_file (line.rstrip(), no cleaning) and IgnoreRule (a leading "/" and trailing
# "/" dropped from "!" lines only). Docker excludes these; az uploads what they name.
@pytest.mark.parametrize("line, docker, az", [
    ("/build", "build", "/build"), ("build/", "build", "build/"), ("  tmp", "tmp", "  tmp"),
    ("! keep.py", "!keep.py", "! keep.py"), ("./cache", "cache", "./cache")])
def test_a_dockerignore_line_az_acr_build_reads_otherwise_is_refused_naming_the_form_both_read(tmp_path, line,
                                                                                                docker, az):
    root = folder(tmp_path, {"Dockerfile": "FROM scratch\n", "build/x.py": ""}, ignore=f"*.log\n{line}\n")
    with pytest.raises(ValueError) as raised:
        load_context(str(root))
    message = str(raised.value)
    assert message == (f"build context {root}: .dockerignore pattern {line!r}: Docker reads {docker!r} but az acr "
                       f"build reads {az!r} (it keeps leading spaces and a leading or trailing '/' on an exclusion); "
                       f"write {docker!r}")


@pytest.mark.parametrize("line", ["build", "!/keep.py", "!keep/", "# a comment", "*.tmp   ", "**/*.log", ""])
def test_a_dockerignore_line_both_read_alike_is_taken(line):
    assert az_disagreement(f"*\n{line}\n!Dockerfile\n") is None


def test_the_dockerfile_and_the_dockerignore_are_in_the_digest_whatever_it_excludes(tmp_path):
    """Both builders always build with the Dockerfile; without a `!Dockerfile` line an edit to it did not rebuild."""
    root = folder(tmp_path, {"Dockerfile": "FROM scratch\n", "app.py": ""}, ignore="*\n!app.py\n")
    first = load_context(str(root))
    assert first.files == ("Dockerfile", "app.py")
    (root / "Dockerfile").write_text("FROM scratch\nCOPY app.py /\n")
    second = load_context(str(root))
    assert second.digest != first.digest
    (root / ".dockerignore").write_text("*\n!app.py\n!Dockerfile\n")
    assert load_context(str(root)).digest != second.digest


def checkout(root: Path, umask: int, files: dict[str, str], executable: str) -> None:
    """What a clone under ``umask`` writes: git records only the executable bit (``executable``)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod((0o777 if name == executable else 0o666) & ~umask)


def what_pulumi_docker_hashes(folder: Path) -> list[tuple[str, str, bytes]]:
    """Per regular file, what pulumi-docker's context digest takes (pulumi/pulumi-docker v5.1.0
    provider/provider.go:589-593, hashPath): the relative path, Go's FileMode.String() (stat.filemode's form for a
    regular file) and the content."""
    return sorted((p.relative_to(folder).as_posix(), stat.filemode(p.stat().st_mode), p.read_bytes())
                  for p in folder.rglob("*") if p.is_file())


def test_one_tag_is_one_build_input_whatever_the_checkouts_umask(tmp_path, monkeypatch):
    """fn audit #3: pulumi-docker rebuilds when a file's permission bits change (they are in its context digest),
    and a desktop clones with umask 002 where CI has 022: without the staged copy, each deploy from the other machine
    rebuilt the same tag, rolled its pods and reran its Jobs."""
    files = {"Dockerfile": "FROM scratch\n", "app.py": "print(1)\n", "sub/run.sh": "#!/bin/sh\n", "x.log": ""}
    monkeypatch.setattr(contexts, "PROJECT_ROOT", tmp_path)
    staged = {}
    for umask in (0o022, 0o002, 0o077):
        checkout(tmp_path / "one", umask, files, executable="sub/run.sh")
        (tmp_path / "one" / ".dockerignore").write_text("*.log\n")
        context = load_context("one")
        assert stage(context) == ".image-contexts/one"
        staged[umask] = what_pulumi_docker_hashes(tmp_path / ".image-contexts" / "one")
    assert staged[0o022] == staged[0o002] == staged[0o077]
    assert [(name, mode) for name, mode, _ in staged[0o002]] == [
        (".dockerignore", "-rw-r--r--"), ("Dockerfile", "-rw-r--r--"), ("app.py", "-rw-r--r--"),
        ("sub/run.sh", "-rwxr-xr-x")]
    assert stat.S_IMODE(os.stat(tmp_path / ".image-contexts" / "one" / "sub").st_mode) == 0o755


def test_the_staged_copy_drops_what_the_context_no_longer_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(contexts, "PROJECT_ROOT", tmp_path)
    root = folder(tmp_path / "ctx", {"Dockerfile": "FROM scratch\n", "old/gone.py": "", "kept.py": "1"})
    stage(load_context("ctx"))
    (root / "old" / "gone.py").unlink()
    (root / "kept.py").write_text("2")
    stage(load_context("ctx"))
    staged = tmp_path / ".image-contexts" / "ctx"
    assert sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*")) == ["Dockerfile", "kept.py"]
    assert (staged / "kept.py").read_text() == "2"


def test_only_a_folder_of_the_project_is_staged(tmp_path):
    with pytest.raises(ValueError, match="stage a folder of the project"):
        stage(load_context(str(folder(tmp_path, {"Dockerfile": "FROM scratch\n"}))))
