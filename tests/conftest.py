"""Shared fixtures: every stack rendered once per test session (a typed resource costs ~100 ms under mocks)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from offline.render import Render, render_stack
from offline.stack_files import stack_files

STACKS = sorted(stack_files())

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One CPU thread per worker for torch's CPU tests: workers already use every core, and torch's own thread
    # pool on top of them made those tests four times slower. Read by torch when it is first imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


_RENDERS: dict[str, Render] = {}


def _render_once(stack: str) -> Render:
    """Each stack is rendered at most once per test process, and only when a test asks for it: with
    pytest-xdist every worker renders just the stacks its tests use."""
    if stack not in _RENDERS:
        _RENDERS[stack] = render_stack(stack)
    return _RENDERS[stack]


@pytest.fixture(scope="session")
def render_of() -> Callable[[str], Render]:
    return _render_once


@pytest.fixture(scope="session")
def renders() -> dict[str, Render]:
    return {stack: _render_once(stack) for stack in STACKS}
