"""Shared fixtures: every stack rendered once per test session, whatever the number of pytest-xdist workers."""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the program is imported where a render is asked for: pytest-xdist's controller runs no test
    from offline.render import Render

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One CPU thread per worker for torch's CPU tests: workers already use every core, and torch's own thread
    # pool on top of them made those tests four times slower. Read by torch when it is first imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


_RENDERS: dict[str, Render] = {}


def _render_once(stack: str, shared: Path, render: Callable[[], Render] | None = None) -> Render:
    """Each stack is rendered at most once per test run, and only when a test asks for it: the first worker to need
    it renders it into ``shared`` (the run's temporary folder, common to pytest-xdist's workers), the others read it
    from there."""
    if stack not in _RENDERS:
        with (shared / f"{stack}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            kept = shared / f"{stack}.pickle"
            if kept.exists():
                _RENDERS[stack] = pickle.loads(kept.read_bytes())
            else:
                from offline.render import render_stack
                _RENDERS[stack] = render() if render else render_stack(stack)
                kept.write_bytes(pickle.dumps(_RENDERS[stack]))
        _settle()
    return _RENDERS[stack]


def _settle() -> None:
    """Put what the worker keeps for the whole run (modules, torch, the SDK, the renders) out of the garbage
    collector's reach, as ``python -m offline render`` does between stacks: each full collection walked it all again."""
    from offline.render_cli import settle
    settle()


@pytest.fixture(scope="session")
def shared_renders(tmp_path_factory) -> Path:
    """The folder the run's workers share renders in (pytest keeps and prunes its temporary folders)."""
    root = tmp_path_factory.getbasetemp()
    folder = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "renders"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def render_of(shared_renders) -> Callable[[str], Render]:
    return lambda stack: _render_once(stack, shared_renders)


@pytest.fixture(scope="session")
def render_shape(shared_renders) -> Callable[[str], Render]:
    """One of tests/helpers.py's SHAPES rendered as a stack of its own name, once per run."""
    from tests.helpers import SHAPES, render_with
    return lambda name: _render_once(f"shape-{name}", shared_renders, lambda: render_with(name, **SHAPES[name]))


@pytest.fixture(scope="session")
def renders(render_of) -> dict[str, Render]:
    from tests.helpers import STACKS
    return {stack: render_of(stack) for stack in STACKS}


def pytest_collection_finish(session):
    _settle()  # every test module imported


def pytest_addoption(parser):
    parser.addoption("--stack", action="append", default=[], metavar="NAME",
                     help="run the per-stack items of these stacks only (the fast loop: make quick)")


def pytest_collection_modifyitems(config, items):
    keep = set(config.getoption("--stack"))
    if not keep:
        return
    chosen, dropped = [], []
    for item in items:
        stack = getattr(item, "callspec", None) and item.callspec.params.get("stack")
        (dropped if stack and stack not in keep else chosen).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = chosen
