"""An azure-core transport that answers the SDK's requests from recorded responses (tests/fixtures/azure), so the
capacity preflight and the catalogue refresh run their real SDK calls offline."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import requests
from azure.core.credentials import AccessToken
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._requests_basic import RestRequestsTransportResponse

FIXTURES = Path(__file__).parent / "fixtures" / "azure"

ROUTES = {
    "skus": r"/providers/Microsoft\.Compute/skus$",
    "usages": r"/locations/[a-z0-9]+/usages$",
    "spot": r"/placementScores/spot/generate$",
    "pools": r"/managedClusters/[^/]+/agentPools$",
    "cluster": r"/managedClusters/[^/]+$",
    "vms": r"/providers/Microsoft\.Compute/virtualMachines$",
    "crg": r"/capacityReservationGroups/[^/]+$",
    "reservations": r"/capacityReservationGroups/[^/]+/capacityReservations$",
    "grants": r"/providers/Microsoft\.Authorization/roleAssignments$",
    "features": r"/providers/Microsoft\.Features/providers/[^/]+/features/[^/]+$",
    "prices": r"^/api/retail/prices$",
    "locations": r"^/subscriptions/[^/]+/locations$",
    "subscription": r"^/subscriptions/[^/]+$",
    "zonepeers": r"/providers/Microsoft\.Resources/checkZonePeers/?$",
}
"""Which recorded file answers a request, by the path it asks for."""


class Replay(HttpTransport):
    """``files``: route name (ROUTES) → a fixture file name; a page after the first (a retail-prices ``$skip``, an
    ARM ``$skipToken``) comes from the file named ``<file>-page2.json``. Every request is kept in ``seen``."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.seen: list[tuple[str, str, dict | None]] = []

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request, **kwargs):
        url = urlsplit(request.url)
        body = json.loads(request.content) if request.content else None
        self.seen.append((request.method, request.url, body))
        route = next(name for name, pattern in ROUTES.items() if re.search(pattern, url.path))
        name = self.files[route]
        asked = {key.lower() for key in parse_qs(url.query)}
        if (route == "prices" and "$skip" in asked) or "$skiptoken" in asked:
            name = name.replace(".json", "-page2.json")
        status, recorded = next(iter(json.loads((FIXTURES / name).read_text())["responses"].items()))
        raw = requests.Response()
        raw.status_code, raw.url = int(status), request.url
        raw.headers["Content-Type"] = "application/json"
        raw.raw = io.BytesIO(json.dumps(recorded["body"]).encode())
        return RestRequestsTransportResponse(request=request, internal_response=raw)


class Token:
    """A credential that signs every request with a dummy token."""

    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        return AccessToken("recorded", 2**31)
