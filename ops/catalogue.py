"""Refresh the GPU catalogue and the VM prices from Azure's APIs (``python -m ops catalogue``).

- ``components/gpu/catalogue.yaml``: every N-series size Resource SKUs lists for the subscription, in every region,
  whose family ``FAMILIES`` in ``components/gpu/sizes.py`` knows (a new family is reported, to be added there with
  its GPU), fractional sizes left out; each with its quota family, vCPUs, memory, GPU count, whether it can run as
  spot, and the zones of each region that offers it. Rows marked ``source: manual`` that Azure did not list are kept.
- ``components/azure/regions.yaml``: Azure's regions as the subscription's List Locations names them (the physical
  ones), which a stack's ``location`` is checked against.
- ``offline/estimates/vm_prices.yaml``: for each region asked, the Linux pay-as-you-go and spot hourly price of every
  catalogue size and every size a stack file uses (Retail Prices API; no sign-in). Regions not asked keep theirs.

Both files say when and how they were made. The render and the tests only read them: nothing offline reaches Azure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from components.azure.regions import REGIONS, physical_regions, write_regions
from components.gpu.sizes import CATALOGUE, FAMILIES, FRACTIONAL_SIZES
from offline.cli import error
from offline.estimates.cost import VM_PRICES
from offline.stack_files import stack_files, stack_namespace
from ops.azure_reads import NEEDS_SUBSCRIPTION, Sku, subscription

PRICES = VM_PRICES
DEFAULT_REGIONS = ("eastus", "eastus2", "southcentralus", "westus2", "westus3", "northeurope", "westeurope",
                   "swedencentral", "uksouth", "japaneast", "australiaeast")
"""Regions whose prices a refresh fetches besides the stack files' own: where the GPU sizes are mostly offered."""

CATALOGUE_HEADER = """\
# The GPU VM sizes AKS GPU pools may use: what Azure's Resource SKUs API says of each (quota family, vCPUs, memory,
# GPU count, spot, and the zones of each region that offers it). The GPU of each family is in FAMILIES,
# components/gpu/sizes.py.
#
# Written by `python -m ops catalogue` (needs `az login`; docs/capacity.md): it rewrites `sizes` from Resource
# SKUs, keeps rows marked `source: manual` that Azure did not list, and stamps `refreshed`. To use a size before the
# next refresh, add a row with `source: manual` (its family must be in FAMILIES).
"""
PRICES_HEADER = """\
# Hourly Linux VM prices for the cost estimate (cost.md), per region: pay-as-you-go and spot, in USD. An ESTIMATE,
# not a quote. Written by `python -m ops catalogue` from the Azure Retail Prices API
# (https://prices.azure.com/api/retail/prices, no sign-in), or where that cannot run by
# scripts/vm_prices_from_snapshots.py from dated public snapshots of it; each region says when and from where.
# `spot_sold: false`: the source lists the size in the region without a spot price (Azure does not sell it as spot
# there). A size or region missing here shows as "unknown" in every total: refresh with
# `python -m ops catalogue --regions REGION`.
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
    data: dict[str, Any] = (yaml.safe_load(path.read_text()) if path.exists()
                            else {"currency": "USD", "regions": {}})
    for region, sizes in regions.items():
        data["regions"][region] = {"refreshed": refreshed, "source": source, "sizes": dict(sorted(sizes.items()))}
    data["regions"] = dict(sorted(data["regions"].items()))
    path.write_text(PRICES_HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))


def refresh(subscription: str, regions: Iterable[str], sizes_in_stacks: Iterable[str], prices: bool = True,
            transport: Any = None, credential: Any = None, today: dt.date | None = None,
            catalogue_path: Path = CATALOGUE, prices_path: Path = PRICES, regions_path: Path = REGIONS) -> list[str]:
    """Rewrite the files from Azure; returns what the caller should know (new families, regions without prices)."""
    from ops.azure_reads import LOCATIONS_API, Azure, retail_prices
    day = (today or dt.date.today()).isoformat()
    azure = Azure(subscription, credential, transport)
    write_regions(physical_regions(azure.locations()), f"Subscriptions - List Locations (api-version "
                  f"{LOCATIONS_API}) of the subscription the refresh signed in to, on {day}", day, regions_path)
    skus = azure.vm_skus()
    rows, unknown = gpu_rows(skus)
    write_catalogue(rows, f"Resource SKUs API (azure-mgmt-compute), every region, on {day}", day, catalogue_path)
    notes = [f"GPU family {f} has no entry in components.gpu.sizes FAMILIES: add its GPU there to use its sizes"
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


def catalogue_command(args: argparse.Namespace) -> int:
    if not (subscription_id := subscription(args.subscription)):
        return error(NEEDS_SUBSCRIPTION)
    # Raw stack files, not configs: a stack that names a size the catalogue lacks must not stop the refresh.
    raw = [stack_namespace(path) for path in stack_files().values()]
    regions = args.regions.split(",") if args.regions else sorted(
        {r.get("location", "eastus") for r in raw} | set(DEFAULT_REGIONS))
    sizes = {p.get("vmSize") for r in raw
             for p in [*(r.get("gpuPools") or []), *(r.get("cpuPools") or []),
                       (r.get("cluster") or {}).get("systemPool") or {}]} - {None}
    sizes |= {"Standard_D4ds_v5"}  # the system and CPU pools' default size
    notes = refresh(subscription_id, regions, sizes, prices=not args.no_prices)
    if args.json:
        print(json.dumps({"catalogue": CATALOGUE.name, "prices": None if args.no_prices else PRICES.name,
                          "regions": [] if args.no_prices else regions, "notes": notes}))
        return 0
    for note in notes:
        print(note)
    print(f"wrote {REGIONS.name}, {CATALOGUE.name}" +
          ("" if args.no_prices else f" and {PRICES.name} ({len(regions)} regions)")
          + "; review the diff, run the tests, commit")
    return 0
