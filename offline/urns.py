"""The URN pins: every stack's resources by the identity Pulumi keeps their state under, committed in
``tests/urns/<stack>.txt``.

A URN is ``urn:pulumi:STACK::PROJECT::<parents' types>$<type>::<name>``. The component type tokens
(``aksgpu:aks:Cluster``) and the logical names are part of it, for the component and every resource under it: a
changed token, name or parent is a new resource to Pulumi, which deletes the old one and creates the new, unless the
new one declares the old URN as a ``pulumi.Alias``. The tokens' middle parts come from the first layout and no longer
match the folders; they stay as they are. The pins make a change to any of them visible and deliberate:
``tests/test_urns.py`` fails when a render differs from its pin, and ``python -m offline urns`` rewrites the pins,
refusing a resource that moved (same name and type under a new parent, or a new type under the same parent) without
an alias from its new identity to its old.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from offline.stack_files import REPO_ROOT

if TYPE_CHECKING:
    from offline.render import Resource

PINS = REPO_ROOT / "tests" / "urns"
HEADER = ("# Every resource of the stack by its URN without `urn:pulumi:STACK::PROJECT::` (parents' types $ type ::\n"
          "# name), then `<- ` and each earlier URN it declares as a pulumi.Alias. Written by\n"
          "# `python -m offline urns`: a change here replaces deployed resources unless an alias keeps their state\n"
          "# (offline/urns.py).\n")


@dataclass(frozen=True)
class Pin:
    urn: str
    aliases: tuple[str, ...] = ()

    def line(self) -> str:
        return " <- ".join([self.urn, *self.aliases])


def pins_of(resources: Iterable[Resource]) -> dict[str, Pin]:
    """A render's resources (``offline.render.Resource``) as pins, by URN."""
    return {r.urn: Pin(r.urn, tuple(r.aliases)) for r in resources}


def text(pins: Mapping[str, Pin]) -> str:
    return HEADER + "".join(f"{pins[urn].line()}\n" for urn in sorted(pins))


def parse(content: str) -> dict[str, Pin]:
    pins = {}
    for line in content.splitlines():
        if line and not line.startswith("#"):
            urn, *aliases = line.split(" <- ")
            pins[urn] = Pin(urn, tuple(aliases))
    return pins


def _leaf(urn: str) -> tuple[str, str, str]:
    """(parents' types, type, name) of a URN tail."""
    qualified, name = urn.rsplit("::", 1)
    parents, _, typ = qualified.rpartition("$")
    return parents, typ, name


def unaliased_moves(old: Mapping[str, Pin], new: Mapping[str, Pin]) -> list[str]:
    """Each resource of ``old`` that ``new`` has under another identity (the same name and type under other
    parents, or the same name and parents with another type) without an alias from the new identity to the old:
    deploying ``new`` would replace it."""
    gone = set(old) - set(new)
    problems = []
    for urn in sorted(set(new) - set(old)):
        parents, typ, name = _leaf(urn)
        for was in sorted(gone):
            was_parents, was_typ, was_name = _leaf(was)
            if was_name == name and (was_typ == typ or was_parents == parents) and was not in new[urn].aliases:
                problems.append(f"{was} is now {urn}: add pulumi.Alias(...) resolving to the old URN to its options, "
                                "or deployed stacks replace it")
    return problems


def difference(old: Mapping[str, Pin], new: Mapping[str, Pin]) -> list[str]:
    """What differs, one line per URN: ``-`` gone, ``+`` new, ``~`` its aliases changed."""
    gone = [f"- {u}" for u in sorted(set(old) - set(new))]
    added = [f"+ {new[u].line()}" for u in sorted(set(new) - set(old))]
    return gone + added + [f"~ {new[u].line()}" for u in sorted(set(old) & set(new)) if old[u] != new[u]]


def pin_path(stack: str, folder: Path = PINS) -> Path:
    return folder / f"{stack}.txt"


def write_pins(stacks: Iterable[str], folder: Path = PINS) -> tuple[list[str], list[str]]:
    """Render each stack and rewrite its pin; returns (pins written, refusals). A stack whose resources moved
    without an alias keeps its old pin."""
    from offline.render import render_stack
    written, refused = [], []
    for stack in stacks:
        path = pin_path(stack, folder)
        new = pins_of(render_stack(stack).resources)
        old = parse(path.read_text()) if path.exists() else {}
        if problems := unaliased_moves(old, new):
            refused += [f"stack {stack}: {p}" for p in problems]
        elif old != new or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text(new))
            written.append(str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path))
    return written, refused


def urns_command(args: argparse.Namespace) -> int:
    from offline.cli import error, unknown_stack
    from offline.stack_files import stack_files
    if args.stack and (problem := unknown_stack(args.stack)):
        return error(problem)
    written, refused = write_pins([args.stack] if args.stack else sorted(stack_files()))
    for path in written:
        print(f"wrote {path}: commit it with the change that moved the resources")
    for problem in refused:
        print(f"error: {problem}", file=sys.stderr)
    if not written and not refused:
        print("every pin matches its render")
    return 2 if refused else 0
