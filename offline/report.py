"""Files an offline render writes per stack: resources.json, manifests/, patches/, helm/, summary.md, graph.mmd."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from components.gpu.sizes import GPU_SIZES
from offline import urns
from offline.estimates.cost import Totals, cost_markdown, load_prices, totals
from offline.estimates.timeline import plan, timeline_markdown, total_seconds
from offline.render import Render, Resource
from program.markdown import table

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
AGENT_POOL = "azure-native:containerservice:AgentPool"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"


def is_patch(r: Resource) -> bool:
    """A server-side-apply patch of an object someone else owns (an AKS add-on's): only the fields it sets."""
    return r.type.startswith("kubernetes:") and r.type.endswith("Patch")


def is_manifest(r: Resource) -> bool:
    """A whole Kubernetes object the program owns (not a provider, Helm release, YAML group or patch)."""
    return (r.type.startswith("kubernetes:") and r.type != HELM_RELEASE and "apiVersion" in r.inputs
            and not is_patch(r))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-")


def manifest(r: Resource) -> dict[str, Any]:
    order = ["apiVersion", "kind", "metadata"]
    return {k: r.inputs[k] for k in order + sorted(set(r.inputs) - set(order)) if k in r.inputs}


def helm_release(r: Resource) -> dict[str, Any]:
    i = r.inputs
    return {
        "name": i.get("name", r.name),
        "chart": i.get("chart"),
        "repository": (i.get("repositoryOpts") or {}).get("repo"),
        "version": i.get("version"),
        "namespace": i.get("namespace"),
        "createNamespace": i.get("createNamespace", False),
        "atomic": i.get("atomic", False),
        "cleanupOnFail": i.get("cleanupOnFail", False),
        "timeout": i.get("timeout"),
        "values": i.get("values", {}),
    }


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)


def write_render(render: Render, out: Path) -> Path:
    """Write one stack's files under ``out/<stack>/`` (replacing what was there)."""
    target = out / render.stack
    if target.exists():
        shutil.rmtree(target)
    (target / "manifests").mkdir(parents=True)
    (target / "helm").mkdir()
    (target / "patches").mkdir()
    (target / "resources.json").write_text(
        json.dumps([r.as_json() for r in render.resources], indent=2, sort_keys=False) + "\n")
    (target / "urns.txt").write_text(urns.text(urns.pins_of(render.resources)))
    for r in render.resources:
        if is_manifest(r) or is_patch(r):
            meta = r.inputs.get("metadata") or {}
            kind, namespace = _slug(r.inputs["kind"]), _slug(meta.get("namespace", "cluster"))
            name = f"{kind}-{namespace}-{_slug(meta.get('name', r.name))}"
            folder = "manifests" if is_manifest(r) else "patches"
            (target / folder / f"{name}.yaml").write_text(_dump(manifest(r)))
        elif r.type == HELM_RELEASE:
            (target / "helm" / f"{_slug(r.name)}.yaml").write_text(_dump(helm_release(r)))
    prices, planned = load_prices(), plan(render)
    (target / "summary.md").write_text(summary(render, totals(render, prices), total_seconds(planned[0]) / 60))
    (target / "graph.mmd").write_text(graph(render))
    (target / "cost.md").write_text(cost_markdown(render, prices))
    (target / "timeline.md").write_text(timeline_markdown(render, planned))
    return target


def node_pool_rows(render: Render) -> list[dict[str, Any]]:
    """One row per agent pool as declared (system pool inline in the cluster, the rest as AgentPool)."""
    pools = []
    for cluster in render.of_type(MANAGED_CLUSTER):
        pools += [dict(p) for p in cluster.inputs.get("agentPoolProfiles", [])]
    for r in render.of_type(AGENT_POOL):
        pools.append({"name": r.inputs["agentPoolName"], **r.inputs})
    rows = []
    cfg = render.cfg
    gpu_cfg = {g.name: g for g in cfg.gpu_pools}
    # Config order (system pool, GPU pools, CPU pools), as cost.md lists them.
    order = [cfg.cluster.system_pool.name, *gpu_cfg, *(c.name for c in cfg.cpu_pools)]
    for p in sorted(pools, key=lambda p: order.index(p["name"]) if p["name"] in order else len(order)):
        size = GPU_SIZES.get(p["vmSize"])
        g = gpu_cfg.get(p["name"])
        rows.append({
            "name": p["name"], "mode": p.get("mode"), "vmSize": p["vmSize"],
            "gpu": f"{size.gpu_model} × {size.gpus}" if size else "-",
            "spot": p.get("scaleSetPriority") == "Spot",
            "min": p.get("minCount"), "max": p.get("maxCount"),
            "taints": p.get("nodeTaints") or [],
            "gpusPerNode": g.schedulable_gpus_per_node if g else 0,
            "sharing": (f"{g.sharing.mode} ×{g.sharing.shares}" if g and g.sharing.mode.has_replicas
                        else g.sharing.mode.value if g else "-"),
            "driver": driver_owner(p, cfg.addons.gpu_operator) if size else "-",
        })
    return rows


def driver_owner(pool: dict[str, Any], gpu_operator: bool) -> str:
    """Who installs a GPU pool's NVIDIA driver: AKS (``gpuProfile.driver: Install``), or with ``None`` the GPU
    operator (AKS installs none)."""
    if (pool.get("gpuProfile") or {}).get("driver") == "Install":
        return "AKS"
    return "GPU operator" if gpu_operator else "nobody"


