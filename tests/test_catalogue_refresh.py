"""The catalogue and price refresh against recorded Resource SKUs and Retail Prices responses, and the files it
writes read back by the platform and the cost estimate."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import yaml

from components.azure.regions import REGIONS, REGIONS_HEADER, load_regions
from components.gpu.sizes import CATALOGUE, load_catalogue
from offline.estimates import cost
from ops import catalogue
from tests.azure_replay import Replay, Token

FILES = {"skus": "skus.json", "prices": "prices-eastus.json", "locations": "locations.json"}


def refresh(tmp_path, **kwargs):
    if not (tmp_path / "catalogue.yaml").exists():
        shutil.copy(CATALOGUE, tmp_path / "catalogue.yaml")
    replay = Replay(FILES)
    notes = catalogue.refresh("00000000-0000-0000-0000-000000000000", ["eastus"], ["Standard_D4ds_v5"],
                              transport=replay, credential=Token(), today=dt.date(2026, 11, 24),
                              catalogue_path=tmp_path / "catalogue.yaml", prices_path=tmp_path / "vm_prices.yaml",
                              regions_path=tmp_path / "regions.yaml", **kwargs)
    return notes, replay


def test_the_catalogue_is_rewritten_from_resource_skus_with_regions_zones_and_spot(tmp_path):
    notes, _ = refresh(tmp_path)
    header, sizes = load_catalogue(tmp_path / "catalogue.yaml")
    assert header["refreshed"] == "2026-11-24" and header["source"].startswith("Resource SKUs API")
    t4 = sizes["Standard_NC4as_T4_v3"]
    assert t4.regions == {"eastus": ("1", "2", "3"), "eastus2": ("1", "2", "3"), "westus3": ("1", "2", "3")}
    assert t4.spot is True and t4.vcpus == 4 and t4.gpu_model == "T4"
    # Offered in a region even where this subscription is restricted: the capacity check judges the subscription.
    assert sizes["Standard_ND96isr_H200_v5"].regions == {"eastus2": ("1", "3"), "southcentralus": ("1", "3")}
    assert sizes["Standard_ND96isr_H100_v5"].spot is False
    assert "Standard_D4ds_v5" not in sizes  # no GPUs
    assert "GPU family StandardNCX9v9Family has no entry in components.gpu.sizes FAMILIES" in notes[0]


def test_sizes_azure_did_not_list_go_unless_added_by_hand(tmp_path):
    path = tmp_path / "catalogue.yaml"
    data = yaml.safe_load(CATALOGUE.read_text())
    data["sizes"]["Standard_NC8as_T4_v3"]["source"] = "manual"
    path.write_text(yaml.safe_dump(data))
    notes, _ = refresh(tmp_path)
    sizes = load_catalogue(path)[1]
    assert "Standard_NC8as_T4_v3" in sizes  # manual: kept
    assert "Standard_NV36ads_A10_v5" not in sizes  # not listed by this subscription's Resource SKUs: gone


def test_prices_are_linux_pay_as_you_go_and_spot_the_newest_of_each_and_missing_ones_are_reported(tmp_path):
    notes, replay = refresh(tmp_path)
    prices = yaml.safe_load((tmp_path / "vm_prices.yaml").read_text())["regions"]["eastus"]
    assert prices["refreshed"] == "2026-11-24"
    # Windows, Low Priority (Batch) and the 2024 price are not the T4's Linux prices; page 2 was read too.
    assert prices["sizes"]["Standard_NC4as_T4_v3"] == {"on_demand": 0.5, "spot": 0.1}
    assert prices["sizes"]["Standard_ND96isr_H200_v5"] == {"on_demand": 100.0, "spot": None}
    assert any(n.startswith("eastus: no price for ") and "Standard_D4ds_v5" in n for n in notes)
    asked = [url for method, url, body in replay.seen if "prices.azure.com" in url]
    assert len(asked) == 2 and "armRegionName eq 'eastus'" in asked[0]


def test_a_refreshed_price_table_prices_h200_in_the_stacks_region(tmp_path):
    refresh(tmp_path)
    prices = cost.load_prices(vm_path=tmp_path / "vm_prices.yaml")
    region = cost.region_vm_prices(prices, "eastus")
    assert cost.node_hour(region, "Standard_ND96isr_H200_v5", spot=False, discount=0.8) == cost.NodeHour(100.0)
    assert cost.node_hour(region, "Standard_NC4as_T4_v3", spot=True, discount=0.8) == cost.NodeHour(0.1)


def test_the_region_list_is_the_subscriptions_physical_locations_with_its_source_and_date(tmp_path):
    _, replay = refresh(tmp_path)
    regions, refreshed = load_regions(tmp_path / "regions.yaml")
    assert regions == {"eastus": "East US", "swedencentral": "Sweden Central", "westeurope": "West Europe"}
    assert refreshed == "2026-11-24"  # the geography `europe` is no region
    source = yaml.safe_load((tmp_path / "regions.yaml").read_text())["source"]
    assert source.startswith("Subscriptions - List Locations")
    assert any(url.endswith("/subscriptions/00000000-0000-0000-0000-000000000000/locations?api-version=2022-12-01")
               for _, url, _ in replay.seen)


def test_the_committed_region_list_says_where_and_when_it_was_taken():
    data = yaml.safe_load(REGIONS.read_text())
    assert REGIONS.read_text() == REGIONS_HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
    assert data["refreshed"] and "List Locations" in data["source"]
    assert {"eastus", "eastus2", "westus2", "westus3", "southcentralus", "westeurope", "swedencentral", "uksouth",
            "japaneast"} <= set(data["regions"])


def test_regions_not_refreshed_keep_their_prices(tmp_path):
    path = tmp_path / "vm_prices.yaml"
    catalogue.write_prices({"westeurope": {"Standard_D4ds_v5": {"on_demand": 0.25, "spot": None}}}, "by hand", None,
                           path)
    refresh(tmp_path)
    regions = yaml.safe_load(path.read_text())["regions"]
    assert set(regions) == {"eastus", "westeurope"} and regions["westeurope"]["source"] == "by hand"


def test_the_committed_files_are_what_the_writers_write():
    """Hand edits keep the writers' layout, so a refresh's diff shows only what Azure changed."""
    header, _ = load_catalogue()
    data = yaml.safe_load(CATALOGUE.read_text())
    assert CATALOGUE.read_text() == catalogue.CATALOGUE_HEADER + yaml.safe_dump(
        data, sort_keys=False, default_flow_style=None, width=120)
    prices = yaml.safe_load(catalogue.PRICES.read_text())
    assert catalogue.PRICES.read_text() == catalogue.PRICES_HEADER + yaml.safe_dump(
        prices, sort_keys=False, default_flow_style=None, width=120)


def test_the_command_prices_the_stacks_regions_and_sizes(monkeypatch, capsys):
    from ops.__main__ import main
    asked = {}
    monkeypatch.setattr(catalogue, "refresh", lambda sub, regions, sizes, prices: asked.update(
        sub=sub, regions=regions, sizes=sizes, prices=prices) or ["a note"])
    assert main(["catalogue", "--subscription", "s"]) == 0
    assert set(catalogue.DEFAULT_REGIONS) <= set(asked["regions"]) and asked["prices"]
    assert {"Standard_NC4as_T4_v3", "Standard_D4ds_v5"} <= asked["sizes"]
    assert capsys.readouterr().out.startswith("a note\nwrote regions.yaml, catalogue.yaml and vm_prices.yaml")
    assert main(["catalogue", "--subscription", "s", "--regions", "westus3", "--no-prices"]) == 0
    assert asked["regions"] == ["westus3"] and not asked["prices"]
    capsys.readouterr()
    assert main(["catalogue", "--subscription", "s", "--regions", "westus3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"catalogue": "catalogue.yaml", "prices": "vm_prices.yaml",
                                                   "regions": ["westus3"], "notes": ["a note"]}
