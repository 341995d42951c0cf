"""The configuration reference, generated from the schema: every key with its type, default and docstring.

Field docstrings are not kept at run time, so they are read from the schema module's source (``ast``). The
walk follows the loader's shape: sections are dataclass fields, lists of objects are ``key[].field``, and a
field marked ``flatten`` puts its keys beside its siblings (a GPU pool's pool settings).
"""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from stackconfig import schema
from stackconfig import settings as scenario_settings


@dataclass(frozen=True)
class KeyDoc:
    key: str
    """Path below ``aksgpu:``, e.g. ``gpuPools[].sharing.mode``."""
    type: str
    default: str
    doc: str
    section: bool = False
    """An object or a list of objects, whose keys follow."""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def config_key(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or camel(f.name)


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name → the docstring under it in the class body."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for stmt, following in zip(body, [*body[1:], None], strict=True):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and \
                isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            text = " ".join(inspect.cleandoc(following.value.value).split())
            docs[stmt.target.id] = text.replace("``", "`")  # reStructuredText literals as Markdown code
    return docs


def _is_dataclass_type(t: Any) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t)


def _item_type(t: Any) -> Any:
    """``X`` of ``tuple[X, ...]``, else None."""
    if typing.get_origin(t) is tuple:
        args = typing.get_args(t)
        return args[0] if args else None
    return None


def _strip_optional(t: Any) -> Any:
    """``X`` of ``X | None``."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return t


def type_text(t: Any) -> str:
    t = _strip_optional(t)
    if isinstance(t, type) and issubclass(t, StrEnum):
        return " \\| ".join(f"`{m.value}`" for m in t)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "number"
    if t is str:
        return "string"
    if _item_type(t) is str:
        return "list of strings"
    if typing.get_origin(t) in (collections.abc.Mapping, dict):
        return "map of strings"
    if _is_dataclass_type(_item_type(t)):
        return "list of objects"
    if _is_dataclass_type(t):
        return "object"
    raise TypeError(f"no config type for {t!r}")


def default_text(f: dataclasses.Field, value: Any) -> str:
    if "default_text" in f.metadata:
        return f.metadata["default_text"]
    if value is None:
        return "unset"
    if isinstance(value, StrEnum):
        return f"`{value.value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (tuple, list, dict)) or dataclasses.is_dataclass(value):
        if isinstance(value, (tuple, list)) and value and dataclasses.is_dataclass(value[0]):
            return f"{len(value)} entry" + ("" if len(value) == 1 else "ies")
        if dataclasses.is_dataclass(value):
            return "see below"
        return f"`{json.dumps(list(value) if isinstance(value, tuple) else value)}`"
    if isinstance(value, str):
        return f"`{value}`" if value else "`\"\"`"
    return f"`{value}`"


def walk(cls: type, instance: Any, prefix: str = "") -> Iterator[KeyDoc]:
    """Every config key below ``cls``, with defaults taken from ``instance``."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("derived"):
            continue
        t = hints[f.name]
        value = getattr(instance, f.name)
        if f.metadata.get("flatten"):
            yield from walk(_strip_optional(t), value, prefix)
            continue
        key = prefix + config_key(f)
        yield KeyDoc(key, type_text(t), default_text(f, value), docs.get(f.name, ""),
                     section=_is_dataclass_type(t) or _is_dataclass_type(_item_type(t)))
        if _is_dataclass_type(t):
            yield from walk(t, value, key + ".")
        elif _is_dataclass_type(item := _item_type(t)):
            item_default = f.metadata.get("item_default") or (value[0] if value else item())
            yield from walk(item, item_default, key + "[].")


def reference() -> list[KeyDoc]:
    """Every key of the ``aksgpu:`` namespace, in schema order."""
    defaults = schema.StackConfig(project=schema.PROJECT, stack="STACK")
    return list(walk(schema.StackConfig, defaults))


def scenario_sections() -> dict[str, list[KeyDoc]]:
    """Scenario → the keys of the section it owns (``stackconfig/settings/``), the section's own row first."""
    sections = {}
    for scenario, module in sorted(scenario_settings.all_modules().items()):
        summary = " ".join(inspect.cleandoc(module.__doc__ or "").split("\n\n")[0].split()).replace("``", "`")
        head = KeyDoc(module.SECTION, "object", "see below", f"Only on `{scenario}` stacks. {summary}", section=True)
        sections[scenario] = [head, *walk(module.Settings, module.Settings(), f"{module.SECTION}.")]
    return sections


def _rows(keys: list[KeyDoc]) -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for k in keys:
        key = f"**`{k.key}`**" if k.section else f"`{k.key}`"
        doc = k.doc.replace("|", "\\|")
        rows.append(f"| {key} | {k.type} | {k.default} | {doc} |")
    return rows


def markdown() -> str:
    """docs/configuration.md."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m offline docs` from stackconfig/schema.py; edit the schema, not this file. -->",
        "",
        f"Every key lives in the `{schema.PROJECT}:` namespace of a stack file (`Pulumi.<stack>.yaml`). Objects are "
        "set whole in the file or by path (`pulumi config set --path 'aksgpu:gpuPools[0].maxCount' 3`). Every "
        "value is checked before any resource is declared; an unknown key is an error, and each error is one line "
        "naming the key, the value and what is allowed.",
        "",
        *_rows(reference()),
    ]
    lines += [
        "",
        "Pool defaults differ by kind: `cluster.systemPool` is "
        f"`{schema.SYSTEM_POOL_DEFAULTS.vm_size}` {schema.SYSTEM_POOL_DEFAULTS.min_count}–"
        f"{schema.SYSTEM_POOL_DEFAULTS.max_count}, each `cpuPools[]` entry `{schema.CPU_POOL_DEFAULTS.vm_size}` "
        f"{schema.CPU_POOL_DEFAULTS.min_count}–{schema.CPU_POOL_DEFAULTS.max_count}, each `gpuPools[]` entry "
        f"`{schema.GPU_POOL_DEFAULTS.vm_size}` {schema.GPU_POOL_DEFAULTS.priority.value} "
        f"{schema.GPU_POOL_DEFAULTS.min_count}–{schema.GPU_POOL_DEFAULTS.max_count}.",
        "",
        "## Scenario sections",
        "",
        "A scenario with keys of its own keeps them in one section (`stackconfig/settings/<scenario>.py`), read and "
        "checked with the rest; on a stack of another scenario the section is an unknown key.",
        "",
    ]
    for scenario, keys in scenario_sections().items():
        lines += [f"### `{scenario}`", "", *_rows(keys), ""]
    return "\n".join(lines)
