"""What the config declarations become for people and editors: the JSON Schema of a stack file
(``docs/stack-file.schema.json``, which editors use through yaml-language-server) and, generated from that schema,
the configuration reference (``docs/configuration.md``). Both come from the pydantic models and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from components.azure.regions import load_regions
from program.config.foreign import LOCAL_BUILD, OVERRIDDEN, PROVIDER_SETTINGS, SECRET_SETTINGS
from program.config.keys import KEY_PREFIX, PROJECT
from program.config.model import ConfigModel
from program.config.schema import CPU_POOL_DEFAULTS, GPU_POOL_DEFAULTS, SYSTEM_POOL_DEFAULTS, StackConfig
from program.markdown import table

SCHEMA_ID = "https://aksgpu.example/stack-file.schema.json"


class ScenarioDoc(Protocol):
    """What the reference needs of a registered scenario (``program.scenario.Scenario``, frozen: read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def settings(self) -> type[ConfigModel] | None: ...


def _clean(node: Any) -> Any:
    """pydantic's schema without its generated titles, and without ``default: null`` where a field's default is
    derived from other keys (``defaultText`` says how)."""
    if isinstance(node, dict):
        out = {k: _clean(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
        if "defaultText" in out and out.get("default") is None:
            out.pop("default", None)
        return out
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def _model_schema(model: type[ConfigModel], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A model's schema and its definitions, the definitions' names prefixed (scenarios may reuse class names)."""
    schema = model.model_json_schema(by_alias=True, ref_template=f"#/$defs/{prefix}{{model}}")
    defs = {f"{prefix}{name}": body for name, body in schema.pop("$defs", {}).items()}
    return _clean(schema), _clean(defs)


def _cli_string(schema: dict[str, Any]) -> dict[str, Any]:
    """A top-level scalar as ``pulumi config set`` may write it: its own type, or the same value as text."""
    kind = schema.get("type")
    if kind == "integer":
        return {"anyOf": [schema, {"type": "string", "pattern": r"^-?[0-9]+$"}]}
    if kind == "boolean":
        return {"anyOf": [schema, {"enum": ["true", "false"]}]}
    return schema


def _scenario_is(name: str, default: bool) -> dict[str, Any]:
    named = {"properties": {f"{KEY_PREFIX}scenario": {"const": name}}, "required": [f"{KEY_PREFIX}scenario"]}
    return {"anyOf": [named, {"not": {"required": [f"{KEY_PREFIX}scenario"]}}]} if default else named


_SECURE = {"type": "object", "properties": {"secure": {"type": "string"}}, "required": ["secure"],
           "additionalProperties": False}
"""An encrypted value, as `pulumi config set --secret` writes it."""


def _provider_settings() -> tuple[dict[str, Any], dict[str, Any]]:
    """The provider settings the program reads, as properties, and the condition that keeps Docker's to stacks
    that build with the local engine, every stack but one with ``build.mode: acr`` (``program.config.foreign`` says
    why)."""
    properties = {}
    for namespace, names in PROVIDER_SETTINGS.items():
        for name in sorted(names):
            key = f"{namespace}:{name}"
            properties[key] = {**_SECURE, "description": "A credential: `pulumi config set --secret`."} \
                if key in SECRET_SETTINGS else {"description": f"The {namespace} provider's setting."}
    acr = {"required": [f"{KEY_PREFIX}build"],
           "properties": {f"{KEY_PREFIX}build": {"required": ["mode"], "properties": {"mode": {"const": "acr"}}}}}
    docker_only_local = {"if": acr, "then": {"propertyNames": {"not": {"pattern": f"^{LOCAL_BUILD}:"}}}}
    return properties, docker_only_local


def stack_file_schema(scenarios: Mapping[str, ScenarioDoc]) -> dict[str, Any]:
    """The JSON Schema of ``Pulumi.<stack>.yaml``: the platform's keys, the scenario names, each scenario's section
    allowed only on that scenario's stacks, Azure's region names, and the provider settings the program reads."""
    platform, defs = _model_schema(StackConfig, "")
    properties = {f"{KEY_PREFIX}{key}": _cli_string(body) for key, body in platform["properties"].items()}
    properties[f"{KEY_PREFIX}scenario"] = {**properties[f"{KEY_PREFIX}scenario"], "enum": list(scenarios)}
    properties[f"{KEY_PREFIX}location"] = {**properties[f"{KEY_PREFIX}location"], "enum": list(load_regions()[0])}
    providers, docker_only_local = _provider_settings()
    overridden = {key: {"not": {}, "description": f"Never used: {meant} decides."} for key, meant in OVERRIDDEN.items()}
    default = StackConfig.model_fields["scenario"].default
    sections: dict[str, list[str]] = {}
    conditions = []
    for name, scenario in scenarios.items():
        if scenario.settings is None:
            continue
        section, (body, more) = scenario.settings.section, _model_schema(scenario.settings, f"{name}.")
        defs.update(more)
        sections.setdefault(section, []).append(name)
        conditions.append({"if": _scenario_is(name, name == default),
                           "then": {"properties": {f"{KEY_PREFIX}{section}": body}}})
    for section, owners in sorted(sections.items()):
        properties[f"{KEY_PREFIX}{section}"] = {"type": "object",
                                                "description": f"Only on {' and '.join(owners)} stacks."}
        for name in scenarios:
            if name not in owners:
                conditions.append({"if": _scenario_is(name, name == default),
                                   "then": {"not": {"required": [f"{KEY_PREFIX}{section}"]}}})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"{PROJECT} stack file (Pulumi.<stack>.yaml)",
        "description": "Generated by `python -m offline docs` from program/config/ and the scenarios' settings; "
                       "docs/configuration.md explains every key.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {**properties, **providers, **overridden},
                "additionalProperties": False,
                "allOf": [*conditions, docker_only_local],
            },
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "environment": {},
        },
        "additionalProperties": False,
        "$defs": defs,
    }


@dataclass(frozen=True)
class KeyDoc:
    key: str
    """Path below ``aksgpu:``, e.g. ``gpuPools[].sharing.mode``."""
    type: str
    default: str
    doc: str
    section: bool = False
    """An object or a list of objects, whose keys follow."""


def _resolve(node: dict[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """A property's schema with its ``$ref`` followed and ``X | null`` reduced to X."""
    if "$ref" in node:
        return {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    if "anyOf" in node:
        kinds = [n for n in node["anyOf"] if n.get("type") != "null"]
        if len(kinds) == 1:
            return {**_resolve(kinds[0], defs), **{k: v for k, v in node.items() if k != "anyOf"}}
    return node


def _type(node: dict[str, Any], defs: Mapping[str, Any]) -> str:
    node = _resolve(node, defs)
    if "enum" in node:
        return " | ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    kind = node.get("type")
    if kind == "array":
        item = _resolve(node.get("items", {}), defs)
        return "list of objects" if item.get("type") == "object" else f"list of {_type(item, defs)}s"
    if kind == "object":
        return "map of strings" if "additionalProperties" in node and "properties" not in node else "object"
    text = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string"}.get(str(kind), "value")
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        return f"{text}, {low}–{high}"
    return f"{text}, ≥ {low}" if low is not None else text


def _default(node: dict[str, Any]) -> str:
    if "defaultText" in node:
        return node["defaultText"]
    if "default" not in node:
        return "required"
    value = node["default"]
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return "see below"
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
    if isinstance(value, (list, str)) and not value:
        return f"`{json.dumps(value)}`"
    return f"`{value}`" if not isinstance(value, list) else f"`{json.dumps(value)}`"


def _walk(properties: Mapping[str, Any], defs: Mapping[str, Any], prefix: str) -> Iterator[KeyDoc]:
    for key, raw in properties.items():
        node = _resolve(raw, defs)
        doc = " ".join((node.get("description") or "").split())
        item = _resolve(node.get("items", {}), defs) if node.get("type") == "array" else {}
        nested = node if node.get("type") == "object" and "properties" in node else \
            item if item.get("type") == "object" else None
        yield KeyDoc(prefix + key, _type(node, defs), _default(node), doc, section=nested is not None)
        if nested is not None:
            yield from _walk(nested["properties"], defs, f"{prefix}{key}{'[]' if nested is item else ''}.")


def reference() -> list[KeyDoc]:
    """Every key of the platform's sections, in declaration order (what the loader reads, key for key)."""
    body, defs = _model_schema(StackConfig, "")
    return list(_walk(body["properties"], defs, ""))


def scenario_sections(scenarios: Mapping[str, ScenarioDoc]) -> dict[str, list[KeyDoc]]:
    """Scenario → the keys of the section it owns, the section's own row first."""
    sections = {}
    for name, scenario in scenarios.items():
        if scenario.settings is None:
            continue
        section = scenario.settings.section
        body, defs = _model_schema(scenario.settings, f"{name}.")
        head = KeyDoc(section, "object", "see below", f"Only on `{name}` stacks.", section=True)
        sections[name] = [head, *_walk(body["properties"], defs, f"{section}.")]
    return sections


def _rows(keys: list[KeyDoc]) -> list[str]:
    return table(["key", "type", "default", "meaning"],
                 [(f"**`{k.key}`**" if k.section else f"`{k.key}`", k.type, k.default, k.doc) for k in keys])


def markdown(scenarios: Mapping[str, ScenarioDoc]) -> str:
    """docs/configuration.md."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m offline docs` from program/config/schema.py and each scenario's settings.py; "
        "edit those, not this file. -->",
        "",
        f"Every key lives in the `{PROJECT}:` namespace of a stack file (`Pulumi.<stack>.yaml`). Objects are "
        "set whole in the file or by path (`pulumi config set --path 'aksgpu:gpuPools[0].maxCount' 3`). Every "
        "value is checked before any resource is declared; unknown keys are errors, and every problem of a file is "
        "reported at once, one line each, naming the key, the value and what is allowed. Editors check and "
        "complete the keys as you type with [the stack file's JSON Schema](stack-file.schema.json) (README: "
        "Editing stack files).",
        "",
        "Outside this namespace a stack file holds only what a provider the program uses reads: "
        f"{', '.join(f'`{ns}:`' for ns in PROVIDER_SETTINGS)} settings (Azure's sign-in; Docker's engine, "
        "which builds the images unless `build.mode: acr`), credentials among them encrypted (`pulumi config set "
        "--secret`). Any other key is an error naming it, with the key that was probably meant: `owner` or "
        "`azure-native:location` (never used: `location` decides) each ask whether you meant the `aksgpu:` key. "
        "`location` must be one of Azure's regions (`components/azure/regions.yaml`).",
        "",
        *_rows(reference()),
        "",
        "Pool defaults differ by kind: `cluster.systemPool` is "
        f"`{SYSTEM_POOL_DEFAULTS.vm_size}` {SYSTEM_POOL_DEFAULTS.min_count}–{SYSTEM_POOL_DEFAULTS.max_count}, each "
        f"`cpuPools[]` entry `{CPU_POOL_DEFAULTS.vm_size}` {CPU_POOL_DEFAULTS.min_count}–"
        f"{CPU_POOL_DEFAULTS.max_count}, each `gpuPools[]` entry `{GPU_POOL_DEFAULTS.vm_size}` "
        f"{GPU_POOL_DEFAULTS.priority.value} {GPU_POOL_DEFAULTS.min_count}–{GPU_POOL_DEFAULTS.max_count}.",
        "",
        "## Scenario sections",
        "",
        "A scenario with keys of its own keeps them in one section (its folder's `settings.py`), read and checked "
        "with the rest; on a stack of another scenario the section is an error. Keys that moved into a section "
        "say where they went.",
        "",
    ]
    for name, keys in scenario_sections(scenarios).items():
        lines += [f"### `{name}`", "", *_rows(keys), ""]
    return "\n".join(lines)
