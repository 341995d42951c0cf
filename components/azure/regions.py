"""Azure's regions, as Azure lists them (Subscriptions - List Locations, ``regionType: Physical``), committed in
``regions.yaml`` with the date and source of the list; ``python -m ops catalogue`` refreshes it from the signed-in
subscription. The config checks a stack's ``location`` against it, so a typo stops the render with the nearest name
instead of reaching ``pulumi up``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REGIONS = Path(__file__).with_name("regions.yaml")

REGIONS_HEADER = """\
# Azure's regions (the `regionType: Physical` locations of Subscriptions - List Locations): name and display name.
# A stack's aksgpu:location must be one of them. Written by `python -m ops catalogue` (needs `az login`), which
# replaces the list with what the signed-in subscription sees and stamps `refreshed` and `source`.
"""


@cache
def load_regions(path: Path = REGIONS) -> tuple[dict[str, str], str]:
    """(region name → display name, the day the list was taken)."""
    data = yaml.safe_load(path.read_text())
    return dict(data["regions"]), str(data["refreshed"])


def physical_regions(locations: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Region name → display name of the physical regions in a List Locations answer's ``value``; the logical ones
    (geographies such as ``europe``, ``global``) are not places a resource runs."""
    return {loc["name"]: loc.get("displayName", loc["name"]) for loc in sorted(locations, key=lambda x: x["name"])
            if (loc.get("metadata") or {}).get("regionType") == "Physical"}


def write_regions(regions: Mapping[str, str], source: str, refreshed: str, path: Path = REGIONS) -> None:
    data = {"refreshed": refreshed, "source": source, "regions": dict(sorted(regions.items()))}
    path.write_text(REGIONS_HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120))
    load_regions.cache_clear()


def region_error(name: str) -> str | None:
    """Why ``name`` is not an Azure region, with the nearest one; None for a region. A display name (``East US``),
    or one written without its spaces (``EastUS``), gets the name it displays: the program keys sizes, prices and
    quotas by the API's name, so it takes only that one."""
    regions, refreshed = load_regions()
    if name in regions:
        return None
    displayed = {" ".join(display.lower().split()): region for region, display in regions.items()}
    compact = "".join(name.lower().split())
    if (region := displayed.get(" ".join(name.lower().split()))) is not None:
        hint = f"{name.strip()!r} is the display name of {region}; did you mean {region}? "
    elif compact in regions:
        hint = f"did you mean {compact}? "
    else:
        close = difflib.get_close_matches(compact, list(regions), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}? " if close else ""
    return (f"not an Azure region name; {hint}see components/azure/{REGIONS.name} ({len(regions)} regions as Azure "
            f"listed them on {refreshed}; python -m ops catalogue refreshes it)")
