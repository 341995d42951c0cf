"""`python -m offline completion bash` and `python -m ops completion bash`: the printed script is valid bash and,
sourced in bash and asked as bash asks it (COMP_WORDS, COMP_CWORD), completes `python -m TABLE` with the table's
commands, each command's flags, and the project's stacks where an argument names a stack; other python command lines
keep the completion python had."""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys

import pytest

from offline import __main__ as offline_main
from offline.cli import existing_stack, stack_name, table_parser
from offline.stack_files import REPO_ROOT, stack_files
from ops import __main__ as ops_main

TABLES = {"offline": offline_main.COMMANDS, "ops": ops_main.COMMANDS}


@functools.cache  # one process per table and shell: the script is the same for every test that sources it
def script(table: str, shell: str) -> str:
    return subprocess.run([sys.executable, "-m", table, "completion", shell], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True, timeout=60).stdout


def complete(scripts: list[str], lines: list[list[str]], before: str = "") -> list[list[str]]:
    """What bash offers for each command line (its last word the one being completed), the scripts sourced."""
    driver = [before, *scripts, r"""
ask() {
  COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
  local name=${1##*/} spec
  spec=$(complete -p "$1" 2>/dev/null || complete -p "$name")
  [[ $spec =~ \ -F\ ([^ ]+)\  ]]
  "${BASH_REMATCH[1]}" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  printf '%s\n' "${COMPREPLY[*]}"
}"""]
    driver += ["ask " + " ".join(f"'{word}'" for word in line) for line in lines]
    out = subprocess.run(["bash", "-c", "\n".join(driver)], cwd=REPO_ROOT, check=True, capture_output=True, text=True,
                         timeout=60).stdout
    return [answer.split() for answer in out.splitlines()]


def subparsers(table: str) -> dict[str, argparse.ArgumentParser]:
    parser = table_parser(table, "", TABLES[table])
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("table", TABLES)
def test_bash_script_is_valid_bash(table):
    subprocess.run(["bash", "-n"], input=script(table, "bash"), text=True, check=True, timeout=60)


@pytest.mark.parametrize("table", TABLES)
def test_bash_completes_every_command_and_its_flags(table):
    commands = subparsers(table)
    lines = [["python", "-m", table, ""]] + [[".venv/bin/python", "-m", table, name, "--"] for name in commands]
    answers = complete([script(table, "bash")], lines)
    assert set(answers[0]) == set(TABLES[table])
    for (name, parser), offered in zip(commands.items(), answers[1:], strict=True):
        flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
        assert set(offered) == flags, name


@pytest.mark.parametrize("table", TABLES)
def test_bash_offers_the_stacks_where_an_argument_names_a_stack(table):
    arguments = [(name, a.option_strings[-1]) for name, parser in subparsers(table).items() for a in parser._actions
                 if a.option_strings and a.type in (existing_stack, stack_name)]
    assert arguments
    answers = complete([script(table, "bash")], [["python3", "-m", table, name, flag, ""] for name, flag in arguments])
    for argument, offered in zip(arguments, answers, strict=True):
        assert sorted(offered) == sorted(stack_files()), argument
    [offered] = complete([script(table, "bash")], [["python", "-m", table, *arguments[0], "gpu-sharing-m"]])
    assert sorted(offered) == ["gpu-sharing-mig", "gpu-sharing-mps"]


def test_other_python_command_lines_keep_pythons_completion():
    # Both tables' scripts, one of them twice: each dispatches by module and none chains to itself.
    scripts = [script("offline", "bash"), script("ops", "bash"), script("offline", "bash")]
    before = "_python_before() { COMPREPLY=(from-before); }\ncomplete -F _python_before python"
    answers = complete(scripts, [["python", "-m", "json", ""], ["python", "x.py", ""], ["python", "-m", "ops", ""],
                                 ["python", "-m", "offline", ""]], before=before)
    assert answers[:2] == [["from-before"], ["from-before"]]
    assert set(answers[2]) == set(TABLES["ops"]) and set(answers[3]) == set(TABLES["offline"])


@pytest.mark.parametrize("table", TABLES)
def test_zsh_script_names_every_command_and_the_stack_completer(table):
    text = script(table, "zsh")
    for name in TABLES[table]:
        assert f"\n    {name}:'" in text, name
    assert ":stack:_aksgpu_stacks" in text and "compdef _aksgpu_python $_aksgpu_command" in text
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed: the script's syntax is not checked")
    subprocess.run(["zsh", "-n"], input=text, text=True, check=True, timeout=60)
