"""Hourly cost of a rendered stack: per pool at idle (min nodes) and at full scale (max nodes), spot
priced as on-demand minus the table's discount, plus the fixed parts (AKS tier, ACR, load balancer,
public IPs, private endpoints, DNS zones) and the monitoring usage (metrics ingested, Grafana, logs), which grows
with the node count. Prices come from prices.yaml, a dated table; usage volumes from its stated assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline.estimates import load_table

if TYPE_CHECKING:
    from aksgpu.config.schema import StackConfig
    from offline.render import Render

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
    pools = [(cfg.cluster.system_pool, False)] + [(g, g.spot) for g in cfg.gpu_pools] + \
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
    price = region_prices(prices, cfg.location)[1]["monitoring"]
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


def _totals(cfg: StackConfig, pools: list[PoolCost], fixed: list[tuple[str, float]],
            usage: tuple[list[tuple[str, float]], list[tuple[str, float]]]) -> Totals:
    """``usage``: the monitoring rows at idle and at full scale."""
    fixed_total = sum(v for _, v in fixed)
    idle_usage, full_usage = (sum(v for _, v in rows) for rows in usage)
    known = [p for p in pools if p.node_hour is not None]
    gpu_names = {g.name for g in cfg.gpu_pools}
    return Totals(idle=fixed_total + idle_usage + sum(p.idle for p in known),
                  full=fixed_total + full_usage + sum(p.full for p in known),
                  idle_gpu=sum(p.idle for p in known if p.pool in gpu_names), complete=len(known) == len(pools))


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
    lines = ["", "| monitoring (usage, estimated) | idle | full scale |", "|---|---|---|"]
    lines += [f"| {item} | {_money(idle)} | {_money(full)} |"
              for (item, idle), (_, full) in zip(idle_rows, full_rows, strict=True)]
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
    region, _ = region_prices(prices, cfg.location)
    pools = pool_costs(cfg, prices)
    fixed = fixed_costs(render, prices)
    usage = _usage(cfg, prices)
    total = _totals(cfg, pools, fixed, usage)
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
    lines += _monitoring_lines(cfg, prices, usage)
    lines += ["", f"**Idle: {_money(total.idle)}/h (about ${total.idle * 24 * 30:,.0f} a month). "
                  f"Full scale: {_money(total.full)}/h.**"]
    if total.idle_gpu > 0:
        lines += ["", f"Idle GPU cost is above zero ({_money(total.idle_gpu)}/h): a GPU pool keeps nodes at min > 0."]
    if not total.complete:
        lines += ["", "Some pools have no price in the table, so the totals leave them out."]
    return "\n".join(lines) + "\n"
