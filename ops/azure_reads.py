"""What the capacity preflight and the catalogue refresh read from Azure, through Microsoft's SDK.

Resource SKUs and vCPU usage come from azure-mgmt-compute, a stack's existing agent pools from
azure-mgmt-containerservice, Spot Placement Scores from the compute client's own pipeline (``send_request``: the SDK
that wraps that API, azure-mgmt-computerecommender, is a beta), and retail prices from azure-core's pipeline (the
Retail Prices API needs no sign-in). Every call returns plain data. Reads only: nothing here changes Azure.

Tests pass a ``transport`` that answers from recorded responses (tests/fixtures/azure), so the same SDK code runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from azure.core import PipelineClient
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.core.pipeline.policies import HeadersPolicy, RetryPolicy, UserAgentPolicy
from azure.core.rest import HttpRequest

LOCATIONS_API = "2022-12-01"
"""Subscriptions - List Locations (Microsoft.Resources, learn.microsoft.com/rest/api/resources/subscriptions/
list-locations)."""
SUBSCRIPTIONS_API = "2022-12-01"
"""Subscriptions - Get (Microsoft.Resources, learn.microsoft.com/rest/api/resources/subscriptions/get): the
subscription's offer is ``subscriptionPolicies.quotaId``."""
SPOT_SCORES_API = "2025-06-05"
"""Spot Placement Scores (Microsoft.Compute DiagnosticRP, stable)."""
FEATURES_API = "2021-07-01"
"""Microsoft.Features (azure-mgmt-resource 23.3.0 features DEFAULT_API_VERSION; ``properties.state``)."""
SPOT_SCORE_MAX_REGIONS = 8
"""Regions one Spot Placement Scores request may name (learn.microsoft.com/azure/virtual-machine-scale-sets/
spot-placement-score: up to 8 regions and 5 sizes)."""
RETAIL_PRICES = "https://prices.azure.com"
USER_AGENT = "aksgpu-capacity"


class AzureReadError(Exception):
    """A read Azure refused or failed: ``status`` is the HTTP status (403: the identity lacks a role)."""

    def __init__(self, what: str, status: int | None, message: str) -> None:
        super().__init__(f"{what}: {message}")
        self.status = status


@dataclass(frozen=True)
class Sku:
    """One VM size as Resource SKUs describes it to this subscription, merged over the regions asked about."""

    name: str
    family: str
    capabilities: Mapping[str, str]
    zones: Mapping[str, tuple[str, ...]]
    """Region → the zones the size is offered in there (empty: offered, but not in zones)."""
    restricted_regions: Mapping[str, str] = field(default_factory=dict)
    """Region → why the size is not available to this subscription there (a ``reasonCode``)."""
    restricted_zones: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Region → zones where it is not available to this subscription."""

    def number(self, capability: str, default: float = 0) -> float:
        value = self.capabilities.get(capability)
        return default if value is None else float(value)

    @property
    def vcpus(self) -> int:
        return int(self.number("vCPUs"))

    @property
    def gpus(self) -> int:
        return int(self.number("GPUs"))

    @property
    def memory_gib(self) -> int:
        return round(self.number("MemoryGB"))

    @property
    def spot_capable(self) -> bool:
        return self.capabilities.get("LowPriorityCapable", "False") == "True"

    def offered(self, region: str) -> bool:
        return region in self.zones

    def usable_zones(self, region: str) -> tuple[str, ...]:
        """Zones of ``region`` where the size is offered and not restricted for this subscription."""
        blocked = set(self.restricted_zones.get(region, ()))
        return tuple(z for z in self.zones.get(region, ()) if z not in blocked)


def _merge(entries: Iterable[Any]) -> dict[str, Sku]:
    """Resource SKUs models (one per size and region) → one Sku per virtual machine size."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.resource_type != "virtualMachines":
            continue
        sku = merged.setdefault(entry.name, {"family": entry.family or "", "capabilities": {}, "zones": {},
                                             "restricted_regions": {}, "restricted_zones": {}})
        sku["capabilities"].update({c.name: c.value for c in entry.capabilities or ()})
        for info in entry.location_info or ():
            sku["zones"][info.location.lower()] = tuple(sorted(info.zones or ()))
        for restriction in entry.restrictions or ():
            info = restriction.restriction_info
            regions = [r.lower() for r in (info.locations if info and info.locations else restriction.values or ())]
            for region in regions:
                if restriction.type == "Location":
                    sku["restricted_regions"][region] = restriction.reason_code or "restricted"
                elif restriction.type == "Zone":
                    sku["restricted_zones"][region] = tuple(sorted(info.zones or ())) if info else ()
    return {name: Sku(name, **fields) for name, fields in merged.items()}


