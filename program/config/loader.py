"""Read a stack's config once and check it whole, before any resource is declared.

The ``aksgpu:`` namespace holds the platform's sections (``schema.py``) and one section of the stack's scenario,
read with that scenario's model. Every problem of the file is reported at once, one line each; a key that moved
into a scenario's section says where it went.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from components.vocabulary import BuildMode
from program.config import naming, rules
from program.config.errors import ConfigError, did_you_mean
from program.config.foreign import foreign_keys, misplaced_project_keys
from program.config.keys import KEY_PREFIX
from program.config.model import ConfigModel, is_text
from program.config.schema import StackConfig


class ScenarioConfig(Protocol):
    """What the loader needs of a registered scenario (``program.scenario.Scenario`` is one)."""

    # Read-only: the registered scenarios are frozen dataclasses.
    @property
    def name(self) -> str: ...
    @property
    def settings(self) -> type[ConfigModel] | None:
        """Its section's model; ``settings.section`` is the section's key (``llm``)."""
    @property
    def moved(self) -> Mapping[str, str]:
        """Keys that moved into its section: old path (``workloads.resimJobs``) → key in the section (``jobs``)."""

    def problems(self, cfg: StackConfig, settings: Any) -> Iterable[ConfigError]:
        """The scenario's requirements of the platform and its own rules, checked against the whole config."""


def decode(value: Any, string: bool) -> Any:
    """A top-level value as the Pulumi CLI hands it over (``"3"``, ``"true"``, objects as JSON) turned back into
    its JSON value; ``string`` keys keep their text (a stack named ``123`` is a string)."""
    if string or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


# Every field has its alias (ConfigModel's camelCase generator): `is not None` only tells mypy so.
_PLATFORM_KEYS = {f.alias for f in StackConfig.model_fields.values() if f.alias is not None}
_TEXT_KEYS = {f.alias for f in StackConfig.model_fields.values() if f.alias is not None and is_text(f)}
"""Top-level keys whose values are text: the CLI hands them over as they are."""


def _moved(old: str, scenario: str, scenarios: Mapping[str, ScenarioConfig]) -> str | None:
    """Where ``old`` (``workloads.resimJobs``) went, if a scenario's section took it over."""
    owners = {s.name: f"{KEY_PREFIX}{s.settings.section}.{s.moved[old]}" for s in scenarios.values()
              if s.settings is not None and old in s.moved}
    if not owners:
        return None
    if scenario in owners:
        return f"moved to {owners[scenario]}"
    first = next(iter(owners.values()))
    return f"moved to {first}, a key of {' and '.join(owners)} stacks; this stack runs {scenario}"


def _foreign_keys(data: dict[str, Any], scenario: str, scenarios: Mapping[str, ScenarioConfig]) -> list[ConfigError]:
    """Top-level keys the platform does not have: moved keys and other scenarios' sections, each explained and
    removed from ``data``. What remains unknown is left for the model's did-you-mean."""
    found = []
    sections: dict[str, list[str]] = {}
    for s in scenarios.values():
        if s.settings is not None:
            sections.setdefault(s.settings.section, []).append(s.name)
    for key in [k for k in data if k not in StackConfig.model_fields and k not in _PLATFORM_KEYS]:
        value = data[key]
        subs = value if isinstance(value, dict) else {}
        moves = {sub: where for sub in subs if (where := _moved(f"{key}.{sub}", scenario, scenarios))}
        found += [ConfigError(f"{KEY_PREFIX}{key}.{sub}", subs[sub], where) for sub, where in moves.items()]
        if moves and len(moves) == len(subs):
            del data[key]
        elif key in sections and scenario not in sections[key]:
            found.append(ConfigError(f"{KEY_PREFIX}{key}", value,
                                     f"is the section of {' and '.join(sections[key])} stacks; "
                                     f"this stack runs {scenario}"))
            del data[key]
    return found


def _resolved(cfg: StackConfig, stack: str) -> StackConfig:
    """Defaults that depend on other keys, filled in."""
    storage, addons = cfg.storage, cfg.addons
    return cfg.model_copy(update={
        "environment": cfg.environment or stack,
        "name_root": cfg.name_root or naming.root_from_stack(stack),
        "storage": storage.model_copy(update={"private": cfg.cluster.private if storage.private is None
                                              else storage.private}),
        "addons": addons.model_copy(update={"blob_csi": bool(storage.accounts) if addons.blob_csi is None
                                            else addons.blob_csi}),
    })


def _root_problems(cfg: StackConfig, stack: str) -> list[ConfigError]:
    """A naming root derived from a long stack name is refused, never cut: cut, two stacks would share names."""
    if naming.name_root_error(cfg.name_root):
        return [ConfigError(f"{KEY_PREFIX}nameRoot", "", f"the stack name {stack!r} gives the naming root "
                            f"{cfg.name_root!r} ({len(cfg.name_root)} characters), but Azure's name limits leave "
                            f"{naming.MAX_ROOT}; set nameRoot, e.g. {naming.shorter_root(cfg.name_root)!r}")]
    return []


def _local_build(data: Mapping[str, Any]) -> bool:
    """Whether the stack builds with the local Docker engine: unless its file says ``build.mode: acr``."""
    build = data.get("build")
    mode = build.get("mode") if isinstance(build, dict) else None
    return mode != BuildMode.ACR


def load_config(raw: Mapping[str, Any], project: str, stack: str,
                scenarios: Mapping[str, ScenarioConfig], others: Mapping[str, Any] | None = None) -> StackConfig:
    """The ``project:`` namespace of a stack (keys without the prefix), parsed and checked; ``scenarios`` are the
    registered ones; ``others``, where given, are the stack's keys outside the namespace (written in full), each a
    provider setting the program reads or an error. Raises ``ConfigError`` naming every problem; a project key
    written outside the namespace is reported alone, since the rest of the file reads differently without it."""
    data = {key: decode(value, key in _TEXT_KEYS) for key, value in raw.items()}
    found: list[ConfigError] = []
    if others:
        project_keys = _PLATFORM_KEYS | {s.settings.section for s in scenarios.values() if s.settings is not None}
        found = foreign_keys(others, project_keys, _local_build(data))
        if misplaced := misplaced_project_keys(found):
            raise ConfigError.several(misplaced)
    name = data.get("scenario", StackConfig.model_fields["scenario"].default)
    scenario = scenarios.get(name) if isinstance(name, str) else None
    if scenario is None:
        found.append(ConfigError(f"{KEY_PREFIX}scenario", name, f"{did_you_mean(str(name), scenarios)}allowed: "
                                 f"{', '.join(scenarios)}"))
    model = scenario.settings if scenario is not None else None
    section = data.pop(model.section, {}) if model is not None else None
    found += _foreign_keys(data, name, scenarios)

    cfg = settings = None
    try:
        parsed = StackConfig.parse(data, KEY_PREFIX)
        cfg = _resolved(parsed, stack)
        cfg._project, cfg._stack = project, stack
        if not parsed.name_root:
            found += _root_problems(cfg, stack)
        found += rules.check(cfg)
    except ConfigError as error:
        found += error.problems
    if model is not None:
        try:
            settings = model.parse(section or {}, f"{KEY_PREFIX}{model.section}")
        except ConfigError as error:
            found += error.problems
    if cfg is not None and scenario is not None and (model is None or settings is not None):
        cfg._settings = settings
        found += scenario.problems(cfg, settings)
    if cfg is not None:
        found += rules.api_server_decision(cfg.cluster)
    if found:
        raise ConfigError.several(found)
    assert cfg is not None, "a config that did not parse has its problems in found"
    return cfg
