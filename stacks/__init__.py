"""What each stack runs: one module per scenario, each defining ``SCENARIO`` (a ``program.scenario.Scenario``).

``REGISTRY`` is the one list of scenario names, the values of ``aksgpu:scenario``. Reading it imports no
scenario, so tools can check a stack's config without loading the program. Adding a scenario: its module
here, one line below, its stack file ``Pulumi.<name>.yaml``, its workload component, its docs page, and its own
config section if it has keys of its own (``stackconfig/settings/``; docs/development.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from program.scenario import Scenario

REGISTRY: dict[str, str] = {
    "function-gpu": "stacks.function_gpu",
    "gpu-sharing": "stacks.gpu_sharing",
    "gpu-basics": "stacks.gpu_basics",
    "av-resim": "stacks.av_resim",
    "training-autoscale": "stacks.training_autoscale",
    "llm-serving": "stacks.llm_serving",
}
"""Scenario name → the module that defines it."""


def load(name: str) -> Scenario:
    """The registered scenario ``name`` (its module is imported on first use)."""
    return importlib.import_module(REGISTRY[name]).SCENARIO
