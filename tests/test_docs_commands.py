"""Commands in the docs run as written (Why #7, newcomer #2): every shell block of the README and the docs parses and
passes shellcheck, and each scenario page's try-it blocks run against stand-in `pulumi`, `az`, `kubectl` and
`curl` that answer with the stack's rendered outputs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from offline.docs import scenario_page
from offline.stack_files import REPO_ROOT
from stacks import REGISTRY
from tests.tools import venv_tool

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")),
         *sorted((REPO_ROOT / "stacks").glob("*/README.md"))]
FENCE = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.DOTALL | re.MULTILINE)
STAND_INS = ("az", "kubectl", "kubelogin", "curl", "hf")


def shell_blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def try_it_blocks(page: Path) -> list[str]:
    """The shell blocks under a page's "Try it" heading, up to the next heading of any level."""
    sections = re.split(r"^#+ ", page.read_text(), flags=re.MULTILINE)
    return [block for section in sections if section.startswith("Try it") for block in shell_blocks(section)]


BLOCKS = [(page, i, block) for page in PAGES for i, block in enumerate(shell_blocks(page.read_text()))]


@pytest.mark.parametrize("page, index, block", BLOCKS,
                         ids=[f"{p.relative_to(REPO_ROOT)}#{i}" for p, i, _ in BLOCKS])
def test_every_shell_block_in_the_docs_passes_shellcheck(page, index, block):
    result = subprocess.run([venv_tool("shellcheck"), "--shell=bash", "--format=gcc", "-"], input=block,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_shellcheck_catches_what_broke_the_docs():
    """A command substitution of an output holding `&&` and `#` reaches `az` as words (the old gpu-basics line)."""
    result = subprocess.run([venv_tool("shellcheck"), "--shell=bash", "-"], input="$(pulumi stack output x)\n",
                            capture_output=True, text=True)
    assert "SC2091" in result.stdout


def stand_ins(folder: Path, outputs: dict[str, object]) -> dict[str, str]:
    """A PATH whose `pulumi` prints the render's outputs (failing, as the CLI does, for one the stack lacks) and whose
    Azure and Kubernetes tools log their arguments and succeed."""
    folder.mkdir()
    (folder / "outputs.json").write_text(json.dumps(outputs))
    log = folder / "calls.jsonl"
    (folder / "pulumi").write_text(f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
open({str(log)!r}, "a").write(json.dumps(["pulumi", *args]) + "\\n")
if args[:2] == ["stack", "output"]:
    outputs = json.load(open({str(folder / "outputs.json")!r}))
    if args[2] not in outputs:
        sys.exit(f"error: current stack does not have output property {{args[2]!r}}")
    value = outputs[args[2]]
    print(value if isinstance(value, str) else json.dumps(value))
""")
    for tool in STAND_INS:
        (folder / tool).write_text(f"""#!{sys.executable}
import json, sys
open({str(log)!r}, "a").write(json.dumps([{tool!r}, *sys.argv[1:]]) + "\\n")
""")
    for path in folder.iterdir():
        path.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


SCENARIO_BLOCKS = [(name, i, block) for name in REGISTRY
                   for i, block in enumerate(try_it_blocks(REPO_ROOT / scenario_page(name)))]


@pytest.mark.parametrize("scenario, index, block", SCENARIO_BLOCKS, ids=[f"{s}#{i}" for s, i, _ in SCENARIO_BLOCKS])
def test_each_try_it_block_runs_against_the_stacks_outputs(scenario, index, block, render_of, tmp_path):
    env = stand_ins(tmp_path / "bin", render_of(scenario).outputs)
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", f"{block}\nwait"], capture_output=True,
                            text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    calls = [json.loads(line) for line in (tmp_path / "bin" / "calls.jsonl").read_text().splitlines()]
    tools = [c for c in calls if c[0] in STAND_INS]
    assert tools, "the block ran no command of the stack"
    for call in tools:
        assert not any(arg.startswith("#") or arg in ("&&", "||") for arg in call), call


def test_every_scenario_page_has_a_try_it_block_that_uses_its_outputs():
    for name in REGISTRY:
        blocks = try_it_blocks(REPO_ROOT / scenario_page(name))
        assert any('eval "$(pulumi stack output ' in b for b in blocks), name



PROJECT_CLI = re.compile(r"(?<![\w.])([\w./-]*?)python3? -m (offline|ops)\b([^`\n]*)")
COMMAND_END = re.compile(r"\s(?:[|>;)#]|&&)|[`)]")


def project_commands(page: Path) -> list[tuple[str, str, str]]:
    """Each ``python -m offline|ops ...`` a page shows outside HTML comments: (what comes before ``python``, the
    package, the rest of the command)."""
    text = re.sub(r"<!--.*?-->", "", page.read_text(), flags=re.DOTALL)
    return [(runner, package, COMMAND_END.split(rest, 1)[0].strip()) for runner, package, rest in
            PROJECT_CLI.findall(text)]


PLACEHOLDERS = {"NAME": "my-stack", "STACK": "dev", "OWNER/NAME": "acme/infra", "ACCOUNT": "stacme",
                "VAULT": "kv-acme", "TEAM": "ml-team"}
"""What a page's placeholders stand for when its command is parsed: values the arguments' checks accept."""


class _AnyCommand:
    """A stand-in for every command module: parsing is what is tested, not running."""

    def __getattr__(self, name: str):
        return lambda args: 0


def test_every_project_command_in_the_docs_runs_through_the_projects_venv_and_parses(monkeypatch):
    """Newcomer #7: bare `python -m offline ...` is the machine's Python, without the project's packages; a command
    a page shows runs as written from a fresh clone after `make install` (`.venv/bin/python`), and takes the
    arguments it is shown with (placeholders like NAME stand for values)."""
    import shlex
    import types

    from offline.__main__ import main as offline_main
    from ops.__main__ import main as ops_main

    monkeypatch.setattr("offline.cli.importlib", types.SimpleNamespace(import_module=lambda module: _AnyCommand()))
    mains = {"offline": offline_main, "ops": ops_main}
    wrong, refused, parsed = [], [], 0
    for page in PAGES:
        for runner, package, rest in project_commands(page):
            where = f"{page.relative_to(REPO_ROOT)}: {runner}python -m {package} {rest}"
            if runner != ".venv/bin/":
                wrong.append(where)
            words = [PLACEHOLDERS.get(w, w) for w in shlex.split(rest)]
            if len(words) < 2:
                continue  # the tool, or a command named in prose: no command line to run
            try:
                mains[package](words)
                parsed += 1
            except SystemExit:
                refused.append(where)
    assert wrong == [] and refused == [] and parsed >= 10, (wrong, refused)
