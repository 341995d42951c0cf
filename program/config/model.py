"""How a config section is declared, once: a pydantic model whose fields carry the key (camelCase of the field),
the type, the default, the bounds and a docstring. Everything else is derived from the models: the checks and
their one-line errors (``problems``), ``docs/configuration.md`` and the stack files' JSON Schema
(``reference.py``).

Values are validated strictly, as JSON: ``"3"`` is not an integer and ``"true"`` not a boolean, so a typo in a
stack file fails instead of being read as something else.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from program.config.errors import ConfigError, did_you_mean


class ConfigModel(BaseModel):
    """A config section: keys in camelCase, unknown keys refused, values frozen, field docstrings as docs."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)
    section: ClassVar[str]
    """The top-level key of a scenario's own section (its settings model sets it)."""

    @classmethod
    def parse(cls, data: Any, prefix: str, context: dict[str, Any] | None = None):
        """``data`` (plain JSON values) validated strictly; raises ``ConfigError`` with every problem, one line
        each, keys written as ``prefix`` + their path (``aksgpu:gpuPools[0].minCount``)."""
        try:
            return cls.model_validate_json(json.dumps(data, default=str), strict=True, context=context)
        except ValidationError as error:
            raise ConfigError.several(problems(error, cls, prefix)) from None


def derived(text: str, **kwargs: Any) -> Any:
    """A field whose default depends on other keys: ``None`` here, resolved by the section; ``text`` says how."""
    return Field(None, json_schema_extra={"defaultText": text}, **kwargs)


def key_path(prefix: str, loc: Sequence[str | int]) -> str:
    """``aksgpu:`` and ``("gpuPools", 0, "minCount")`` → ``aksgpu:gpuPools[0].minCount``."""
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += part if text.endswith(":") or not text else f".{part}"
    return text


def _inner(annotation: Any) -> Iterator[Any]:
    """The types a field's annotation holds: ``X | None`` → X, ``tuple[X, ...]`` → X, ``Annotated[X, …]`` → X."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _inner(typing.get_args(annotation)[0])
    elif origin in (typing.Union, types.UnionType, tuple, list):
        for arg in typing.get_args(annotation):
            if arg is not type(None) and arg is not Ellipsis:
                yield from _inner(arg)
    else:
        yield annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return next((t for t in _inner(annotation) if isinstance(t, type) and issubclass(t, BaseModel)), None)


def field_named(model: type[BaseModel], key: str) -> FieldInfo | None:
    """The field whose config key (alias) or name is ``key``."""
    return next((f for name, f in model.model_fields.items() if key in (f.alias, name)), None)


def model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel]:
    """The model of the section at ``loc`` (list indexes skipped); the deepest one found."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = field_named(model, part)
        nested = _model_of(field.annotation) if field is not None else None
        if nested is None:
            break
        model = nested
    return model


def field_at(model: type[BaseModel], loc: Sequence[str | int]) -> FieldInfo | None:
    """The field of the last key of ``loc``."""
    keys = [p for p in loc if isinstance(p, str)]
    return field_named(model_at(model, keys[:-1]), keys[-1]) if keys else None


def is_text(field: FieldInfo) -> bool:
    """A field that holds text only (a string, a string enum, or unset)."""
    kinds = set(_inner(field.annotation)) - {type(None)}
    return bool(kinds) and all(isinstance(t, type) and issubclass(t, str) for t in kinds)


def keys_of(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or name for name, f in model.model_fields.items())


def bounds(field: FieldInfo | None) -> tuple[Any, Any]:
    """(lowest, highest) a numeric field allows, either None."""
    low = high = None
    for m in field.metadata if field else ():
        if isinstance(m, annotated_types.Ge):
            low = m.ge
        elif isinstance(m, annotated_types.Le):
            high = m.le
    return low, high


_TYPES = {"int_type": "an integer", "int_from_float": "an integer", "bool_type": "true or false",
          "string_type": "a string", "float_type": "a number", "list_type": "a list", "tuple_type": "a list",
          "model_type": "an object", "model_attributes_type": "an object", "dict_type": "an object",
          "finite_number": "a finite number"}


def _message(error: Mapping[str, Any], model: type[BaseModel]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        allowed = keys_of(model_at(model, loc[:-1]))
        return f"unknown key; {did_you_mean(str(loc[-1]), allowed)}allowed here: {', '.join(allowed)}"
    if kind in _TYPES:
        return f"must be {_TYPES[kind]}"
    if kind in ("enum", "literal_error"):
        return f"allowed: {error['ctx']['expected'].replace(' or ', ', ').replace(chr(39), '')}"
    if kind in ("greater_than_equal", "less_than_equal"):
        low, high = bounds(field_at(model, loc))
        if low is not None and high is not None:
            return f"must be between {low} and {high}"
        return f"must be >= {low}" if kind == "greater_than_equal" else f"must be <= {high}"
    if kind == "value_error":
        return str(error["ctx"]["error"])
    return error["msg"]


def problems(error: ValidationError, model: type[BaseModel], prefix: str) -> list[ConfigError]:
    """Each of pydantic's errors as one config line: the key path, the value given, what is allowed."""
    found = []
    for e in error.errors():
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith(("function-", "tagged-union")))]
        found.append(ConfigError(key_path(prefix, loc), e["input"], _message(e, model)))
    return found