def summary(render: Render, cost: Totals, up_minutes: float) -> str:
    cfg = render.cfg
    lines = [f"# Stack `{render.stack}`: scenario `{cfg.scenario}`", "",
             f"Region `{cfg.location}`, naming root `{cfg.naming.root}`, environment `{cfg.environment}`, "
             f"owner `{cfg.owner}`.", ""]
    if cfg.cluster.private:
        lines += ["Cluster access: private API server, reachable only from its VNet.", ""]
    elif cfg.cluster.authorized_ip_ranges:
        lines += [f"Cluster access: public API server limited to {', '.join(cfg.cluster.authorized_ip_ranges)}.", ""]
    else:
        lines += ["**Warning: the public API server is open to every address** (Entra ID sign-in is still "
                  "required), as `cluster.openApiServer` accepts. Set `cluster.authorizedIpRanges` to your egress "
                  "CIDRs, or `cluster.private`, where you can.", ""]

    rows = node_pool_rows(render)
    lines += ["## Node pools", ""]
    lines += table(["pool", "mode", "VM size", "GPU model × count", "spot", "min–max", "taints",
                    "GPU driver installed by", "sharing", "schedulable nvidia.com/gpu per node"],
                   [(row["name"], row["mode"], row["vmSize"], row["gpu"], "yes" if row["spot"] else "no",
                     f"{row['min']}–{row['max']}", "\n".join(f"`{t}`" for t in row["taints"]) or "-", row["driver"],
                     row["sharing"], row["gpusPerNode"] or "-") for row in rows])
    idle_gpu = [r["name"] for r in rows if r["gpu"] != "-" and (r["min"] or 0) > 0]
    lines += ["", ("GPU nodes stay up when idle (min > 0) in pools: " + ", ".join(idle_gpu) +
                   f"; idle GPU cost is above zero ({cost.text(cost.idle_gpu)}/h estimated).") if idle_gpu else
              "Every GPU pool scales to zero when idle.",
              "", "AKS fixes a pool's VM size, priority, spot price and MIG profile when it creates the pool, and a "
                  "new GPU driver reaches only nodes made afterwards: changing one of them in config replaces the "
                  "pool (its nodes and their pods go; the system pool's size cannot change at all without a new "
                  "cluster).",
              "", f"Estimated cost (cost.md): {cost.text(cost.idle)}/h idle, {cost.text(cost.full)}/h at full scale"
                  + (f" (no price for pool {', '.join(cost.unpriced)} in {cfg.location})" if cost.unpriced else "")
                  + ". "
                  f"Estimated `pulumi up` (timeline.md): {up_minutes:.0f} min.", ""]

    lines += ["## Architecture", "",
              "Each box is a component and how many resources it holds. An arrow points from what a component waits "
              "for to the component: a resource it depends on, or the Kubernetes provider its objects go through; "
              "an arrow that others already imply is left out (also in `graph.mmd`).", "",
              "```mermaid", graph(render).rstrip("\n"), "```", ""]

    counts = Counter(r.type for r in render.resources)
    lines += ["<details><summary>Resources by type</summary>", ""]
    lines += table(["type", "count"], [*((f"`{t}`", n) for t, n in sorted(counts.items())),
                                       ("**total**", sum(counts.values()))])
    lines += ["", "</details>", ""]

    lines += ["## Outputs", "", "Rendered under mocks: ids, digests, addresses and host names are stand-ins of the "
              "shape Azure gives; a real `pulumi up` prints its own.", ""]
    lines += table(["output", "value"], [
        (f"`{key}`", f"`{json.dumps(value, sort_keys=True) if not isinstance(value, str) else value}`")
        for key, value in render.outputs.items()])
    return "\n".join(lines) + "\n"


def _node_id(name: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9]", "_", name)


def graph(render: Render) -> str:
    """Mermaid, top to bottom: one box per top-level component (a nested component folds into it) with how many
    resources it holds; an arrow is a dependency between two of them, through ``dependsOn`` or a resource's
    provider (every Kubernetes object depends on the provider that reaches the cluster)."""
    components = {r.name: r for r in render.resources if not r.custom}

    def top(name: str) -> str | None:
        while name in components and components[name].parent in components:
            name = components[name].parent
        return name if name in components else None

    owner = {r.name: top(r.parent if r.custom else r.name) for r in render.resources}
    held = Counter(owner[r.name] for r in render.resources if r.custom)
    tops = sorted({o for o in owner.values() if o}, key=lambda n: n)
    lines = ["flowchart TB"]
    for name in tops:
        kind = components[name].type.split(":")[-1]
        count = f"{held[name]} resource{'s' if held[name] != 1 else ''}"
        lines.append(f'  {_node_id(name)}["{name}<br/><small>{kind}, {count}</small>"]')
    edges = {(owner[dep], owner[r.name]) for r in render.resources
             for dep in [*r.depends_on, *([r.provider] if r.provider else [])]
             if owner.get(dep) and owner.get(r.name) and owner[dep] != owner[r.name]}
    lines += [f"  {_node_id(a)} --> {_node_id(b)}" for a, b in sorted(transitive_reduction(edges))]
    return "\n".join(lines) + "\n"


def transitive_reduction(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """``edges`` without those another path already implies (a→c when a→b→c): what a reader needs to see."""
    after: dict[str, set[str]] = {}
    for a, b in edges:
        after.setdefault(a, set()).add(b)

    def implied(a: str, b: str) -> bool:
        """Whether b is reachable from a without the edge a→b."""
        seen, todo = set(), [n for n in after.get(a, ()) if n != b]
        while todo:
            node = todo.pop()
            if node == b:
                return True
            if node not in seen:
                seen.add(node)
                todo += after.get(node, ())
        return False

    return {(a, b) for a, b in edges if not implied(a, b)}
