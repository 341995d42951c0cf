"""Taints and tolerations: AKS writes a pool's taints as ``key=value:Effect`` strings, Kubernetes as objects; pods
take their tolerations from the pool they run on, never spelt out again."""

from __future__ import annotations


def taint_fields(taint: str) -> dict[str, str]:
    """An AKS taint string ``key=value:Effect`` as Kubernetes writes a taint: key, value, effect."""
    key_value, effect = taint.rsplit(":", 1)
    key, value = key_value.split("=", 1)
    return {"key": key, "value": value, "effect": effect}


def toleration(taint: str) -> dict[str, str]:
    """The Kubernetes toleration matching an AKS taint string ``key=value:Effect``."""
    fields = taint_fields(taint)
    return {"key": fields["key"], "operator": "Equal", "value": fields["value"], "effect": fields["effect"]}


def merged_tolerations(*groups: list[dict[str, str]]) -> list[dict[str, str]]:
    """Tolerations of several pools, each once, in a stable order."""
    seen: dict[tuple, dict[str, str]] = {}
    for group in groups:
        for t in group:
            seen.setdefault(tuple(sorted(t.items())), t)
    return list(seen.values())
