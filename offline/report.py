"""Files an offline render writes per stack: resources.json, manifests/, patches/, helm/, summary.md, graph.mmd."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from components.gpu.sizes import FAMILIES, GPU_SIZES
from offline import urns
from offline.estimates.cost import Totals, cost_markdown, load_prices, spot_unsold, totals
from offline.estimates.timeline import plan, timeline_markdown, total_seconds
from offline.render import Render, Resource
from program.markdown import table

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
AGENT_POOL = "azure-native:containerservice:AgentPool"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.azure.com/v1beta1:AKSNodeClass"
"""A node auto-provisioning pool: no AgentPool, NAP's Karpenter makes its nodes."""


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


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's emitter: the same documents as PyYAML's own (tests/test_render.py reads them back), in a seventh of the
time; its long strings fold at a space instead of escaping it."""


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, default_flow_style=False, width=120)


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
    # A node auto-provisioning pool has no AgentPool: its row comes from config, its NodePool and AKSNodeClass.
    nap = {(r.inputs["spec"]["template"]["spec"].get("nodeClassRef") or {}).get("name"): r.inputs["spec"]["template"]
           for r in render.of_type(NODE_POOL)}
    node_class = {(r.inputs.get("metadata") or {}).get("name"): r.inputs["spec"] for r in render.of_type(NODE_CLASS)}
    pools += [{"name": g.name, "mode": "NAP", "vmSize": ", ".join(g.vm_sizes), "spot": g.spot, "minCount": g.min_count,
               "maxCount": g.max_count,
               "gpuProfile": {"driver": "Install" if node_class.get(g.name, {}).get("gpu", {}).get("mode") == "Driver"
                              else "None"},
               "nodeTaints": [f"{t['key']}={t.get('value', '')}:{t['effect']}"
                              for t in nap.get(g.name, {}).get("spec", {}).get("taints", [])]}
              for g in cfg.gpu_pools if g.nap]
    # Config order (system pool, GPU pools, CPU pools), as cost.md lists them.
    order = [cfg.cluster.system_pool.name, *gpu_cfg, *(c.name for c in cfg.cpu_pools)]
    for p in sorted(pools, key=lambda p: order.index(p["name"]) if p["name"] in order else len(order)):
        g = gpu_cfg.get(p["name"])
        size = g.size if g else GPU_SIZES.get(p["vmSize"])
        # A pool without the autoscaler (the system pool's fixed count) has no min or max: it is count–count.
        scaled = p.get("enableAutoScaling", True)
        rows.append({
            "name": p["name"], "mode": p.get("mode"), "vmSize": p["vmSize"],
            "gpu": f"{size.gpu_model} × {size.gpus}" if size else "-",
            "spot": p["spot"] if "spot" in p else p.get("scaleSetPriority") == "Spot",
            "min": p.get("minCount") if scaled else p.get("count"),
            "max": p.get("maxCount") if scaled else p.get("count"),
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


GPU_MODELS = {f.gpu_model.split()[0].lower() for f in FAMILIES.values()}
"""The GPU models a pool's name may carry (``t4``, ``a10``, ``a100``, ``h100``, ``h200``)."""


def misnamed_pools(cfg: Any) -> list[str]:
    """GPU pools named for another GPU than their size has (a pool `t4` whose size became an A10)."""
    found = []
    for g in cfg.gpu_pools:
        model = g.size.gpu_model.split()[0].lower()
        named = [t for t in re.findall(r"[a-z]+\d+", g.name.lower()) if t in GPU_MODELS and t != model]
        if named:
            found.append(f"pool {g.name} is named for the {named[0].upper()}, but {g.vm_size} carries the "
                         f"{g.size.gpu_model}: rename it with the size, since the size change replaces the pool anyway")
    return found


def warnings(render: Render, prices: dict[str, Any] | None = None) -> list[str]:
    """What the render holds that is valid config but likely a mistake: misnamed pools, spot where Azure sells none.
    The render command prints them; summary.md lists them first."""
    return misnamed_pools(render.cfg) + spot_unsold(render.cfg, prices or load_prices())


