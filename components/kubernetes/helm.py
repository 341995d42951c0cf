"""The one way this program installs a Helm chart: pinned, atomic, cleaned up on failure, in its namespace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_kubernetes import helm

from components.kubernetes.charts import Chart


def release(name: str, release_name: str, chart: Chart, namespace_name: pulumi.Input[str],
            values: Mapping[str, Any], parent: pulumi.Resource, timeout_seconds: int = 600,
            upgrades_own_crds: bool = False, depends_on: Sequence[pulumi.Resource] = ()) -> helm.v3.Release:
    """``upgrades_own_crds``: the chart updates its CRDs in a pre-upgrade hook, which needs Helm's OpenAPI
    validation off, or a values change that uses new CRD fields fails before the hook runs. ``depends_on``: what
    the release must outlive on destroy (an edge Pulumi cannot see)."""
    return helm.v3.Release(
        name,
        name=release_name,
        chart=chart.chart,
        version=chart.version,
        repository_opts=helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
        namespace=namespace_name,
        create_namespace=False,  # the program owns namespaces (labels, deletion order)
        values=dict(values),
        # A failed install or upgrade rolls back and deletes what it created, so no half release blocks the next.
        atomic=True,
        cleanup_on_fail=True,
        timeout=timeout_seconds,
        disable_openapi_validation=upgrades_own_crds or None,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
