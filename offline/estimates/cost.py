"""Hourly cost of a rendered stack: per pool at idle (min nodes) and at full scale (max nodes), at the VM prices of
the stack's own region (vm_prices.yaml, refreshed from the Retail Prices API; spot at its spot price, or on-demand
minus the table's discount where none is recorded, said so), plus the fixed parts (AKS tier, ACR, load balancer,
public IPs, private endpoints, DNS zones) and the monitoring usage (metrics ingested, Grafana, logs), which grows
with the node count (prices.yaml, a dated table, and its stated assumptions). A pool without a price is "unknown"
in every total, which then reads "at least".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline.estimates import load_table
from program.markdown import table

if TYPE_CHECKING:
    from offline.render import Render
    from program.config.schema import StackConfig

PRICES = Path(__file__).with_name("prices.yaml")
VM_PRICES = Path(__file__).with_name("vm_prices.yaml")


def load_prices(path: Path = PRICES, vm_path: Path = VM_PRICES) -> dict[str, Any]:
    """prices.yaml, with vm_prices.yaml's regions under ``vm_regions``."""
    return {**load_table(path), "vm_regions": load_table(vm_path)["regions"]}


@dataclass(frozen=True)
class NodeHour:
    """What one node-hour of a size costs in a region, as a pool buys it."""

    price: float | None
    """None: the table has no price for the size in the region."""
    assumed: bool = False
    """Spot priced as on-demand minus the assumed discount: the table has no spot price."""


@dataclass(frozen=True)
class PoolCost:
    pool: str
    vm_size: str
    spot: bool
    min_nodes: int
    max_nodes: int
    node_hour: NodeHour
    nap_sizes: tuple[str, ...] = ()
    """A node auto-provisioning pool's sizes: it is priced as the dearest of them, on-demand (its fallback)."""

    @property
    def bought(self) -> str:
        if self.nap_sizes:
            return "NAP: " + ("spot, else on-demand" if self.spot else "on-demand") + " (priced at the dearest)"
        return "spot" if self.spot else "on-demand"

    @property
    def idle(self) -> float | None:
        return None if self.node_hour.price is None else self.node_hour.price * self.min_nodes

    @property
    def full(self) -> float | None:
        return None if self.node_hour.price is None else self.node_hour.price * self.max_nodes


def region_vm_prices(prices: dict[str, Any], location: str) -> dict[str, Any] | None:
    """The stack's own region's VM prices, or None when the table has none for it (never another region's)."""
    return prices["vm_regions"].get(location)


def spot_unsold(cfg: StackConfig, prices: dict[str, Any]) -> list[str]:
    """Spot pools of a size that Azure's price list shows without a spot price (``spot_sold: false``): in the
    stack's region, or, where the table has no spot prices for it there, in every region that lists it. A node
    auto-provisioning pool is left out: it falls back to on-demand by itself."""
    found = []
    for pool in [*cfg.gpu_pools, *cfg.cpu_pools]:
        if not pool.spot or getattr(pool, "nap", False):
            continue
        rows = {r: (table.get("sizes") or {}).get(pool.vm_size) or {} for r, table in prices["vm_regions"].items()}
        here = rows.get(cfg.location, {})
        listed = sorted(r for r, row in rows.items() if "spot_sold" in row or row.get("spot") is not None)
        unsold = [r for r in listed if rows[r].get("spot_sold") is False]
        if here.get("spot_sold") is False or (here.get("spot") is None and listed and unsold == listed):
            where = cfg.location if here.get("spot_sold") is False else ", ".join(unsold)
            found.append(f"pool {pool.name}: {pool.vm_size} as spot, but Azure's price list has no spot price for it "
                         f"in {where} (vm_prices.yaml): Azure may refuse the pool; set priority: regular, or pick a "
                         "size sold as spot (the capacity check asks Resource SKUs)")
    return found


def node_hour(region: dict[str, Any] | None, vm_size: str, spot: bool, discount: float) -> NodeHour:
    row = (region or {}).get("sizes", {}).get(vm_size) or {}
    on_demand, spot_price = row.get("on_demand"), row.get("spot")
    if not spot:
        return NodeHour(on_demand)
    if spot_price is not None:
        return NodeHour(spot_price)
    return NodeHour(None if on_demand is None else on_demand * (1 - discount), assumed=on_demand is not None)


def nap_node_hour(region: dict[str, Any] | None, sizes: tuple[str, ...], discount: float) -> tuple[str, NodeHour]:
    """The size a NAP pool costs most with and its on-demand node-hour: NAP takes on-demand when spot cannot be had,
    and any of its sizes, so the full-scale bound is the dearest one's (unknown when any size has no price)."""
    hours = {size: node_hour(region, size, False, discount) for size in sizes}
    if any(h.price is None for h in hours.values()):
        return next(size for size, h in hours.items() if h.price is None), NodeHour(None)
    dearest = max(sizes, key=lambda size: hours[size].price or 0.0)
    return dearest, hours[dearest]


