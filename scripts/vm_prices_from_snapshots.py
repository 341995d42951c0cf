"""Write offline/estimates/vm_prices.yaml from dated public snapshots of Azure's Retail Prices API, where
`python -m ops catalogue` (the authoritative refresh, from the API itself) cannot run.

    curl -sSfo pricing.go https://raw.githubusercontent.com/Azure/karpenter-provider-azure/\
2b431da153a6a92b705c18046512c60b1631b682/pkg/providers/pricing/zz_generated.pricing.go
    curl -sSfo vms.csv https://raw.githubusercontent.com/coopslarhette/skypilot-catalog/\
20291d7eda23e6f420cd9586558cf0bc4051851c/catalogs/v8/azure/vms.csv
    .venv/bin/python scripts/vm_prices_from_snapshots.py --on-demand pricing.go --spot vms.csv

- On-demand, every region: the Karpenter provider for Azure (Microsoft's), whose generator
  (hack/code/prices_gen/main.go) asks the Retail Prices API for `priceType eq 'Consumption'`, USD, Virtual Machines,
  per region, drops Windows products and Batch's " Low Priority" meters, and keeps the non-" Spot" meter of each
  size. Generated 2026-06-18T03:43:41Z (the file says so).
- Spot, US regions only: SkyPilot's catalogue (sky/catalog/data_fetchers/fetch_azure.py: the same API, Linux, the
  " Spot" meter of each size); its default fetch covers the US regions only. A spot price equal to the on-demand
  price is left out: SkyPilot's rows for the H100 sizes carry the on-demand price in both columns, which is no
  spot price. The snapshot carries no date of its own.

A size the spot snapshot lists in a region without a spot price is marked `spot_sold: false` there: Azure's price
list does not sell it as spot (the render warns about a spot pool of it). Elsewhere a missing spot price stays
"assumed" (on-demand minus prices.yaml's discount).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.gpu.sizes import GPU_SIZES
from offline.estimates import load_table
from offline.estimates.cost import VM_PRICES
from ops.catalogue import DEFAULT_REGIONS, write_prices

ON_DEMAND = ("github.com/Azure/karpenter-provider-azure@2b431da pkg/providers/pricing/zz_generated.pricing.go "
             "(generated 2026-06-18)")
SPOT = "github.com/coopslarhette/skypilot-catalog@20291d7 catalogs/v8/azure/vms.csv (SkyPilot's catalogue, US regions)"
REFRESHED = "2026-06-18"


def on_demand_prices(go_source: str) -> dict[str, dict[str, float]]:
    """Region → size → hourly price, from the generated Go file's ``initialOnDemandPrices[REGION] = {...}`` maps."""
    prices: dict[str, dict[str, float]] = {}
    for region, body in re.findall(r'initialOnDemandPrices\["(\w+)"\] = map\[string\]float64\{(.*?)\n\t\}', go_source,
                                   flags=re.DOTALL):
        prices[region] = {size: float(price) for size, price in re.findall(r'"([^"]+)":\s+([0-9.]+)', body)}
    return prices


def spot_prices(rows: list[dict[str, str]]) -> dict[str, dict[str, float | None]]:
    """Region → size → hourly spot price, or None where SkyPilot lists the size without one (a "spot" price equal to
    on-demand is none)."""
    prices: dict[str, dict[str, float | None]] = {}
    for row in rows:
        real = row["SpotPrice"] and row["Price"] and float(row["SpotPrice"]) < float(row["Price"])
        prices.setdefault(row["Region"], {})[row["InstanceType"]] = float(row["SpotPrice"]) if real else None
    return prices


def row(region: str, size: str, on_demand: float, spot: dict[str, dict[str, float | None]]) -> dict[str, object]:
    listed = spot.get(region, {})
    if size in listed and listed[size] is None:
        return {"on_demand": on_demand, "spot": None, "spot_sold": False}
    return {"on_demand": on_demand, "spot": listed.get(size)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--on-demand", type=Path, required=True, help="Karpenter's zz_generated.pricing.go")
    parser.add_argument("--spot", type=Path, required=True, help="SkyPilot's catalogs/v8/azure/vms.csv")
    args = parser.parse_args()
    on_demand = on_demand_prices(args.on_demand.read_text())
    with args.spot.open() as f:
        spot = spot_prices(list(csv.DictReader(f)))
    current = load_table(VM_PRICES)["regions"]
    sizes = sorted(set(GPU_SIZES) | {s for r in current.values() for s in r["sizes"]})
    written = 0
    for listed in (True, False):
        regions = {region: {s: row(region, s, price, spot) for s, price in on_demand.get(region, {}).items()
                            if s in sizes}
                   for region in DEFAULT_REGIONS if (region in spot) == listed}
        source = (f"Azure Retail Prices API (Linux pay-as-you-go) from public snapshots: on-demand {ON_DEMAND}; "
                  + (f"spot {SPOT}" if listed else "no spot prices (no snapshot of this region's spot meters)"))
        write_prices(regions, source, REFRESHED)
        written += len(regions)
    print(f"wrote {VM_PRICES.name}: {written} regions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
