"""python -m offline COMMAND: what needs no cloud, Pulumi CLI or credentials: the render of the stacks under mocks,
its diff, the generated docs and a new stack file. What asks Azure or serves the workflows is ``python -m ops``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from offline.cli import (
    COMPLETION,
    Command,
    dispatch,
    existing_stack,
    input_file,
    input_folder,
    ipv4_network,
    output_folder,
    stack_name,
)


def _render_arguments(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", type=stack_name, help="stack name (Pulumi.<stack>.yaml)")
    which.add_argument("--all", action="store_true", help="every Pulumi.<stack>.yaml in the project")
    p.add_argument("--config", type=input_file, help="config file to use instead of Pulumi.<stack>.yaml")
    p.add_argument("--out", type=output_folder, default=Path("out"), help="output directory (default: out)")


def _render_diff_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", type=input_folder, help="the base branch's render folder")
    p.add_argument("head", type=input_folder, help="the pull request's render folder")
    p.add_argument("--stacks", action="store_true", help="print the changed stacks as a JSON list")


def _new_stack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", type=stack_name, help="the new stack's name")
    p.add_argument("--like", required=True, type=existing_stack, help="the stack to start from")
    p.add_argument("--name-root", help="nameRoot (stack names over 20 characters)")
    p.add_argument("--owner", help="owner tag (asked in a terminal; needed without one, as in CI)")
    p.add_argument("--lifetime", choices=("demo", "long-lived"),
                   help="lifetime (asked in a terminal; needed without one, as in CI)")
    p.add_argument("--address-space", type=ipv4_network,
                   help="network.addressSpace of a private stack (asked in a terminal; else a free one is picked)")


COMMANDS = {
    "render": Command("render stacks under Pulumi mocks into DIR/<stack>/", _render_arguments,
                      "offline.render_cli:render_command"),
    "render-diff": Command("what changed between two render folders (markdown, or the changed stacks as JSON)",
                           _render_diff_arguments, "offline.render_diff:render_diff_command"),
    "urns": Command("rewrite tests/urns/<stack>.txt, the pinned URNs, from the render (refused for a resource that "
                    "moved without a pulumi.Alias)",
                    lambda p: p.add_argument("--stack", type=existing_stack, help="one stack (default: every stack)"),
                    "offline.urns:urns_command"),
    "docs": Command("regenerate the generated docs (configuration, JSON Schema, estimates, README table)",
                    lambda p: p.add_argument("--check", action="store_true", help="fail if a generated file is stale"),
                    "offline.docs:docs_command"),
    "new-stack": Command("a new environment: Pulumi.NAME.yaml from a stack of the same scenario, checked, and the "
                         "generated docs brought up to date", _new_stack_arguments,
                         "offline.new_stack:new_stack_command"),
    "completion": COMPLETION,
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m offline", "The offline tools, which need no cloud, Pulumi CLI or credentials.",
                    COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