def pool_cost(pool: Any, spot: bool, region: dict[str, Any] | None, discount: float) -> PoolCost:
    """A pool's node-hour and bounds; a node auto-provisioning pool priced as ``nap_node_hour`` says."""
    if getattr(pool, "nap", False):
        size, hour = nap_node_hour(region, pool.vm_sizes, discount)
        return PoolCost(pool.name, size, spot, pool.min_count, pool.max_count, hour, pool.vm_sizes)
    return PoolCost(pool.name, pool.vm_size, spot, pool.min_count, pool.max_count,
                    node_hour(region, pool.vm_size, spot, discount))


def pool_costs(cfg: StackConfig, prices: dict[str, Any]) -> list[PoolCost]:
    region = region_vm_prices(prices, cfg.location)
    pools = [(cfg.cluster.system_pool, False), *((g, g.spot) for g in cfg.gpu_pools),
             *((p, p.spot) for p in cfg.cpu_pools)]
    return [pool_cost(p, spot, region, prices["spot_discount"]) for p, spot in pools]


INTERNAL_LB = "service.beta.kubernetes.io/azure-load-balancer-internal"


def fixed_costs(render: Render, prices: dict[str, Any]) -> list[tuple[str, float]]:
    """(item, $/h) for what exists whatever the node count."""
    cfg = render.cfg
    fixed = prices["fixed"]
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


@dataclass(frozen=True)
class Scale:
    """How much of the cluster runs: every pool at its minimum (idle) or at its maximum (full)."""

    nodes: int
    gpus: int
    """Physical GPUs: the DCGM exporter reports one set of series per GPU."""


def scales(cfg: StackConfig) -> tuple[Scale, Scale]:
    """(idle, full)."""
    pools = [cfg.cluster.system_pool, *cfg.cpu_pools, *cfg.gpu_pools]
    return (Scale(sum(p.min_count for p in pools), sum(g.min_count * g.size.gpus for g in cfg.gpu_pools)),
            Scale(sum(p.max_count for p in pools), sum(g.max_count * g.size.gpus for g in cfg.gpu_pools)))


def metric_series(prices: dict[str, Any], scale: Scale) -> int:
    assume = prices["assumptions"]
    return scale.nodes * assume["prometheus_series_per_node"] + scale.gpus * assume["dcgm_series_per_gpu"]


def monitoring_costs(cfg: StackConfig, prices: dict[str, Any], scale: Scale) -> list[tuple[str, float]]:
    """(item, $/h) of the monitoring section at ``scale``: usage priced at the table's assumed volumes."""
    monitoring = cfg.monitoring
    if not monitoring.enabled:
        return []
    price = prices["monitoring"]
    assume = prices["assumptions"]
    samples_per_hour = metric_series(prices, scale) * 3600 / assume["prometheus_scrape_seconds"]
    rows = [("managed Prometheus ingestion", samples_per_hour / 1e7 * price["prometheus_per_10m_samples"])]
    if monitoring.grafana:
        users = assume["grafana_active_users"]
        rows.append((f"Managed Grafana Standard (+{users} active users)",
                     price["grafana_standard_instance"] + users * price["grafana_active_user_month"] / HOURS_A_MONTH))
    if monitoring.autoscaler_logs:
        rows.append(("Log Analytics (cluster-autoscaler logs)",
                     assume["autoscaler_log_gb_per_day"] / 24 * price["log_analytics_per_gb"]))
    return rows


HOURS_A_MONTH = 730


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.3f}"


@dataclass(frozen=True)
class Totals:
    idle: float
    """$/h with every pool at its minimum, the unpriced pools left out (``unpriced`` names them)."""
    full: float
    """$/h with every pool at its maximum, likewise."""
    idle_gpu: float
    """The priced GPU pools' share of ``idle``: above zero when a GPU pool keeps nodes at min > 0."""
    unpriced: tuple[str, ...] = ()
    """Pools whose VM size has no price in the stack's region: every total is then a lower bound."""

    @property
    def complete(self) -> bool:
        return not self.unpriced

    def text(self, value: float, digits: int = 3, dollar: str = "$") -> str:
        """A total as every report writes it: ``$1.234``, or ``at least $1.234 + unknown`` when a pool has no price."""
        amount = f"{dollar}{value:,.{digits}f}"
        return amount if self.complete else f"at least {amount} + unknown"


def _totals(cfg: StackConfig, pools: list[PoolCost], fixed: list[tuple[str, float]],
            usage: tuple[list[tuple[str, float]], list[tuple[str, float]]]) -> Totals:
    """``usage``: the monitoring rows at idle and at full scale."""
    fixed_total = sum(v for _, v in fixed)
    idle_usage, full_usage = (sum(v for _, v in rows) for rows in usage)
    # The priced pools: (name, idle, full).
    known = [(p.pool, idle, full) for p in pools if (idle := p.idle) is not None and (full := p.full) is not None]
    gpu_names = {g.name for g in cfg.gpu_pools}
    return Totals(idle=fixed_total + idle_usage + sum(idle for _, idle, _ in known),
                  full=fixed_total + full_usage + sum(full for _, _, full in known),
                  idle_gpu=sum(idle for name, idle, _ in known if name in gpu_names),
                  unpriced=tuple(p.pool for p in pools if p.node_hour.price is None))


