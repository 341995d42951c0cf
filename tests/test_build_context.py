"""Build contexts are pure: which files go in, one digest for their content."""

from __future__ import annotations

import pytest

from components.images.context import ignore_rules, is_excluded, load_context


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
