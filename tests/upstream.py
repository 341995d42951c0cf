"""Upstream chart values, schemas and CRDs of the pinned versions, read from the shared reference folder.

The files are reference only and never copied into this project: tests read them from ``../shared/data/charts``
beside the checkout (or ``AKSGPU_CHARTS_DIR``) and skip, saying why, where they are absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from offline.render import REPO_ROOT


def charts_dir() -> Path:
    path = Path(os.environ.get("AKSGPU_CHARTS_DIR", REPO_ROOT.parent / "shared" / "data" / "charts"))
    if not path.is_dir():
        pytest.skip(f"upstream chart references not found at {path} (set AKSGPU_CHARTS_DIR)")
    return path


def chart_file(chart: str, name: str) -> Path:
    return charts_dir() / chart / name


def chart_yaml(chart: str) -> dict[str, Any]:
    return yaml.safe_load(chart_file(chart, "Chart.yaml").read_text())


def chart_values(chart: str) -> dict[str, Any]:
    return yaml.safe_load(chart_file(chart, "values.yaml").read_text())


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


def values_schema(chart: str) -> dict[str, Any]:
    return json.loads(chart_file(chart, "values.schema.json").read_text())


def crd(chart: str, file: str, name: str) -> dict[str, Any]:
    for doc in yaml.safe_load_all(chart_file(chart, f"crds/{file}").read_text()):
        if doc and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(name)


def validate_against_crd(obj: dict[str, Any], definition: dict[str, Any]) -> None:
    """Validate a custom object with the CRD's openAPIV3Schema for its apiVersion (raises on error)."""
    version = obj["apiVersion"].split("/")[-1]
    (served,) = [v for v in definition["spec"]["versions"] if v["name"] == version]
    jsonschema.validate(obj, served["schema"]["openAPIV3Schema"])


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
