"""Shared fixtures: every stack rendered once per test session (a typed resource costs ~100 ms under mocks)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from offline.render import Render, render_stack
from offline.stack_files import stack_files

STACKS = sorted(stack_files())


@pytest.fixture(scope="session")
def renders() -> dict[str, Render]:
    return {stack: render_stack(stack) for stack in STACKS}


@pytest.fixture(scope="session")
def render_of(renders) -> Callable[[str], Render]:
    return renders.__getitem__
