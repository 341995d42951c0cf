"""What the capacity preflight and the catalogue refresh read from Azure, through Microsoft's SDK.

Resource SKUs, vCPU usage, capacity reservation groups and the VMs node auto-provisioning made come from
azure-mgmt-compute, a stack's deployed cluster and agent pools from azure-mgmt-containerservice, Spot Placement Scores
from the compute client's own pipeline (``send_request``: the SDK that wraps that API, azure-mgmt-computerecommender,
is a beta), as are feature registrations, role assignments and zone peers (their SDKs are not runtime
dependencies), and retail prices from azure-core's pipeline (the Retail Prices API needs no sign-in). Every call
returns plain data. Reads only: nothing here changes Azure (Check Zone Peers is a POST that changes nothing).

Tests pass a ``transport`` that answers from recorded responses (tests/fixtures/azure), so the same SDK code runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

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
ZONE_PEERS_API = "2022-12-01"
"""Subscriptions - Check Zone Peers (Microsoft.Resources, learn.microsoft.com/rest/api/resources/subscriptions/
check-zone-peers): which logical zone of another subscription is each of this one's. It needs the subscription's
``Microsoft.Resources/AvailabilityZonePeering`` feature (MicrosoftDocs/reliability-docs availability-zones-overview.md:
"Physical and logical availability zones") and the action ``Microsoft.Resources/checkZonePeers/action``, which Reader
does not grant."""
ROLE_ASSIGNMENTS_API = "2022-04-01"
"""Role Assignments - List For Resource Group (Microsoft.Authorization; azure-mgmt-authorization 4.0.0's default):
``$filter=principalId eq '{id}'`` returns the principal's assignments at, above or below the group, each with
``properties.createdOn``."""
NAP_NODEPOOL_TAG = "karpenter.sh_nodepool"
"""The tag node auto-provisioning puts on each VM it makes, valued with its NodePool's name: the
``karpenter.sh/nodepool`` label with ``/`` made ``_`` (karpenter-provider-azure v1.12.2
pkg/providers/launchtemplate/tags.go ``NodePoolTagKey``; the VM is created in the node resource group with those
tags, pkg/providers/instance/vminstance.go)."""
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


class DeployedPool(NamedTuple):
    """One agent pool of a deployed cluster, as AKS reports it."""

    vm_size: str
    nodes: int
    spot: bool
    autoscale: bool = False
    """The cluster autoscaler sizes it (``enableAutoScaling``)."""
    reservation: str | None = None
    """The capacity reservation group it is associated with (``capacityReservationGroupID``), lower case."""


@dataclass(frozen=True)
class DeployedCluster:
    """What the preflight needs of a deployed cluster besides its pools."""

    name: str
    resource_group: str
    node_provisioning: str
    """``Auto`` (node auto-provisioning on) or ``Manual`` (AKS's default when the profile is absent)."""
    node_resource_group: str
    control_plane_principal: str | None = None
    """Principal id of the user-assigned control-plane identity the stack names, when the cluster runs as it."""


@dataclass(frozen=True)
class Reservation:
    """One capacity reservation of a group: a VM size, in a zone or none, and how many of it are reserved."""

    name: str
    vm_size: str
    zones: tuple[str, ...]
    capacity: int
    """What Azure reserved and bills (``utilizationInfo.currentCapacity``; ``sku.capacity`` without it)."""
    allocated: int
    """VMs allocated against it now: ``utilizationInfo.virtualMachinesAllocated``, or for an Open reservation the sum
    of ``usedReservedCountBySubscription``, which Open reservations report instead (azure-mgmt-compute 39.0.0
    ``CapacityReservationUtilization``)."""
    start: str | None = None
    """A Block reservation's first day (``scheduleProfile.start``, a date such as ``2026-06-27``)."""
    end: str | None = None
    """A Block reservation's end date (``scheduleProfile.end``)."""


@dataclass(frozen=True)
class ReservationGroup:
    """A capacity reservation group and its reservations, read with their instance view."""

    id: str
    zones: tuple[str, ...]
    reservations: tuple[Reservation, ...]
    kind: str = "Targeted"
    """``reservationType`` (azure-mgmt-compute 39.0.0 ``ReservationType``): ``Targeted``, the default, for VMs that
    name the group; ``Block``, whose VMs take capacity only from the reservation, with no fallback beyond it;
    ``Open``, consumed by any matching VM without naming the group."""

    @property
    def block(self) -> bool:
        return self.kind.lower() == "block"

    @property
    def open(self) -> bool:
        return self.kind.lower() == "open"


T = TypeVar("T")


def _read(what: str, read: Callable[[], T]) -> T:
    """``read()``'s answer; an ``AzureReadError`` naming ``what`` when Azure refuses it. A failed sign-in goes up as
    it is: the command says so in one line, not as a failed read."""
    try:
        return read()
    except ClientAuthenticationError:
        raise
    except HttpResponseError as error:
        raise AzureReadError(what, error.status_code, error.message) from None


def _read_if_there(what: str, read: Callable[[], T]) -> T | None:
    """As ``_read``; None where Azure answers that what it reads does not exist."""
    def or_none() -> T | None:
        try:
            return read()
        except ResourceNotFoundError:
            return None
    return _read(what, or_none)


def _lower(resource_id: str | None) -> str | None:
    return resource_id.lower() if resource_id else None


def _scope(resource_id: str) -> tuple[str, str, str]:
    """(subscription, resource group, name) of a resource id."""
    parts = resource_id.strip("/").split("/")
    return parts[1], parts[3], parts[-1]


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
        self._credential, self._extra = credential, extra
        self.compute = ComputeManagementClient(credential, subscription, user_agent=USER_AGENT, **extra)
        self.aks = ContainerServiceClient(credential, subscription, user_agent=USER_AGENT, **extra)

    def vm_skus(self, region: str | None = None) -> dict[str, Sku]:
        """Every VM size Resource SKUs lists for this subscription, in ``region`` or (None) in every region."""
        where = f"location eq '{region}'" if region else None
        return _read("Resource SKUs", lambda: _merge(self.compute.resource_skus.list(filter=where)))

    def usage(self, region: str) -> dict[str, tuple[int, int]]:
        """Quota name (lower case: ``cores``, ``lowprioritycores``, a family) → (vCPUs in use, limit) in ``region``."""
        # The SDK's models type every read-only field Optional; a quota without a name has nothing to match.
        return _read(f"vCPU usage in {region}", lambda: {
            u.name.value.lower(): (u.current_value, u.limit) for u in self.compute.usage.list(region)
            if u.name.value is not None})

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

    def agent_pools(self, resource_group: str, cluster: str) -> dict[str, DeployedPool]:
        """The deployed cluster's pools by name; empty when there is no such cluster."""
        pools = _read_if_there(f"agent pools of {cluster}",
                               lambda: list(self.aks.agent_pools.list(resource_group, cluster))) or []
        # Optional in the SDK's models, both are set on a pool read back from a cluster.
        return {p.name: DeployedPool(p.vm_size, p.count or 0, p.scale_set_priority == "Spot",
                                     bool(p.enable_auto_scaling), _lower(p.capacity_reservation_group_id))
                for p in pools if p.name is not None and p.vm_size is not None}

    def cluster(self, resource_group: str, name: str, identity: str) -> DeployedCluster | None:
        """The deployed cluster's node provisioning mode, node resource group and the principal of its user-assigned
        identity named ``identity``; None when there is no such cluster."""
        found = _read_if_there(f"cluster {name}", lambda: self.aks.managed_clusters.get(resource_group, name))
        if found is None:
            return None
        profile = found.node_provisioning_profile
        assigned = (found.identity.user_assigned_identities or {}) if found.identity else {}
        principal = next((i.principal_id for key, i in assigned.items()
                          if key.lower().endswith(f"/userassignedidentities/{identity.lower()}")), None)
        return DeployedCluster(name, resource_group, (profile.mode if profile and profile.mode else "Manual"),
                               found.node_resource_group or "", principal)

    def nap_nodes(self, node_resource_group: str) -> list[tuple[str, str, bool]]:
        """The VMs node auto-provisioning made in ``node_resource_group``: (NodePool, VM size, spot) each."""
        vms = _read_if_there(f"VMs in {node_resource_group}",
                             lambda: list(self.compute.virtual_machines.list(node_resource_group))) or []
        return [(vm.tags[NAP_NODEPOOL_TAG], vm.hardware_profile.vm_size, vm.priority == "Spot") for vm in vms
                if vm.tags and NAP_NODEPOOL_TAG in vm.tags and vm.hardware_profile and vm.hardware_profile.vm_size]

    def reservation_group(self, group_id: str) -> ReservationGroup | None:
        """A capacity reservation group with its reservations' sizes, zones, reserved and allocated counts (its
        instance view); None when it does not exist. The group may be in another subscription (a shared group)."""
        from azure.mgmt.compute import ComputeManagementClient
        subscription, group, name = _scope(group_id)
        compute = self.compute if subscription.lower() == self.subscription.lower() else \
            ComputeManagementClient(self._credential, subscription, user_agent=USER_AGENT, **self._extra)
        read = _read_if_there(f"capacity reservation group {name}", lambda: (
            compute.capacity_reservation_groups.get(group, name, expand="instanceView"),
            list(compute.capacity_reservations.list_by_capacity_reservation_group(group, name))))
        if read is None:
            return None
        found, reservations = read
        views = {v.name.lower(): v.utilization_info for v in
                 (found.instance_view.capacity_reservations or () if found.instance_view else ()) if v.name}
        # A str enum (ReservationType) or a plain string the SDK does not know yet: its value either way.
        kind = str(getattr(found.reservation_type, "value", found.reservation_type) or "Targeted")
        made = []
        for r in reservations:
            use = views.get((r.name or "").lower())
            current = use.current_capacity if use and use.current_capacity is not None else r.sku.capacity
            allocated = (sum((use.used_reserved_count_by_subscription or {}).values()) if kind.lower() == "open"
                         else len(use.virtual_machines_allocated or ())) if use else 0
            schedule = r.schedule_profile
            made.append(Reservation(r.name or "", r.sku.name or "", tuple(r.zones or ()), int(current or 0),
                                    int(allocated), schedule.start if schedule else None,
                                    schedule.end if schedule else None))
        return ReservationGroup(group_id.lower(), tuple(found.zones or ()), tuple(made), kind)

    def zone_peers(self, location: str, other: str) -> dict[str, str]:
        """This subscription's logical zone → ``other`` subscription's logical zone of the same physical zone, in
        ``location`` (Subscriptions - Check Zone Peers)."""
        request = HttpRequest(
            "POST", f"/subscriptions/{self.subscription}/providers/Microsoft.Resources/checkZonePeers/",
            params={"api-version": ZONE_PEERS_API},
            json={"location": location, "subscriptionIds": [f"subscriptions/{other}"]})
        response = self.compute.send_request(request)
        response.read()
        if response.status_code != 200:
            raise AzureReadError(f"zone peers of subscription {other}", response.status_code,
                                 _error_message(response))
        return {str(z["availabilityZone"]): str(p["availabilityZone"])
                for z in response.json().get("availabilityZonePeers", []) for p in z.get("peers", [])
                if str(p.get("subscriptionId", "")).lower() == other.lower() and p.get("availabilityZone")}

    def grant_made(self, scope: str, principal: str, role: str) -> datetime | None:
        """When ``principal`` was granted built-in ``role`` (a role definition id) on resource group ``scope`` or
        above it; None when it is not."""
        subscription, group, _ = _scope(scope)
        request: HttpRequest | None = HttpRequest(
            "GET", f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Authorization/"
                   "roleAssignments",
            params={"api-version": ROLE_ASSIGNMENTS_API, "$filter": f"principalId eq '{principal}'"})
        assignments: list[dict[str, Any]] = []
        while request is not None:
            response = self.compute.send_request(request)
            response.read()
            if response.status_code != 200:
                raise AzureReadError(f"role assignments on {group}", response.status_code, _error_message(response))
            page = response.json()
            assignments += page.get("value", [])
            request = HttpRequest("GET", page["nextLink"]) if page.get("nextLink") else None
        inside = f"/subscriptions/{subscription}/resourcegroups/{group}/".lower()
        made = [a["properties"].get("createdOn") for a in assignments
                if a.get("properties", {}).get("roleDefinitionId", "").lower().endswith(f"/{role}")
                and inside.startswith(a["properties"].get("scope", "").lower().rstrip("/") + "/")]
        when = [datetime.fromisoformat(m.replace("Z", "+00:00")) for m in made if m]
        return min(when) if when else None


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