def summary(render: Render, cost: Totals, up_minutes: float) -> str:
    cfg = render.cfg
    lines = [f"# Stack `{render.stack}`: scenario `{cfg.scenario}`", "",
             f"Region `{cfg.location}`, naming root `{cfg.naming.root}`, environment `{cfg.environment}`, "
             f"owner `{cfg.owner}`.", ""]
    for warning in warnings(render):
        lines += [f"**Warning:** {warning}.", ""]
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
                   [(row["name"], row["mode"], row["vmSize"], row["gpu"],
                     ("spot first" if row["mode"] == "NAP" else "yes") if row["spot"] else "no",
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
              "Each box is a component and how many resources it holds (a GPU pool's also its size, nodes and "
              "node-hour price, as cost.md), grouped as Azure, the cluster software and the workloads. An arrow "
              "points from what a component waits for to the component: a resource it depends on, or the Kubernetes "
              "provider its objects go through; an arrow that others already imply is left out (also in "
              "`graph.mmd`).", "",
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


GROUPS = {"azure": "Azure", "cluster": "Cluster software", "workloads": "Workloads"}
"""The architecture graph's boxes around components: what Azure runs, what runs on the cluster for every workload,
and the scenario's own workloads."""
WORKLOAD_AREAS = ("workloads", "training", "identity")
WORKLOAD_TYPES = ("Workspace", "BlobVolume")
AZURE_SIDE = ("azure-native:", "command:", "docker")
"""Resources Azure holds, or that build into it (an ACR build, a local image build pushed to the registry)."""


def group_of(component: Resource, held: list[Resource]) -> str:
    """Which GROUPS box a top-level component sits in: by its area (``aksgpu:AREA:Type``), else by what it holds."""
    kind = component.type.split(":")
    if kind[1] in WORKLOAD_AREAS or kind[-1] in WORKLOAD_TYPES:
        return "workloads"
    azure = sum(1 for r in held if r.type.startswith(AZURE_SIDE))
    return "azure" if held and azure * 2 >= len(held) else "cluster"


def pool_labels(render: Render) -> dict[str, str]:
    """Pool name → the line a GPU pool's box adds: size, nodes, and the node-hour it buys (cost.md's price)."""
    from offline.estimates.cost import pool_costs
    costs = {p.pool: p for p in pool_costs(render.cfg, load_prices())}
    labels = {}
    for g in render.cfg.gpu_pools:
        c = costs[g.name]
        price = "price unknown" if c.node_hour.price is None else f"${c.node_hour.price:,.3f}/node-h"
        size = f"{len(g.vm_sizes)} sizes" if g.nap else g.vm_size.removeprefix("Standard_")
        labels[g.name] = f"{size}, {g.min_count}–{g.max_count}{' spot' if g.spot else ''}, {price}"
    return labels


def _pool_of(name: str, held: list[Resource]) -> str | None:
    """The config pool a GPU pool component makes: its AgentPool's name, or its NodePool's node class."""
    for r in held:
        if r.type == AGENT_POOL:
            return r.inputs.get("agentPoolName")
        if r.type == NODE_POOL:
            return (r.inputs["spec"]["template"]["spec"].get("nodeClassRef") or {}).get("name")
    return None


def graph(render: Render) -> str:
    """Mermaid, top to bottom: one box per top-level component (a nested component folds into it) with how many
    resources it holds, a GPU pool's box with its size, nodes and node-hour price, each in its group (Azure, cluster
    software, workloads); an arrow is a dependency between two of them, through ``dependsOn`` or a resource's
    provider (every Kubernetes object depends on the provider that reaches the cluster)."""
    components = {r.name: r for r in render.resources if not r.custom}

    def top(name: str | None) -> str | None:
        while name is not None and name in components and components[name].parent in components:
            name = components[name].parent
        return name if name is not None and name in components else None

    owner = {r.name: top(r.parent if r.custom else r.name) for r in render.resources}
    holds: dict[str, list[Resource]] = {}
    for r in render.resources:
        if r.custom and (held_by := owner[r.name]):
            holds.setdefault(held_by, []).append(r)
    tops = sorted({o for o in owner.values() if o}, key=lambda n: n)
    pools = pool_labels(render)
    boxes: dict[str, list[str]] = {g: [] for g in GROUPS}
    for name in tops:
        kind = components[name].type.split(":")[-1]
        held = holds.get(name, [])
        count = f"{len(held)} resource{'s' if len(held) != 1 else ''}"
        pool = pools.get(_pool_of(name, held) or "")
        detail = f"<br/><small>{pool}</small>" if pool else ""
        boxes[group_of(components[name], held)].append(
            f'  {_node_id(name)}["{name}<br/><small>{kind}, {count}</small>{detail}"]')
    lines = ["flowchart TB"]
    for group, title in GROUPS.items():
        if boxes[group]:
            lines += [f'  subgraph g_{group}["{title}"]', *boxes[group], "  end"]
    edges = {(before, after) for r in render.resources
             for dep in [*r.depends_on, *([r.provider] if r.provider else [])]
             if (before := owner.get(dep)) and (after := owner.get(r.name)) and before != after}
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
