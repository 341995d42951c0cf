"""The scenarios' tests share the platform tests' fixtures: every stack rendered once per test run."""

from tests.conftest import render_of, render_shape, renders, shared_renders  # noqa: F401 (pytest finds fixtures by name)
