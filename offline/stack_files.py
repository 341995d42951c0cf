"""The project's stack files (``Pulumi.<stack>.yaml``) read as the Pulumi CLI reads them, without Pulumi.

Malformed files are config errors like any other: one line naming the file and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from program.config.errors import StackFileError
from program.config.keys import PROJECT
from program.config.loader import load_config
from program.config.schema import StackConfig
from program.needs import Needs
from stacks import REGISTRY

REPO_ROOT = Path(__file__).resolve().parent.parent


def stack_files(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Stack name → its ``Pulumi.<stack>.yaml``."""
    return {p.name[len("Pulumi."):-len(".yaml")]: p for p in sorted(root.glob("Pulumi.*.yaml"))}


SECRET_PLACEHOLDER = "[secret]"  # noqa: S105 (a placeholder, not a secret)
"""What an encrypted value (``key: {secure: ...}``) reads as offline: only ``pulumi up`` can decrypt it."""


def _mapping(path: Path, where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")
        raise StackFileError(f"{path.name}: {where}", f"must be a mapping of keys to values, not {kind}")
    return value


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader in C (libyaml) where the wheel has it: the same documents, several times faster."""


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML file that must hold a mapping (or nothing); a syntax error is ``FILE:LINE:COLUMN: problem``."""
    try:
        data = yaml.load(path.read_text(), Loader=SAFE_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path.name}:{mark.line + 1}:{mark.column + 1}" if mark else path.name
        raise StackFileError(where, f"{getattr(error, 'problem', None) or 'unreadable'} (not valid YAML)") from None
    return _mapping(path, "the top level", data)


def _plain(value: Any) -> Any:
    """A stack file value with each ``{secure: ...}`` replaced by a placeholder (the render cannot decrypt)."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def project_defaults(root: Path = REPO_ROOT) -> dict[str, Any]:
    """Defaults declared in ``Pulumi.yaml``, as the CLI applies them to every stack."""
    project = read_yaml(root / "Pulumi.yaml")
    return {k: v["default"] for k, v in _mapping(root / "Pulumi.yaml", "config", project.get("config")).items()
            if isinstance(v, dict) and "default" in v}


def stack_namespace(config_file: Path, root: Path = REPO_ROOT) -> dict[str, Any]:
    """The project's config namespace of a stack file, Pulumi.yaml defaults first (keys without prefix)."""
    data = read_yaml(config_file)
    values = dict(project_defaults(root))
    prefix = f"{PROJECT}:"
    for key, value in _mapping(config_file, "config", data.get("config")).items():
        if key.startswith(prefix):
            values[key[len(prefix):]] = _plain(value)
    return values


def cli_encoded(namespace: dict[str, Any]) -> dict[str, str]:
    """Config as the Pulumi CLI hands it to a program: full keys, strings, objects as JSON."""
    def encode(v: Any) -> str:
        if isinstance(v, str):
            return v
        return json.dumps(v)
    return {f"{PROJECT}:{k}": encode(v) for k, v in namespace.items()}


def stack_config(stack: str, config_file: Path | None = None) -> StackConfig:
    """A stack's parsed config, without loading its scenario (for tools that only read it)."""
    namespace = stack_namespace(config_file or stack_files()[stack])
    return load_config(namespace, PROJECT, stack, scenarios=REGISTRY)


def stack_needs(stack: str) -> Needs:
    """What the stack's scenario needs of the platform (its namespace, images...), from its config."""
    cfg = stack_config(stack)
    return REGISTRY[cfg.scenario].needs_of(cfg, cfg.settings)
