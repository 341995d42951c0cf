"""What the project's command tables (``python -m offline``, ``python -m ops``) share: a command is its help, its
arguments and the function that runs it, imported only when it runs, so a command that reads config never loads the
Pulumi program; a bad argument or config ends in one ``error:`` line (credentials in it hidden) and exit status 2,
before the command writes anything."""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from program.config.errors import ConfigError, redact
from program.config.naming import stack_name_error


@dataclass(frozen=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], object]
    """Adds the command's arguments to its parser."""
    run: str
    """``module:function`` that takes the parsed arguments and returns the exit status."""


class BadInput(ValueError):
    """Input a command cannot use (a file or stdin that is not what it expects): one ``error:`` line, exit 2."""


def json_input(text: str, what: str) -> Any:
    """``text`` as JSON, or ``BadInput`` naming ``what`` it is and where the JSON breaks."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{what} is not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def error(message: str) -> int:
    print(f"error: {redact(message)}", file=sys.stderr)
    return 2


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (argparse prints its usage first): what is wrong, where help is."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {redact(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def unknown_stack(stack: str) -> str | None:
    """Why ``stack`` is not one of the project's stacks (with the nearest one), or None."""
    from offline.stack_files import stack_files
    if problem := stack_name_error(stack):
        return f"{stack!r} is not a stack name: {problem}"
    stacks = stack_files()
    if stack in stacks:
        return None
    close = difflib.get_close_matches(stack, list(stacks), n=1)
    return (f"no config file for stack {stack!r} (expected Pulumi.{stack}.yaml); "
            f"{f'did you mean {close[0]}? ' if close else ''}stacks: {', '.join(stacks)}")


def stack_name(value: str) -> str:
    """An argument that names a stack, existing or not: the project's one pattern."""
    if problem := stack_name_error(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a stack name: {problem}")
    return value


def ipv4_network(value: str) -> str:
    """An argument that is an IPv4 network in CIDR form (its host bits zero)."""
    import ipaddress
    try:
        return str(ipaddress.IPv4Network(value))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not an IPv4 network such as 10.41.0.0/16 ({e})") from None


def existing_stack(value: str) -> str:
    """An argument that names one of the project's stacks."""
    if problem := unknown_stack(value):
        raise argparse.ArgumentTypeError(problem)
    return value


def stack_list(value: str) -> list[str]:
    """A JSON list of the project's stacks (what the workflows pipe between steps)."""
    try:
        stacks = json.loads(value)
    except json.JSONDecodeError:
        stacks = None
    if not isinstance(stacks, list) or not all(isinstance(s, str) for s in stacks):
        raise argparse.ArgumentTypeError(f"{value!r} is not a JSON list of stack names, such as '[\"dev\"]'")
    return [existing_stack(s) for s in stacks]


def input_file(value: str) -> Path:
    """An argument that names a file to read: it exists and is a file."""
    path = Path(value)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{value!r}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{value!r} is {'a folder' if path.is_dir() else 'not a regular file'}; a "
                                         "file is needed")
    return path


def input_folder(value: str) -> Path:
    """An argument that names a folder to read: it exists and is a folder."""
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a folder; a folder is needed" if path.exists() else
                                         f"{value!r}: no such folder")
    return path


def output_folder(value: str) -> Path:
    """An argument that names a folder to write into: a folder, or nothing yet (it is made)."""
    path = Path(value)
    blocked = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        where = f"{value!r} is not a folder" if blocked == path else f"{value!r}: {str(blocked)!r} is not a folder"
        raise argparse.ArgumentTypeError(f"{where}; a folder is needed")
    return path


def checked(error_of: Callable[[str], str | None]) -> Callable[[str], str]:
    """An argument checked by a naming rule (``program.config.naming``): its value, or the rule's message."""
    def check(value: str) -> str:
        if (problem := error_of(value)) is not None:
            raise argparse.ArgumentTypeError(f"{value!r} {problem}")
        return value
    return check


def stack_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, type=existing_stack, help="stack name (Pulumi.<stack>.yaml)")


def no_arguments(p: argparse.ArgumentParser) -> None:
    del p


def table_parser(prog: str, description: str, commands: dict[str, Command]) -> Parser:
    """The table's parser: one subcommand per command."""
    parser = Parser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in commands.items():
        command.arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def completion_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to print the script for")


COMPLETION = Command("print the shell completion script of these commands (bash or zsh), for "
                     "`eval \"$(.venv/bin/python -m TABLE completion bash)\"` in .bashrc (docs/development.md)",
                     completion_arguments, "offline.completion:completion_command")
"""The ``completion`` command of every table: its script is generated from the table's own parser."""


def dispatch(prog: str, description: str, commands: dict[str, Command], argv: list[str] | None = None) -> int:
    """Parse ``argv`` against the table and run the command it names."""
    parser = table_parser(prog, description, commands)
    # What the completion command builds its script from: the table under its module's name (shtab names the
    # shell functions and the command it completes after the parser's prog, one word).
    parser.set_defaults(completion_parser=lambda: table_parser(prog.split()[-1], description, commands),
                        completion_table=prog.split()[-1])
    args = parser.parse_args(argv)
    module, function = commands[args.command].run.split(":")
    try:
        return getattr(importlib.import_module(module), function)(args)
    except (ConfigError, BadInput) as e:
        return error(str(e))
    except OSError as e:  # a path the command was given that it cannot read or write
        return error(f"{e.filename}: {e.strerror}" if e.filename else str(e))
