"""Upstream facts of the pinned versions (chart values and metadata, CRD schemas, DCGM counters), read from the
fixtures ``scripts/derive_fixtures.py`` writes under ``tests/fixtures/``.

Fixtures are looked up by the version the program pins. A missing one fails the test, naming the file and the
command that makes it: a chart bump cannot quietly keep checking against the old chart.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest

from components.kubernetes import charts

FIXTURES = Path(__file__).with_name("fixtures")

K8S_VERSION = "1.33.0"
"""The Kubernetes version built-in objects are validated against (strict: an unknown field fails): one AKS supports
today; kubernetes-validate ships its schemas."""

# kubernetes_validate.validate parses its schema folder's 1.4 MB _definitions.json again on every call
# (kubernetes_validate/utils.py schema_contents: 5 of its 6.6 ms an object); the suite validates about a thousand
# objects. Each schema file is parsed once per process instead; the files and the validation are the library's.
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)


def validate_builtin(obj: dict[str, Any]) -> None:
    """``obj`` against the strict schema of its kind at ``K8S_VERSION`` (kubernetes_validate.ValidationError)."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def fixture(*parts: str) -> Any:
    path = FIXTURES.joinpath(*parts)
    if not path.is_file():
        pytest.fail(f"missing fixture {path.relative_to(FIXTURES.parent.parent)}: derive it with "
                    "scripts/derive_fixtures.py (its docstring says how)")
    return json.loads(path.read_text())


def _pinned(chart: str) -> charts.Chart:
    (pin,) = [c for c in charts.PINNED_CHARTS if c.chart.rsplit("/", 1)[-1] == chart]
    return pin


def chart_meta(chart: str) -> dict[str, Any]:
    """Name, version, appVersion and dependencies of the pinned version of ``chart``."""
    return fixture("charts", chart, _pinned(chart).version, "chart.json")


def chart_values(chart: str) -> dict[str, Any]:
    return fixture("charts", chart, _pinned(chart).version, "values.json")


def values_schema(chart: str) -> dict[str, Any]:
    return fixture("charts", chart, _pinned(chart).version, "values.schema.json")


def crd(chart: str, name: str) -> dict[str, Any]:
    """A CRD the pinned chart ships: scope, group, kind and each served version's schema."""
    return fixture("charts", chart, _pinned(chart).version, "crds.json")[name]


def operator_crd(project: str, version: str, name: str) -> dict[str, Any]:
    """A CRD of an operator the cluster runs at ``version`` (an AKS add-on or a chart)."""
    return fixture("crds", project, version.lstrip("v"), "crds.json")[name]


def seed_rule() -> dict[str, Any]:
    """Seed 003's NodeFeatureRule (wolfgang-desalvador/av-resim-on-aks node_feature_discovery/nfd-gpu-rule.yaml)."""
    return fixture("seeds", "003-nfd-gpu-rule.json")


def unknown_value_paths(ours: Any, defaults: Any, path: str = "") -> list[str]:
    """Paths we set that the chart does not define. Below a list, a null or a scalar the chart is free-form."""
    if not isinstance(ours, dict) or not isinstance(defaults, dict):
        return []
    unknown = []
    for key, value in ours.items():
        here = f"{path}.{key}" if path else key
        if key not in defaults:
            unknown.append(here)
        else:
            unknown += unknown_value_paths(value, defaults[key], here)
    return unknown


def deep_merge(base: Any, override: Any) -> Any:
    """Helm's merge of user values over chart defaults: maps merge, everything else is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = deep_merge(base.get(key), value)
        return merged
    return override


def validate_against_crd(obj: dict[str, Any], definition: dict[str, Any]) -> None:
    """Validate a custom object with the CRD's schema for its apiVersion (raises on error)."""
    group, version = obj["apiVersion"].split("/")
    assert (group, obj["kind"]) == (definition["group"], definition["kind"]), obj["apiVersion"]
    assert version in definition["versions"], f"{obj['apiVersion']} is not served; {sorted(definition['versions'])}"
    jsonschema.validate(obj, definition["versions"][version])


DEVICE_PLUGIN_SHARING_KEYS = {"renameByDefault", "failRequestsGreaterThanOne", "resources"}
DEVICE_PLUGIN_RESOURCE_KEYS = {"name", "replicas", "rename", "devices"}


def device_plugin_config_errors(doc: dict[str, Any]) -> list[str]:
    """The rules of NVIDIA/k8s-device-plugin api/config/v1 (v0.20.0) for a sharing config, as errors.

    version must be v1; flags.migStrategy none|single|mixed; sharing holds exactly one of timeSlicing and mps;
    resources is non-empty, each with a name and an integer replicas >= 2; misspelt keys are errors here
    because the plugin silently ignores them.
    """
    errors = []
    if doc.get("version") != "v1":
        errors.append(f"version {doc.get('version')!r} is not v1")
    if set(doc) - {"version", "flags", "sharing", "resources"}:
        errors.append(f"unknown top-level keys {sorted(set(doc) - {'version', 'flags', 'sharing', 'resources'})}")
    if (doc.get("flags") or {}).get("migStrategy", "none") not in ("none", "single", "mixed"):
        errors.append("flags.migStrategy must be none, single or mixed")
    sharing = doc.get("sharing") or {}
    modes = [m for m in ("timeSlicing", "mps") if m in sharing]
    if len(modes) != 1 or set(sharing) - {"timeSlicing", "mps"}:
        errors.append(f"sharing must hold exactly one of timeSlicing and mps, has {sorted(sharing)}")
    for mode in modes:
        body = sharing[mode]
        if set(body) - DEVICE_PLUGIN_SHARING_KEYS:
            errors.append(f"unknown keys in sharing.{mode}: {sorted(set(body) - DEVICE_PLUGIN_SHARING_KEYS)}")
        resources = body.get("resources") or []
        if not resources:
            errors.append(f"sharing.{mode}.resources is empty")
        for r in resources:
            if set(r) - DEVICE_PLUGIN_RESOURCE_KEYS or not r.get("name"):
                errors.append(f"bad resource {r}")
            if not isinstance(r.get("replicas"), int) or r["replicas"] < 2:
                errors.append(f"replicas of {r.get('name')} must be an integer >= 2")
    return errors
