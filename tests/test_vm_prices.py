"""VM prices for the regions and sizes people pick (Why #6, newcomer #14, #15): every catalogue GPU size priced in
the regions a team deciding where to run picks, from dated snapshots of Azure's Retail Prices API with their source,
real spot prices where a snapshot has them; a spot pool of a size Azure's price list does not sell as spot, and a
pool named for another GPU than its size's, are flagged offline."""

from __future__ import annotations

import importlib.util

import pytest

from components.gpu.sizes import GPU_SIZES
from offline.estimates import cost
from offline.report import misnamed_pools
from offline.stack_files import REPO_ROOT
from tests.helpers import load

REGIONS = ("eastus", "eastus2", "westus2", "westus3", "southcentralus", "westeurope", "swedencentral", "uksouth",
           "japaneast")
"""The regions issue 36 names: where GPU pools are mostly run."""
US = REGIONS[:5]
PRICES = cost.load_prices()


def _script():
    spec = importlib.util.spec_from_file_location("snapshots", REPO_ROOT / "scripts" / "vm_prices_from_snapshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("region", REGIONS)
def test_each_region_prices_the_gpu_sizes_and_says_when_and_from_where(region):
    table = PRICES["vm_regions"][region]
    assert table["refreshed"] and "github.com/Azure/karpenter-provider-azure@2b431da" in table["source"]
    priced = {s for s, row in table["sizes"].items() if row["on_demand"]}
    # T4, A100 (NC), H100 NVL and A10 are sold in every one of these regions.
    assert {"Standard_NC4as_T4_v3", "Standard_NC24ads_A100_v4", "Standard_NC40ads_H100_v5",
            "Standard_NV36ads_A10_v5", "Standard_D4ds_v5"} <= priced


def test_every_catalogue_size_including_h200_and_nd96amsr_a100_has_a_price_in_one_of_the_regions():
    for size in GPU_SIZES:
        assert any((PRICES["vm_regions"][r]["sizes"].get(size) or {}).get("on_demand") for r in REGIONS), size
    assert PRICES["vm_regions"]["eastus2"]["sizes"]["Standard_ND96isr_H200_v5"]["on_demand"] == 84.8
    assert PRICES["vm_regions"]["westeurope"]["sizes"]["Standard_ND96amsr_A100_v4"]["on_demand"] == 40.962


@pytest.mark.parametrize("region", US)
def test_us_regions_have_real_spot_prices_below_on_demand(region):
    sizes = PRICES["vm_regions"][region]["sizes"]
    for size in ("Standard_NC4as_T4_v3", "Standard_NC24ads_A100_v4", "Standard_NV36ads_A10_v5"):
        assert 0 < sizes[size]["spot"] < sizes[size]["on_demand"], (region, size)


def test_the_snapshot_script_reads_both_sources_and_a_spot_price_equal_to_on_demand_is_none():
    script = _script()
    go = ('\tinitialOnDemandPrices["eastus"] = map[string]float64{\n\t\t"Standard_NC4as_T4_v3": 0.526000,\n'
          '\t\t"Standard_ND96isr_H100_v5": 98.320000,\n\t}\n')
    assert script.on_demand_prices(go) == {"eastus": {"Standard_NC4as_T4_v3": 0.526,
                                                      "Standard_ND96isr_H100_v5": 98.32}}
    spot = script.spot_prices([
        {"InstanceType": "Standard_NC4as_T4_v3", "Price": "0.526", "SpotPrice": "0.062699", "Region": "eastus"},
        {"InstanceType": "Standard_ND96isr_H100_v5", "Price": "98.32", "SpotPrice": "98.32", "Region": "eastus"}])
    assert script.row("eastus", "Standard_NC4as_T4_v3", 0.526, spot) == {"on_demand": 0.526, "spot": 0.062699}
    assert script.row("eastus", "Standard_ND96isr_H100_v5", 98.32, spot)["spot_sold"] is False
    assert script.row("eastus", "Standard_D4ds_v5", 0.226, spot) == {"on_demand": 0.226, "spot": None}


def _pool(size: str, name: str = "gpu", **more) -> dict:
    return {"name": name, "vmSize": size, "minCount": 0, "maxCount": 1, **more}


@pytest.mark.parametrize("location", ["eastus", "westeurope"])
def test_a_spot_nd96_h100_pool_is_flagged_where_its_region_or_every_listing_region_sells_no_spot(location):
    """Newcomer #14: a spot ND96isr_H100_v5 rendered with an assumed spot price; westeurope has no spot snapshot,
    so the regions that list the size decide."""
    cfg = load({"location": location, "gpuPools": [_pool("Standard_ND96isr_H100_v5", "h100")]})
    (warning,) = cost.spot_unsold(cfg, PRICES)
    assert warning.startswith("pool h100: Standard_ND96isr_H100_v5 as spot, but Azure's price list has no spot price")
    assert "set priority: regular" in warning


def test_a_spot_t4_a_regular_h100_and_a_nap_pool_are_not_flagged():
    cfg = load({"gpuPools": [_pool("Standard_NC4as_T4_v3", "t4"),
                             _pool("Standard_ND96isr_H100_v5", "h100", priority="regular")]})
    assert cost.spot_unsold(cfg, PRICES) == []


def test_a_pool_named_for_another_gpu_than_its_size_is_flagged():
    """Newcomer #15: dev's pool `t4` kept its name when its size became an A10."""
    cfg = load({"gpuPools": [_pool("Standard_NV36ads_A10_v5", "t4"), _pool("Standard_NC24ads_A100_v4", "a100spot"),
                             _pool("Standard_NC4as_T4_v3", "gpu")]})
    assert misnamed_pools(cfg) == ["pool t4 is named for the T4, but Standard_NV36ads_A10_v5 carries the A10: rename "
                                   "it with the size, since the size change replaces the pool anyway"]


def test_cost_md_prices_the_h200_in_a_region_that_sells_it():
    from tests.helpers import render_with
    render = render_with(scenario="gpu-basics", location="eastus2",
                         gpuPools=[_pool("Standard_ND96isr_H200_v5", "h200", priority="regular")])
    text = cost.cost_markdown(render)
    assert "| h200 | Standard_ND96isr_H200_v5 | $84.800 |" in text and "unknown" not in text