class Azure:
    """Reads of one subscription, signed in with azure-identity's chain (az login; OIDC in the workflows)."""

    def __init__(self, subscription: str, credential: Any = None, transport: Any = None) -> None:
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.containerservice import ContainerServiceClient
        if credential is None:
            from azure.identity import DefaultAzureCredential
            credential = DefaultAzureCredential(exclude_interactive_browser_credential=True)
        extra = {"transport": transport} if transport is not None else {}
        self.subscription = subscription
        self.compute = ComputeManagementClient(credential, subscription, user_agent=USER_AGENT, **extra)
        self.aks = ContainerServiceClient(credential, subscription, user_agent=USER_AGENT, **extra)

    def vm_skus(self, region: str | None = None) -> dict[str, Sku]:
        """Every VM size Resource SKUs lists for this subscription, in ``region`` or (None) in every region."""
        where = f"location eq '{region}'" if region else None
        try:
            return _merge(self.compute.resource_skus.list(filter=where))
        except ClientAuthenticationError:
            raise  # no sign-in: the command says so in one line, not as a failed read
        except HttpResponseError as error:
            raise AzureReadError("Resource SKUs", error.status_code, error.message) from None

    def usage(self, region: str) -> dict[str, tuple[int, int]]:
        """Quota name (lower case: ``cores``, ``lowprioritycores``, a family) → (vCPUs in use, limit) in ``region``."""
        try:
            # The SDK's models type every read-only field Optional; a quota without a name has nothing to match.
            return {u.name.value.lower(): (u.current_value, u.limit) for u in self.compute.usage.list(region)
                    if u.name.value is not None}
        except ClientAuthenticationError:
            raise
        except HttpResponseError as error:
            raise AzureReadError(f"vCPU usage in {region}", error.status_code, error.message) from None

    def spot_scores(self, location: str, size: str, regions: Iterable[str], count: int,
                    zonal: bool) -> list[dict[str, Any]]:
        """Spot Placement Scores of ``count`` VMs of ``size`` in ``regions`` (per zone when ``zonal``): each
        ``{region, availabilityZone?, score}``, the score one of High, Medium, Low, DataNotFoundOrStale..."""
        body = {"desiredLocations": list(regions)[:SPOT_SCORE_MAX_REGIONS], "desiredSizes": [{"sku": size}],
                "desiredCount": max(count, 1), "availabilityZones": zonal}
        request = HttpRequest(
            "POST", f"/subscriptions/{self.subscription}/providers/Microsoft.Compute/locations/{location}"
                    "/placementScores/spot/generate", params={"api-version": SPOT_SCORES_API}, json=body)
        response = self.compute.send_request(request)
        response.read()
        if response.status_code != 200:
            raise AzureReadError(f"Spot Placement Scores for {size}", response.status_code,
                                 _error_message(response))
        return [{**s, "region": s.get("region", "").lower()} for s in response.json().get("placementScores", [])]

    def feature_state(self, namespace: str, feature: str) -> str:
        """A preview feature's registration on this subscription: ``Registered``, ``Registering``,
        ``NotRegistered``... (az feature show's ``properties.state``)."""
        request = HttpRequest(
            "GET", f"/subscriptions/{self.subscription}/providers/Microsoft.Features/providers/{namespace}/features/"
                   f"{feature}", params={"api-version": FEATURES_API})
        response = self.compute.send_request(request)
        response.read()
        if response.status_code != 200:
            raise AzureReadError(f"feature {namespace}/{feature}", response.status_code, _error_message(response))
        return response.json().get("properties", {}).get("state", "NotRegistered")

    def locations(self) -> list[dict[str, Any]]:
        """The subscription's locations as Subscriptions - List Locations returns them (its ``value``), through the
        compute client's pipeline (signed in to the same management endpoint)."""
        request = HttpRequest("GET", f"/subscriptions/{self.subscription}/locations",
                              params={"api-version": LOCATIONS_API})
        response = self.compute.send_request(request)
        response.read()
        if response.status_code != 200:
            raise AzureReadError("locations", response.status_code, _error_message(response))
        return list(response.json().get("value", []))

    def quota_id(self) -> str | None:
        """The subscription's offer as Subscriptions - Get names it (``subscriptionPolicies.quotaId``, e.g.
        ``FreeTrial_2014-09-01``). ``az account show`` does not carry it: the Azure CLI keeps only its profile's
        fields (azure-cli src/azure-cli-core/azure/cli/core/_profile.py, ``_normalize_properties``)."""
        request = HttpRequest("GET", f"/subscriptions/{self.subscription}", params={"api-version": SUBSCRIPTIONS_API})
        response = self.compute.send_request(request)
        response.read()
        if response.status_code != 200:
            raise AzureReadError("subscription", response.status_code, _error_message(response))
        return response.json().get("subscriptionPolicies", {}).get("quotaId")

    def agent_pools(self, resource_group: str, cluster: str) -> dict[str, tuple[str, int, bool]]:
        """The deployed cluster's pools: name → (VM size, nodes, spot); empty when there is no such cluster."""
        try:
            pools = list(self.aks.agent_pools.list(resource_group, cluster))
        except ResourceNotFoundError:
            return {}
        except ClientAuthenticationError:
            raise
        except HttpResponseError as error:
            raise AzureReadError(f"agent pools of {cluster}", error.status_code, error.message) from None
        # Optional in the SDK's models, both are set on a pool read back from a cluster.
        return {p.name: (p.vm_size, p.count or 0, p.scale_set_priority == "Spot") for p in pools
                if p.name is not None and p.vm_size is not None}


