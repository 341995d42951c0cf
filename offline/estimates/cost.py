"""Hourly cost of a rendered stack: per pool at idle (min nodes) and at full scale (max nodes), spot
priced as on-demand minus the table's discount, plus the fixed parts (AKS tier, ACR, load balancer,
public IPs, private endpoints, DNS zones). Prices come from prices.yaml, a dated table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline.estimates import load_table

if TYPE_CHECKING:
    from offline.render import Render
    from stackconfig.schema import StackConfig

PRICES = Path(__file__).with_name("prices.yaml")


def load_prices(path: Path = PRICES) -> dict[str, Any]:
    return load_table(path)


@dataclass(frozen=True)
class PoolCost:
    pool: str
    vm_size: str
    spot: bool
    min_nodes: int
    max_nodes: int
    node_hour: float | None
    """Price of one node-hour as this pool buys it (spot discounted), None when the table has no price."""

    @property
    def idle(self) -> float | None:
        return None if self.node_hour is None else self.node_hour * self.min_nodes

    @property
    def full(self) -> float | None:
        return None if self.node_hour is None else self.node_hour * self.max_nodes


def region_prices(prices: dict[str, Any], location: str) -> tuple[str, dict[str, Any]]:
    """The table's region for ``location``: itself when the table has it, else the first region listed."""
    regions = prices["regions"]
    region = location if location in regions else next(iter(regions))
    return region, regions[region]


def node_hour(table: dict[str, Any], vm_size: str, spot: bool, discount: float) -> float | None:
    on_demand = table["vm"].get(vm_size)
    if on_demand is None:
        return None
    return on_demand * (1 - discount) if spot else on_demand


def pool_costs(cfg: StackConfig, prices: dict[str, Any]) -> list[PoolCost]:
    _, table = region_prices(prices, cfg.location)
    pools = [(cfg.cluster.system_pool, False)] + [(g.pool, g.pool.spot) for g in cfg.gpu_pools] + \
        [(p, p.spot) for p in cfg.cpu_pools]
    return [PoolCost(p.name, p.vm_size, spot, p.min_count, p.max_count,
                     node_hour(table, p.vm_size, spot, prices["spot_discount"])) for p, spot in pools]


INTERNAL_LB = "service.beta.kubernetes.io/azure-load-balancer-internal"


def fixed_costs(render: Render, prices: dict[str, Any]) -> list[tuple[str, float]]:
    """(item, $/h) for what exists whatever the node count."""
    cfg = render.cfg
    fixed = region_prices(prices, cfg.location)[1]["fixed"]
    rows = [(f"AKS {cfg.cluster.sku_tier} tier", fixed["aks_tier"][cfg.cluster.sku_tier]),
            ("Standard load balancer (cluster outbound)", fixed["load_balancer"])]
    lb_services = [s.inputs for s in render.of_type("kubernetes:core/v1:Service")
                   if s.inputs.get("spec", {}).get("type") == "LoadBalancer"]
    internal = [s for s in lb_services if INTERNAL_LB in (s["metadata"].get("annotations") or {})]
    if internal:
        # AKS puts internal Services on a second load balancer (kubernetes-internal), billed like the first.
        rows.append(("Standard load balancer (internal Services)", fixed["load_balancer"]))
    # The cluster's outbound IP (private clusters egress through it too) and one per public Service.
    public_ips = 1 + len(lb_services) - len(internal)
    rows.append((f"public IPs × {public_ips}", fixed["public_ip"] * public_ips))
    if cfg.registry.enabled:
        rows.append((f"ACR {cfg.registry.sku}", fixed["acr_sku"][cfg.registry.sku]))
    endpoints = len(render.of_type("azure-native:network:PrivateEndpoint"))
    if endpoints:
        rows.append((f"private endpoints × {endpoints}", fixed["private_endpoint"] * endpoints))
    zones = len(render.of_type("azure-native:privatedns:PrivateZone"))
    if zones:
        rows.append((f"private DNS zones × {zones}", fixed["private_dns_zone"] * zones))
    return rows


def _money(value: float | None) -> str:
    return "no price in table" if value is None else f"${value:,.3f}"


@dataclass(frozen=True)
class Totals:
    idle: float
    """$/h with every pool at its minimum: what the stack costs while nobody uses it."""
    full: float
    """$/h with every pool at its maximum."""
    idle_gpu: float
    """The GPU pools' share of ``idle``: above zero when a GPU pool keeps nodes at min > 0."""
    complete: bool
    """Every pool's size had a price."""


def _totals(cfg: StackConfig, pools: list[PoolCost], fixed: list[tuple[str, float]]) -> Totals:
    fixed_total = sum(v for _, v in fixed)
    known = [p for p in pools if p.node_hour is not None]
    gpu_names = {g.name for g in cfg.gpu_pools}
    return Totals(idle=fixed_total + sum(p.idle for p in known), full=fixed_total + sum(p.full for p in known),
                  idle_gpu=sum(p.idle for p in known if p.pool in gpu_names), complete=len(known) == len(pools))


def totals(render: Render, prices: dict[str, Any]) -> Totals:
    return _totals(render.cfg, pool_costs(render.cfg, prices), fixed_costs(render, prices))


def cost_markdown(render: Render, prices: dict[str, Any] | None = None) -> str:
    prices = prices or load_prices()
    cfg = render.cfg
    region, _ = region_prices(prices, cfg.location)
    pools = pool_costs(cfg, prices)
    fixed = fixed_costs(render, prices)
    total = _totals(cfg, pools, fixed)
    lines = [
        f"# Stack `{render.stack}`: hourly cost estimate",
        "",
        f"**Estimate, not a quote.** {prices['source']}, {prices['currency']}, region "
        f"`{region}`" + ("" if region == cfg.location else f" (the table has no prices for `{cfg.location}`)") +
        f". Spot is priced at on-demand minus {prices['spot_discount']:.0%}; real spot prices move hourly. "
        "Storage, egress and OS disks (ephemeral on these sizes) are not counted.",
        "",
        "| pool | VM size | on-demand node-hour | spot node-hour | this pool buys | min–max nodes | idle (min) "
        "| full scale (max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    table = region_prices(prices, cfg.location)[1]
    for p in pools:
        on_demand = node_hour(table, p.vm_size, False, prices["spot_discount"])
        spot = node_hour(table, p.vm_size, True, prices["spot_discount"])
        lines.append(f"| {p.pool} | {p.vm_size} | {_money(on_demand)} | {_money(spot)} | "
                     f"{'spot' if p.spot else 'on-demand'} | {p.min_nodes}–{p.max_nodes} | {_money(p.idle)} | "
                     f"{_money(p.full)} |")
    lines += ["", "| fixed | per hour |", "|---|---|"]
    lines += [f"| {item} | {_money(value)} |" for item, value in fixed]
    lines += ["", f"**Idle: {_money(total.idle)}/h (about ${total.idle * 24 * 30:,.0f} a month). "
                  f"Full scale: {_money(total.full)}/h.**"]
    if total.idle_gpu > 0:
        lines += ["", f"Idle GPU cost is above zero ({_money(total.idle_gpu)}/h): a GPU pool keeps nodes at min > 0."]
    if not total.complete:
        lines += ["", "Some pools have no price in the table, so the totals leave them out."]
    return "\n".join(lines) + "\n"
