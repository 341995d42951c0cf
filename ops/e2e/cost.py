"""What a run cost, from the price tables the estimates use (offline/estimates: vm_prices.yaml, prices.yaml): each
node's hours at its own size's node-hour in the stack's region (spot at its spot price, or on-demand minus the
table's assumed discount, as cost.md prices it), plus the stack's fixed parts (AKS tier, load balancers, public IPs,
registry, private endpoints and DNS zones: ``fixed_costs``) for the whole run.

A node counts from its Node object's creation (the VM boots a few minutes before it registers: a lower bound) until
the poll that first missed it, or, for a node still there at the last poll, until the destroy finished (or the run
ended, with ``--keep``). Storage, egress, OS disks and monitoring usage are not counted, as in cost.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from offline.estimates.cost import node_hour, region_vm_prices
from ops.e2e.phases import NodeSeen, Observations


def node_hours(obs: Observations, ended: dt.datetime) -> list[tuple[NodeSeen, float]]:
    """Each node seen and the hours it ran."""
    found = []
    for node in obs.nodes.values():
        until = node.last_seen if obs.gone(node) else ended
        found.append((node, max(0.0, (until - node.created).total_seconds()) / 3600))
    return found


def run_cost(obs: Observations, ended: dt.datetime, location: str, prices: Mapping[str, Any],
             fixed: Iterable[tuple[str, float]], hours: float) -> float | None:
    """Dollars, or None when a node's size has no price in ``location``."""
    region = region_vm_prices(dict(prices), location)
    total = sum(per_hour for _, per_hour in fixed) * hours
    for node, ran in node_hours(obs, ended):
        price = node_hour(region, node.vm_size or "", node.spot, prices["spot_discount"]).price
        if price is None:
            return None
        total += price * ran
    return round(total, 4)
