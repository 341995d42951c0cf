"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

from typing import Any

from offline.mocks import SUBSCRIPTION
from offline.render import Render, render_namespace
from offline.stack_files import project_defaults, stack_files, stack_namespace

API_SERVER_KEYS = ("private", "authorizedIpRanges", "openApiServer")


def with_api_server_decision(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``cluster.openApiServer: true`` (as the committed public stacks have) unless it already
    decides how the API server is reached: every stack must, and most tests are about something else."""
    cluster = config.get("cluster", {})
    if isinstance(cluster, dict) and not any(k in cluster for k in API_SERVER_KEYS):
        return {**config, "cluster": {**cluster, "openApiServer": True}}
    return config


def render_with(stack: str = "t", subscription: str = SUBSCRIPTION, **config: Any) -> Render:
    """Render a stack whose file would hold ``config`` (keys without ``aksgpu:``), Pulumi.yaml defaults first, as
    deployed into ``subscription``. See ``with_api_server_decision``."""
    return render_namespace(stack, {**project_defaults(), **with_api_server_decision(config)}, subscription)


def stack_config_of(stack: str) -> dict[str, Any]:
    """A committed stack's config namespace, to render variants of it with ``render_with``."""
    return stack_namespace(stack_files()[stack])


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a workload object (a manifest, or a resource's revealed inputs): a Pod's own, a CronJob's
    Job template's, any other kind's template's."""
    kind = obj.get("kind")
    if kind == "Pod":
        return obj["spec"]
    spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
    return spec["template"]["spec"]


def api_clients(render: Render) -> set[str]:
    """The service accounts (``namespace/name``) a role binding gives Kubernetes API rights: the only pods that may
    carry a token."""
    return {f"{s['namespace']}/{s['name']}" for r in render.resources
            if r.type.endswith((":ClusterRoleBinding", ":RoleBinding"))
            for s in r.revealed["subjects"] if s["kind"] == "ServiceAccount"}


def device_plugin_configs(render: Render) -> list[Any]:
    """The GPU operator's device-plugin ConfigMaps (time-slicing, MPS) of a render."""
    return [r for r in render.of_type("kubernetes:core/v1:ConfigMap") if r.name.endswith("-sharing-config")]


def load(raw: dict[str, Any], stack: str = "test"):
    """A stack's config loaded with the registered scenarios (``cluster.openApiServer: true`` unless ``raw``
    decides how the API server is reached); raises ``ConfigError``."""
    from program.config.loader import load_config
    from stacks import REGISTRY
    return load_config(with_api_server_decision(raw), "aksgpu", stack, REGISTRY)


def jobset_templates(render: Render) -> dict[str, dict[str, Any]]:
    """The JobSets a stack keeps as manifests in ConfigMaps to create on demand (components/training/jobset.py
    RunTemplate): name → the JobSet."""
    import yaml

    from components.training.jobset import MANIFEST_KEY
    found = {}
    for r in render.of_type("kubernetes:core/v1:ConfigMap"):
        if r.revealed["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "run-template":
            jobset = yaml.safe_load(r.revealed["data"][MANIFEST_KEY])
            found[jobset["metadata"]["name"]] = jobset
    return found


def jobset_pods(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod template of each replicated job of a JobSet."""
    return [rj["template"]["spec"]["template"] for rj in jobset["spec"]["replicatedJobs"]]
