"""What a bad stack file gets back: one line per problem, naming the key, the bad value and what is allowed.

The program turns a ``ConfigError`` into a ``pulumi.RunError`` (printed without a traceback); the offline tools print
it. A stack file with several mistakes hears about all of them at once (``ConfigError.several``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from typing import Any


class ConfigError(ValueError):
    """One bad config value, or (``several``) every bad value of a stack file, one line each."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        self.problems: list[ConfigError] = [self]
        super().__init__(f"invalid config {key}={show(value)}: {allowed}")

    @classmethod
    def several(cls, problems: Sequence[ConfigError]) -> ConfigError:
        """All of ``problems`` as one error: the first one's key and value, every problem's line in its text."""
        if len(problems) == 1:
            return problems[0]
        error = cls(problems[0].key, problems[0].value, problems[0].allowed)
        error.problems = [p for problem in problems for p in problem.problems]
        error.args = ("\n".join(str(p) for p in error.problems),)
        return error


class StackFileError(ConfigError):
    """A stack file that is not YAML, or not a mapping: ``FILE:LINE:COLUMN: what is wrong``."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem, "not a readable stack file")
        self.args = (f"{where}: {problem}",)


def show(value: Any) -> str:
    """A value as the error prints it: JSON, so strings are quoted and lists read as lists."""
    return json.dumps(value, sort_keys=True, default=str)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``did you mean X?`` for the closest of ``choices`` (case-insensitive), or nothing."""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return f"did you mean {by_lower[close[0]]}? " if close else ""