def _error_message(response: Any) -> str:
    try:
        error = response.json().get("error", {})
        return f"{error.get('code', response.status_code)}: {error.get('message', '')}".rstrip(": ")
    except ValueError:
        return f"HTTP {response.status_code}"


def retail_prices(region: str, sizes: Iterable[str], transport: Any = None) -> list[dict[str, Any]]:
    """The Retail Prices API's pay-as-you-go items for ``sizes`` in ``region`` (every page), as it returns them."""
    names = " or ".join(f"armSkuName eq '{s}'" for s in sorted(sizes))
    query = (f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and priceType eq 'Consumption' "
             f"and ({names})")
    client = PipelineClient(RETAIL_PRICES, policies=[HeadersPolicy(), UserAgentPolicy(USER_AGENT), RetryPolicy()],
                            **({"transport": transport} if transport is not None else {}))
    items: list[dict[str, Any]] = []
    request: HttpRequest | None = HttpRequest("GET", f"{RETAIL_PRICES}/api/retail/prices", params={"$filter": query})
    while request is not None:
        response = client.send_request(request)
        response.read()
        if response.status_code != 200:
            raise AzureReadError(f"retail prices in {region}", response.status_code, _error_message(response))
        page = response.json()
        items += page.get("Items", [])
        link = page.get("NextPageLink")
        request = HttpRequest("GET", link) if link else None
    return items


NEEDS_SUBSCRIPTION = ("--subscription (or AZURE_SUBSCRIPTION_ID or ARM_SUBSCRIPTION_ID, or the Azure CLI's `az account "
                      "show` after az login) names the subscription to ask")
NOT_SIGNED_IN = "not signed in to Azure: run az login"
"""What a command that asks Azure prints first, alone on its line, when no credential can sign it in."""


def az_subscription() -> str | None:
    """The subscription ``az account show`` names (the one ``az account set`` chose), or None: no Azure CLI, or not
    signed in."""
    az = shutil.which("az")
    if az is None:
        return None
    try:
        shown = subprocess.run([az, "account", "show", "--query", "id", "--output", "tsv"], capture_output=True,
                               text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (shown.stdout.strip() or None) if shown.returncode == 0 else None


def subscription(given: str | None) -> str | None:
    """The subscription to ask: the one given, else the environment's (the workflows set AZURE_SUBSCRIPTION_ID), else
    the Azure CLI's current one (``az account set``)."""
    return given or os.environ.get("AZURE_SUBSCRIPTION_ID") or os.environ.get("ARM_SUBSCRIPTION_ID") or \
        az_subscription()


def signed_out() -> bool:
    """Whether the Azure CLI is installed but not signed in (``az account show`` fails)."""
    return shutil.which("az") is not None and az_subscription() is None
