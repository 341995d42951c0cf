"""The project's stack files (``Pulumi.<stack>.yaml``) read as the Pulumi CLI reads them, without Pulumi.

Malformed files are config errors like any other: one line naming the file and what is wrong. A key written twice
is one of them: YAML requires the keys of a mapping to be unique (YAML 1.2.2, 3.2.1.1 "Mapping"), and a parser that
keeps the last one (PyYAML does) silently drops the first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from program.config.errors import ConfigError, StackFileError
from program.config.keys import KEY_PREFIX, PROJECT, SECRET

if TYPE_CHECKING:  # imported where a stack is read: every stack's code (pulumi, pydantic) is half a second at the
    # start of each command that only lists the stack files or reads one setting (python -m ops in the workflows)
    from program.config.schema import StackConfig
    from program.needs import Needs

REPO_ROOT = Path(__file__).resolve().parent.parent


def stack_files(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Stack name → its ``Pulumi.<stack>.yaml``."""
    return {p.name[len("Pulumi."):-len(".yaml")]: p for p in sorted(root.glob("Pulumi.*.yaml"))}


SECRET_PLACEHOLDER = SECRET
"""What an encrypted value (``key: {secure: ...}``) reads as offline: only ``pulumi up`` can decrypt it."""
STACK_SETTINGS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")
"""The top-level keys of a stack file (Pulumi's stack settings file reference: config, the ESC environment and the
secrets provider's three)."""


def _mapping(path: Path, where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")
        raise StackFileError(f"{path.name}: {where}", f"must be a mapping of keys to values, not {kind}")
    return value


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader in C (libyaml) where the wheel has it: the same documents, several times faster."""


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class UniqueKeyLoader(SAFE_LOADER):  # type: ignore[misc, valid-type]
    """The safe loader, refusing a mapping that names a key twice (both lines in the error)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` then a key of its own overrides the base's on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:
                continue  # an unhashable key: the base constructor says why
            if first is not key_node.start_mark:
                raise _DuplicateKey(problem=f"key {key} is written twice, on lines {first.line + 1} and "
                                            f"{key_node.start_mark.line + 1}; keep one (YAML keys are unique, and a "
                                            "reader would keep only the last)", problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep)


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML file that must hold a mapping (or nothing); a syntax error is ``FILE:LINE:COLUMN: problem``, and so
    is a key written twice; a file that is not UTF-8 text, or not a file, says so."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[:error.start].count(b"\n") + 1
        raise StackFileError(f"{path.name}:{line}", f"byte {error.object[error.start]:#04x} is not UTF-8 text; save "
                             "the file as UTF-8") from None
    except IsADirectoryError:
        raise StackFileError(str(path), "is a folder, not a stack file") from None
    except OSError as error:
        raise StackFileError(str(path), error.strerror or "cannot be read") from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path.name}:{mark.line + 1}:{mark.column + 1}" if mark else path.name
        problem = getattr(error, "problem", None) or "unreadable"
        raise StackFileError(where, problem if isinstance(error, _DuplicateKey) else f"{problem} (not valid YAML)"
                             ) from None
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


def _top_level(config_file: Path, data: dict[str, Any]) -> list[ConfigError]:
    """A top-level key that is not a stack setting: a config key whose ``config:`` line is missing, or a typo."""
    from program.config.schema import StackConfig
    found = []
    for key, value in data.items():
        if key in STACK_SETTINGS:
            continue
        if isinstance(key, str) and (":" in key or key in StackConfig.model_fields or
                                     key in {f.alias for f in StackConfig.model_fields.values()}):
            where = "keys go under config: (is its line missing?)"
        else:
            where = f"allowed at the top level: {', '.join(STACK_SETTINGS)}"
        found.append(ConfigError(str(key), value, f"is at the top level of {config_file.name}; {where}"))
    return found


def read_stack_file(config_file: Path, root: Path = REPO_ROOT) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stack file's config: the project's namespace, Pulumi.yaml defaults first (keys without prefix), and every
    other key as written (checked by the loader: a provider's setting, or an error)."""
    data = read_yaml(config_file)
    if problems := _top_level(config_file, data):
        raise ConfigError.several(problems)
    values, others = dict(project_defaults(root)), {}
    for key, value in _mapping(config_file, "config", data.get("config")).items():
        if str(key).startswith(KEY_PREFIX):
            values[key[len(KEY_PREFIX):]] = _plain(value)
        else:
            others[str(key)] = _plain(value)
    return values, others


def stack_namespace(config_file: Path, root: Path = REPO_ROOT) -> dict[str, Any]:
    """The project's config namespace of a stack file, Pulumi.yaml defaults first (keys without prefix)."""
    return read_stack_file(config_file, root)[0]


def cli_encoded(namespace: dict[str, Any], others: dict[str, Any] | None = None) -> dict[str, str]:
    """Config as the Pulumi CLI hands it to a program: full keys, strings, objects as JSON."""
    def encode(v: Any) -> str:
        if isinstance(v, str):
            return v
        return json.dumps(v)
    return {**{k: encode(v) for k, v in (others or {}).items()},
            **{f"{PROJECT}:{k}": encode(v) for k, v in namespace.items()}}


def stack_config(stack: str, config_file: Path | None = None) -> StackConfig:
    """A stack's parsed config, without loading its scenario (for tools that only read it)."""
    from program.config.loader import load_config
    from stacks import REGISTRY
    namespace, others = read_stack_file(config_file or stack_files()[stack])
    return load_config(namespace, PROJECT, stack, scenarios=REGISTRY, others=others)


def stack_needs(stack: str) -> Needs:
    """What the stack's scenario needs of the platform (its namespace, images...), from its config."""
    from stacks import REGISTRY
    cfg = stack_config(stack)
    return REGISTRY[cfg.scenario].needs_of(cfg, cfg.settings)