def _usage(cfg: StackConfig, prices: dict[str, Any]) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    idle, full = scales(cfg)
    return monitoring_costs(cfg, prices, idle), monitoring_costs(cfg, prices, full)


def totals(render: Render, prices: dict[str, Any]) -> Totals:
    cfg = render.cfg
    return _totals(cfg, pool_costs(cfg, prices), fixed_costs(render, prices), _usage(cfg, prices))


def _monitoring_lines(cfg: StackConfig, prices: dict[str, Any],
                      usage: tuple[list[tuple[str, float]], list[tuple[str, float]]]) -> list[str]:
    """The monitoring table (idle and full scale side by side) and the volumes it assumed."""
    idle_rows, full_rows = usage
    if not idle_rows:
        return []
    assume = prices["assumptions"]
    series = [f"{metric_series(prices, s):,}" for s in scales(cfg)]
    lines = ["", *table(["monitoring (usage, estimated)", "idle", "full scale"],
                        [(item, _money(idle), _money(full))
                         for (item, idle), (_, full) in zip(idle_rows, full_rows, strict=True)])]
    lines += ["", f"Metric series: {series[0]} idle, {series[1]} at full scale. Usage assumes "
                  f"{assume['prometheus_series_per_node']:,} metric series per node and "
                  f"{assume['dcgm_series_per_gpu']} per GPU scraped every {assume['prometheus_scrape_seconds']} s, "
                  f"{assume['autoscaler_log_gb_per_day']} GB of autoscaler logs a day and "
                  f"{assume['grafana_active_users']} Grafana users a month (prices.yaml); "
                  "docs/observability.md says how to measure yours."]
    return lines


def cost_markdown(render: Render, prices: dict[str, Any] | None = None) -> str:
    prices = prices or load_prices()
    cfg = render.cfg
    region = region_vm_prices(prices, cfg.location)
    pools = pool_costs(cfg, prices)
    fixed = fixed_costs(render, prices)
    usage = _usage(cfg, prices)
    total = _totals(cfg, pools, fixed, usage)
    where = (f"VM prices of `{cfg.location}` from vm_prices.yaml ({region['source']}"
             f"{', refreshed ' + str(region['refreshed']) if region.get('refreshed') else ''})" if region else
             f"**vm_prices.yaml has no prices for `{cfg.location}`**: every pool is unknown until `.venv/bin/python -m "
             f"ops catalogue --regions {cfg.location}` runs")
    lines = [
        f"# Stack `{render.stack}`: hourly cost estimate",
        "",
        f"**Estimate, not a quote.** {prices['currency']}; {where}; the other parts from prices.yaml "
        f"({prices['source']}). Spot is priced at its spot price, or at on-demand minus {prices['spot_discount']:.0%} "
        "(marked *assumed*) where the table has none; real spot prices move hourly. Storage, egress and OS disks "
        "(ephemeral on these sizes) are not counted.",
        "",
    ]
    rows = []
    for p in pools:
        on_demand = node_hour(region, p.vm_size, False, prices["spot_discount"])
        spot = node_hour(region, p.vm_size, True, prices["spot_discount"])
        rows.append((p.pool, p.vm_size, _money(on_demand.price),
                     _money(spot.price) + (" *assumed*" if spot.assumed else ""), p.bought,
                     f"{p.min_nodes}–{p.max_nodes}", _money(p.idle), _money(p.full)))
    lines += table(["pool", "VM size", "on-demand node-hour", "spot node-hour", "this pool buys", "min–max nodes",
                    "idle (min)", "full scale (max)"], rows)
    lines += ["", *table(["fixed", "per hour"], [(item, _money(value)) for item, value in fixed])]
    lines += _monitoring_lines(cfg, prices, usage)
    lines += ["", f"**Idle: {total.text(total.idle)}/h (about {total.text(total.idle * 24 * 30, 0)} a month). "
                  f"Full scale: {total.text(total.full)}/h.**"]
    if total.idle_gpu > 0:
        lines += ["", f"Idle GPU cost is above zero ({_money(total.idle_gpu)}/h): a GPU pool keeps nodes at min > 0."]
    lines += [f"\n**Warning:** {warning}." for warning in spot_unsold(cfg, prices)]
    if not total.complete:
        lines += ["", f"No price in `{cfg.location}` for pool(s) {', '.join(total.unpriced)}: the totals are lower "
                      f"bounds. Refresh the prices with `.venv/bin/python -m ops catalogue --regions {cfg.location}` "
                      "(docs/capacity.md)."]
    return "\n".join(lines) + "\n"
