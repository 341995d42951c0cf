"""The house rules, checked on the source: the platform never imports a scenario, the config core imports no
Pulumi, components take their own arguments rather than config sections, and the private SDK internals the
program relies on are where it expects them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pulumi

from offline.stack_files import REPO_ROOT

PLATFORM = REPO_ROOT / "aksgpu"
COMPOSITION = {"layers", "pipeline.py", "scenario.py", "needs.py", "sdk.py", "outputs.py", "config", "__init__.py"}
"""What reads config (the config core, the layers that translate it, the pipeline); everything else is a component."""


def imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (functions' local imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "test_" not in p.name)


def test_the_platform_never_imports_a_scenario():
    for path in sources(PLATFORM):
        assert not [m for m in imports(path) if m.split(".")[0] == "scenarios"], path.relative_to(REPO_ROOT)


def test_the_config_core_imports_no_pulumi_and_nothing_of_the_platform_but_itself_and_needs():
    for path in sources(PLATFORM / "config"):
        for module in imports(path):
            assert not module.startswith("pulumi"), (path.name, module)
            if module.startswith("aksgpu"):
                assert module.startswith("aksgpu.config"), (path.name, module)


def test_components_take_their_own_arguments_not_config_sections():
    components = [p for p in sources(PLATFORM) if p.relative_to(PLATFORM).parts[0] not in COMPOSITION]
    assert len(components) > 20
    for path in components:
        assert "aksgpu.config.schema" not in imports(path), path.relative_to(REPO_ROOT)
        assert "aksgpu.config.loader" not in imports(path), path.relative_to(REPO_ROOT)
    for path in sources(REPO_ROOT / "scenarios"):
        if path.name == "workloads.py":
            assert not {"aksgpu.config.schema", "aksgpu.config.loader"} & imports(path), path
            assert not [m for m in imports(path) if m.endswith(".settings")], path


def component_classes() -> list[type]:
    import aksgpu.layers.azure  # noqa: F401 (imports every platform component)
    import scenarios  # noqa: F401 (and every scenario's)

    def walk(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *walk(sub))]

    return [c for c in walk(pulumi.ComponentResource) if c.__module__.startswith(("aksgpu.", "scenarios."))]


def test_every_component_is_constructed_from_a_name_its_args_and_options():
    classes = component_classes()
    assert len(classes) > 25
    for cls in classes:
        if cls.__name__.startswith("_"):
            continue  # a shared base: its public subclasses take (name, args, opts)
        params = list(inspect.signature(cls.__init__).parameters)
        assert params == ["self", "name", "args", "opts"], (cls.__module__, cls.__name__, params)


INTERNALS = {"pulumi.runtime.config": ["get_config_env", "CONFIG"], "pulumi.runtime.stack": ["run_pulumi_func"],
             "pulumi.runtime.sync_await": ["_sync_await"], "pulumi.runtime.settings": ["get_root_resource"]}
"""The private SDK names the program (aksgpu/sdk.py) and the render (offline/sdk.py) use: nothing public does what
they do (aksgpu/sdk.py and offline/sdk.py say why)."""


def test_the_private_sdk_internals_are_used_in_two_modules_only_and_still_exist():
    """A Pulumi SDK bump that moves one fails here, not in a user's `pulumi up`."""
    import importlib

    for module, names in INTERNALS.items():
        found = importlib.import_module(module)
        for name in names:
            assert hasattr(found, name), f"{module}.{name}"
            users = {p.relative_to(REPO_ROOT).as_posix() for p in [*sources(PLATFORM), *sources(REPO_ROOT / "offline")]
                     if f"{name}(" in p.read_text() or f".{name}." in p.read_text() or f" {name}," in p.read_text()}
            assert users <= {"aksgpu/sdk.py", "offline/sdk.py"} and users, (name, users)
