"""Reads raw Pulumi config values with the key path kept, so every error names the exact key.

Pulumi hands a program its config as strings (objects as JSON); this module turns them into Python values,
checks their types and refuses keys nobody reads, so a typo fails the run instead of passing silently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


class ConfigError(ValueError):
    """A bad config value: one line naming the key, the value and what is allowed.

    The program turns it into a ``pulumi.RunError`` (printed without a traceback); the offline tools print it.
    """

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"invalid config {key}={_show(value)}: {allowed}")


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def decode(value: Any) -> Any:
    """A config value as Pulumi stores it (``"3"``, ``"true"``, ``'{"a": 1}'``) turned into its JSON value.

    Strings that are not JSON are plain strings; JSON strings such as ``"\\"x\\""`` are unwrapped.
    """
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
               dict: "an object"}


class Section:
    """One config object (the top-level namespace or a nested object) read key by key.

    ``done()`` raises for keys that were present but never read.
    """

    def __init__(self, raw: Any, path: str):
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(path, raw, "must be an object")
        self.raw, self.path, self._read = raw, path, set()

    def key(self, name: str) -> str:
        sep = "" if self.path.endswith(":") else "."
        return f"{self.path}{sep}{name}"

    def get(self, name: str, kind: type[T], default: T) -> T:
        self._read.add(name)
        if name not in self.raw or self.raw[name] is None:
            return default
        value = decode(self.raw[name]) if self.path.endswith(":") else self.raw[name]
        if kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # YAML turns 1.33 into a number; a version string must stay a string.
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(self.key(name), value, f"must be {_TYPE_NAMES[kind]}")
        if kind is float and not math.isfinite(value):
            raise ConfigError(self.key(name), str(value), "must be a finite number")
        if kind is str and not value.strip() and default:
            raise ConfigError(self.key(name), value, f"must not be empty; leave the key out for {default!r}")
        return value

    def optional_str(self, name: str) -> str | None:
        value = self.get(name, str, "")
        return value or None

    def choice(self, name: str, allowed: type[E], default: E) -> E:
        """One member of the closed set ``allowed``, by its value."""
        value = self.get(name, str, default)
        if value not in allowed.__members__.values():
            raise ConfigError(self.key(name), value, f"allowed: {', '.join(allowed)}")
        return allowed(value)

    def section(self, name: str) -> Section:
        self._read.add(name)
        value = self.raw.get(name)
        if self.path.endswith(":"):
            value = decode(value)
        return Section(value, self.key(name))

    def items(self, name: str, parse: Callable[[Section], T], default: list[Any]) -> tuple[T, ...]:
        """A list of objects, each parsed by ``parse`` from its own Section (``key[i]``)."""
        raw = self.get(name, list, default)
        return tuple(parse(Section(item, f"{self.key(name)}[{i}]")) for i, item in enumerate(raw))

    def strings(self, name: str, default: list[str]) -> tuple[str, ...]:
        values = self.get(name, list, default)
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise ConfigError(f"{self.key(name)}[{i}]", v, "must be a string")
        return tuple(values)

    def string_map(self, name: str) -> dict[str, str]:
        values = self.get(name, dict, {})
        for k, v in values.items():
            if not isinstance(v, str):
                raise ConfigError(f"{self.key(name)}.{k}", v, "must be a string")
        return dict(values)

    def done(self) -> None:
        unknown = sorted(set(self.raw) - self._read)
        if unknown:
            name = unknown[0]
            known = ", ".join(sorted(self._read))
            raise ConfigError(self.key(name), self.raw[name], f"unknown key; allowed here: {known}")
