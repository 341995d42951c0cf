"""Config sections a scenario owns.

A scenario whose workloads need keys of their own keeps them in one section, ``aksgpu:<SECTION>``, defined by the
module here named after it (``llm-serving``: ``llm_serving.py``). The loader reads that section with the rest of
the config, before any resource is declared, and only on stacks that run the scenario: on any other stack the
key is unknown, as a typo would be. Nothing here imports the program, so tools check a stack's config without the
Pulumi SDKs.

A settings module defines ``SECTION`` (its key), ``Settings`` (a frozen dataclass: each field with its default
and a docstring, from which docs/configuration.md is generated) and ``read(section, cfg)``, which parses and
checks the section given the rest of the stack's config (its GPU pools, say) and raises ``ConfigError``.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stackconfig.reader import Section
    from stackconfig.schema import StackConfig


def _module_name(scenario: str) -> str:
    return f"{__name__}.{scenario.replace('-', '_')}"


def module_for(scenario: str) -> ModuleType | None:
    """The settings module of ``scenario``, or None when it has no section of its own."""
    name = _module_name(scenario)
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def all_modules() -> dict[str, ModuleType]:
    """Scenario name → its settings module, for every scenario that has one (the reference lists them all)."""
    return {info.name.replace("_", "-"): importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__)}


def read(top: Section, cfg: StackConfig) -> Any:
    """The stack's scenario section, read and checked; None for a scenario without one."""
    module = module_for(cfg.scenario)
    return None if module is None else module.read(top.section(module.SECTION), cfg)
