"""Refresh the GPU catalogue and the VM prices from Azure's APIs (``python -m offline catalogue``).

- ``aksgpu/config/gpu_catalogue.yaml``: every N-series size Resource SKUs lists for the subscription, in every region,
  whose family ``gpu_sizes.FAMILIES`` knows (a new family is reported, to be added there with its GPU), fractional
  sizes left out; each with its quota family, vCPUs, memory, GPU count, whether it can run as spot, and the zones
  of each region that offers it. Rows marked ``source: manual`` that Azure did not list are kept.
- ``offline/estimates/vm_prices.yaml``: for each region asked, the Linux pay-as-you-go and spot hourly price of every
  catalogue size and every size a stack file uses (Retail Prices API; no sign-in). Regions not asked keep theirs.

Both files say when and how they were made. The render and the tests only read them: nothing offline reaches Azure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from aksgpu.config.gpu_sizes import CATALOGUE, FAMILIES, FRACTIONAL_SIZES
from offline.azure_reads import Sku

PRICES = Path(__file__).parent / "estimates" / "vm_prices.yaml"
DEFAULT_REGIONS = ("eastus", "eastus2", "southcentralus", "westus2", "westus3", "northeurope", "westeurope",
                   "swedencentral", "uksouth", "japaneast", "australiaeast")
"""Regions whose prices a refresh fetches besides the stack files' own: where the GPU sizes are mostly offered."""

CATALOGUE_HEADER = """\
# The GPU VM sizes AKS GPU pools may use: what Azure's Resource SKUs API says of each (quota family, vCPUs, memory,
# GPU count, spot, and the zones of each region that offers it). The GPU of each family is in gpu_sizes.py FAMILIES.
#
# Written by `python -m offline catalogue` (needs `az login`; docs/capacity.md): it rewrites `sizes` from Resource
# SKUs, keeps rows marked `source: manual` that Azure did not list, and stamps `refreshed`. To use a size before the
# next refresh, add a row with `source: manual` (its family must be in FAMILIES).
"""
PRICES_HEADER = """\
# Hourly Linux VM prices for the cost estimate (cost.md), per region: pay-as-you-go and spot, in USD. An ESTIMATE,
# not a quote. Written by `python -m offline catalogue` from the Azure Retail Prices API
# (https://prices.azure.com/api/retail/prices, no sign-in); each region says when and from where. A size or region
# missing here shows as "unknown" in every total: refresh with `python -m offline catalogue --regions REGION`.
"""


def gpu_rows(skus: Mapping[str, Sku]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(catalogue rows of the GPU sizes whose family is known, the GPU families no FAMILIES entry describes)."""
    rows, unknown = {}, set()
    for name, sku in sorted(skus.items()):
        if not sku.gpus or name in FRACTIONAL_SIZES:
            continue
        if sku.family not in FAMILIES:
            unknown.add(sku.family)
            continue
        rows[name] = {"family": sku.family, "vcpus": sku.vcpus, "memory_gib": sku.memory_gib, "gpus": sku.gpus,
                      "spot": sku.spot_capable, "regions": {r: list(z) for r, z in sorted(sku.zones.items())}}
    return rows, sorted(unknown)


def write_catalogue(rows: Mapping[str, Mapping[str, Any]], source: str, refreshed: str | None,
                    path: Path = CATALOGUE) -> None:
    """The catalogue file: ``rows``, plus the manual rows of the current file that ``rows`` lacks."""
    current = yaml.safe_load(path.read_text())["sizes"] if path.exists() else {}
    manual = {n: r for n, r in current.items() if r.get("source") == "manual" and n not in rows}
    data = {"refreshed": refreshed, "source": source, "sizes": dict(sorted({**rows, **manual}.items()))}
    path.write_text(CATALOGUE_HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))


def hourly_prices(items: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Size → {on_demand, spot} from Retail Prices items: Linux (no ``Windows`` product), hourly, the newest price
    of each meter; low-priority meters (Batch's) are not spot."""
    newest: dict[tuple[str, str], tuple[str, float]] = {}
    for item in items:
        if item.get("type") != "Consumption" or "Windows" in item.get("productName", "") or \
                item.get("unitOfMeasure") != "1 Hour" or item.get("skuName", "").endswith("Low Priority"):
            continue
        kind = "spot" if item["skuName"].endswith(" Spot") else "on_demand"
        key, start = (item["armSkuName"], kind), item.get("effectiveStartDate", "")
        if key not in newest or start > newest[key][0]:
            newest[key] = (start, float(item["retailPrice"]))
    sizes = sorted({size for size, _ in newest})
    return {s: {k: newest[(s, k)][1] if (s, k) in newest else None for k in ("on_demand", "spot")} for s in sizes}


def write_prices(regions: Mapping[str, Mapping[str, Mapping[str, float | None]]], source: str,
                 refreshed: str | None, path: Path = PRICES) -> None:
    """The prices file with ``regions`` replaced (each stamped) and the others kept."""
    data = yaml.safe_load(path.read_text()) if path.exists() else {"currency": "USD", "regions": {}}
    for region, sizes in regions.items():
        data["regions"][region] = {"refreshed": refreshed, "source": source, "sizes": dict(sorted(sizes.items()))}
    data["regions"] = dict(sorted(data["regions"].items()))
    path.write_text(PRICES_HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))


def refresh(subscription: str, regions: Iterable[str], sizes_in_stacks: Iterable[str], prices: bool = True,
            transport: Any = None, credential: Any = None, today: dt.date | None = None,
            catalogue_path: Path = CATALOGUE, prices_path: Path = PRICES) -> list[str]:
    """Rewrite both files from Azure; returns what the caller should know (new families, regions without prices)."""
    from offline.azure_reads import Azure, retail_prices
    day = (today or dt.date.today()).isoformat()
    skus = Azure(subscription, credential, transport).vm_skus()
    rows, unknown = gpu_rows(skus)
    write_catalogue(rows, f"Resource SKUs API (azure-mgmt-compute), every region, on {day}", day, catalogue_path)
    notes = [f"GPU family {f} has no entry in gpu_sizes.FAMILIES: add its GPU there to use its sizes"
             for f in unknown]
    if prices:
        wanted = sorted(set(rows) | set(sizes_in_stacks))
        found = {}
        for region in regions:
            found[region] = {s: p for s, p in hourly_prices(retail_prices(region, wanted, transport)).items()}
            if missing := [s for s in wanted if s not in found[region]]:
                notes.append(f"{region}: no price for {', '.join(missing)} (not sold there, or not yet)")
        write_prices(found, f"Azure Retail Prices API, Linux pay-as-you-go and spot, on {day}", day, prices_path)
    return notes
