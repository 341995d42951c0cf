"""What the project's command tables (``python -m offline``, ``python -m ops``) share: a command is its help, its
arguments and the function that runs it, imported only when it runs, so a command that reads config never loads the
Pulumi program; a bad argument or config ends in one ``error:`` line and exit status 2."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from program.config.errors import ConfigError


@dataclass(frozen=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], object]
    """Adds the command's arguments to its parser."""
    run: str
    """``module:function`` that takes the parsed arguments and returns the exit status."""


def error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def unknown_stack(stack: str) -> str | None:
    """Why ``stack`` is not one of the project's stacks, or None."""
    from offline.stack_files import stack_files
    return None if stack in stack_files() else f"no config file for stack {stack!r} (expected Pulumi.{stack}.yaml)"


def stack_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, help="stack name (Pulumi.<stack>.yaml)")


def no_arguments(p: argparse.ArgumentParser) -> None:
    del p


def dispatch(prog: str, description: str, commands: dict[str, Command], argv: list[str] | None = None) -> int:
    """Parse ``argv`` against the table and run the command it names."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in commands.items():
        command.arguments(sub.add_parser(name, help=command.help, description=command.help))
    args = parser.parse_args(argv)
    module, function = commands[args.command].run.split(":")
    try:
        return getattr(importlib.import_module(module), function)(args)
    except ConfigError as e:
        return error(str(e))
