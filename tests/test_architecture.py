"""The house rules, checked on the source, as folder rules: ``components/`` (the Pulumi component classes and the
vocabulary they take) imports neither the program core (``program/``) nor a stack; the program core never imports
a stack; the config core imports no Pulumi; ``offline/`` never calls Azure (``ops/``); no import cycle anywhere;
every component is constructed from a name, its args and its options; the private SDK internals the program relies
on are where it expects them."""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path

import pulumi
import pytest

from offline.stack_files import REPO_ROOT

PACKAGES = ("components", "program", "stacks", "offline", "ops")
"""The project's own top-level packages (``__main__.py`` joins ``program`` and ``stacks``)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every non-test module of the project's packages, by dotted name."""
    return {module_name(p): p for package in PACKAGES for p in sorted((REPO_ROOT / package).rglob("*.py"))
            if not p.name.startswith(("test_", "conftest"))}


@cache
def imports(path: Path) -> frozenset[str]:
    """Every module a file imports, at any depth (functions' local imports included); ``from A import b`` counts as
    ``A.b`` where that is a module of the project."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules()}
    return frozenset(found)


def package_of(module: str) -> str:
    return module.split(".")[0]


def under(package: str) -> list[tuple[str, Path]]:
    return [(m, p) for m, p in modules().items() if package_of(m) == package]


FORBIDDEN = {
    "components": {"program", "stacks", "offline", "ops"},
    "program": {"stacks", "offline", "ops"},
    "stacks": {"ops"},
    "offline": {"ops"},
}
"""Which packages each may not import: components know nothing above them, the program core no stack, and nothing
offline calls Azure."""


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_above_it(package):
    found = [(m, i) for m, path in under(package) for i in imports(path) if package_of(i) in FORBIDDEN[package]]
    assert not found, f"{package}/ imports what it may not: {found}"


def test_the_config_core_imports_no_pulumi_and_of_the_components_only_their_vocabulary():
    """The vocabulary, and Azure's catalogues the values are checked against: GPU sizes and regions; the Markdown
    table helper."""
    allowed = ("program.config", "program.markdown", "components.vocabulary", "components.gpu.sizes",
               "components.azure.regions")
    for module, path in under("program"):
        if module.startswith("program.config"):
            for found in imports(path):
                assert not found.startswith("pulumi"), (module, found)
                if package_of(found) in PACKAGES:
                    assert found.startswith(allowed), (module, found)


def test_a_stacks_workloads_take_their_arguments_not_its_settings_or_config():
    for module, path in under("stacks"):
        if module.endswith(".workloads"):
            assert not [i for i in imports(path) if i.startswith("program.config") or i.endswith(".settings")], module


def test_no_module_imports_itself_through_others():
    # A package's __init__ that gathers its own submodules is not a cycle through other code.
    graph = {m: {i for i in imports(p) if i in modules() and i != m and not i.startswith(m + ".")}
             for m, p in modules().items()}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, " ; ".join(" -> ".join(c) for c in cycles)


def component_classes() -> list[type]:
    import program.layers.azure  # noqa: F401 (imports every platform component)
    import stacks  # noqa: F401 (and every stack's)

    def walk(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *walk(sub))]

    return [c for c in walk(pulumi.ComponentResource) if c.__module__.startswith(("components.", "stacks."))]


def test_every_component_is_constructed_from_a_name_its_args_and_options():
    classes = component_classes()
    assert len(classes) > 25
    for cls in classes:
        if cls.__name__.startswith("_"):
            continue  # a shared base: its public subclasses take (name, args, opts)
        params = list(inspect.signature(cls.__init__).parameters)
        assert params == ["self", "name", "args", "opts"], (cls.__module__, cls.__name__, params)


def test_component_classes_live_in_components_or_a_stacks_workloads():
    for cls in component_classes():
        assert cls.__module__.startswith("components.") or cls.__module__.endswith(".workloads"), cls.__module__


INTERNALS = {"pulumi.runtime.config": ["get_config_env", "CONFIG", "is_config_secret"],
             "pulumi.runtime.stack": ["run_pulumi_func"], "pulumi.runtime.sync_await": ["_sync_await"],
             "pulumi.runtime.settings": ["get_root_resource"],
             "pulumi.runtime.resource": ["_get_stack_trace"]}
"""The private SDK names the program (program/sdk.py) and the render (offline/runtime.py) use: nothing public does what
they do (program/sdk.py and offline/runtime.py say why)."""


def test_the_private_sdk_internals_are_used_in_two_modules_only_and_still_exist():
    """A Pulumi SDK bump that moves one fails here, not in a user's `pulumi up`."""
    import importlib

    for module, names in INTERNALS.items():
        found = importlib.import_module(module)
        for name in names:
            assert hasattr(found, name), f"{module}.{name}"
            users = {p.relative_to(REPO_ROOT).as_posix() for p in modules().values()
                     if any(use in p.read_text() for use in (f"{name}(", f".{name}.", f" {name},", f".{name} ="))}
            assert users <= {"program/sdk.py", "offline/runtime.py"} and users, (name, users)


def test_no_test_module_imports_another():
    """Shared test code lives in tests/helpers.py (and fixtures in conftest.py), never in a test module."""
    for path in [*(REPO_ROOT / "tests").rglob("test_*.py"), *(REPO_ROOT / "stacks").rglob("test_*.py")]:
        assert not [i for i in imports(path) if i.split(".")[-1].startswith("test_")], path.relative_to(REPO_ROOT)


def test_a_stack_stands_on_the_platform_never_on_its_azure_layer():
    """Images, pools, queues and logs come through ``Platform``'s own doors, so the wiring exists once."""
    for module, path in under("stacks"):
        assert "platform.azure" not in path.read_text(), module


def test_platform_tests_render_their_own_configs_not_a_scenarios_stack_file():
    """A stack file changes with its scenario; the platform's tests must not move with it (tests/helpers.py SHAPES).
    Per-stack items (parametrized by ``stack``) and the scenarios' own tests may read stack files."""
    for path in sorted((REPO_ROOT / "tests").rglob("test_*.py")):
        named = re.findall(r"""(?:render_of|stack_config_of|stack_files\(\))\s*[\(\[]\s*["']([\w-]+)["']""",
                           path.read_text())
        assert not named, (path.relative_to(REPO_ROOT), named)


def test_every_attribute_docstring_follows_the_assignment_it_documents():
    """Issue 33b audit #8: ops/azure_reads.py gained FEATURES_API between SPOT_SCORES_API and its docstring, so each
    constant read as the other's. A string statement in a module or class body, but its docstring, comes right after
    an assignment (PEP 257's attribute docstrings, as the editors and the docs read them)."""
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Module | ast.ClassDef):
                continue
            for before, statement in zip(node.body, node.body[1:], strict=False):
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and \
                        isinstance(statement.value.value, str):
                    assert isinstance(before, ast.Assign | ast.AnnAssign), (module, statement.lineno)
