"""Can the stack's pools get their VMs? The capacity preflight (``python -m ops capacity --stack NAME``).

For every pool of the stack, in its region, from what Azure says to this subscription:
  - the vCPU quota the pool draws on: the size's family and the region's total for regular VMs, the region's
    low-priority total for spot (learn.microsoft.com/azure/virtual-machines/spot-vms: spot VMs count against
    ``lowPriorityCores`` only); used, limit and what every pool of the stack on it needs at min and at max nodes,
    the stack's own running nodes given back (a second run of a deployed stack does not count them twice: its agent
    pools' nodes and the VMs node auto-provisioning made for its NAP pools); the maximum with the surge node an
    upgrade adds to each regular pool (learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling: "Node surges
    require subscription quota");
  - for a pool on reserved capacity, the group's reservations (size, zones, reserved and allocated VMs; a Block
    reservation's schedule) against the pool's maximum and its surge node, the nodes beyond them on ordinary quota,
    and how long ago the cluster identity was granted Contributor on the group's resource group
    (learn.microsoft.com/azure/aks/use-capacity-reservation-groups: up to 60 minutes to reach AKS); a group shared
    from another subscription takes no quota off this one, and its zones are compared through Check Zone Peers;
  - for a deployed stack, whether its node provisioning mode (NAP on or off) changes, which AKS refuses on a
    cluster with the cluster autoscaler or with NAP nodes left (learn.microsoft.com/azure/aks/node-auto-provisioning,
    use-node-auto-provisioning);
  - whether the size is offered in the region and its zones, and any restriction on the subscription
    (Resource SKUs; ``NotAvailableForSubscription`` needs a region access request);
  - for spot pools, the Spot Placement Score of the pool's maximum in its zones (learn.microsoft.com/azure/
    virtual-machine-scale-sets/spot-placement-score), and where it is better;
  - a verdict with the fix: fits, fits at min only, does not fit;
and, beside the pools, one line when the stack builds its images with ACR Tasks on a Free Trial subscription, where
ACR Task runs are paused (``acr_tasks_line``).

This module decides; ``azure_reads`` fetches. The exit code is the worst verdict (``Verdict``).
"""

from __future__ import annotations

import argparse
import enum
import json
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from components.azure.node_pools import UPGRADE_SURGE
from components.azure.roles import CONTRIBUTOR, resource_group_of
from components.gpu.sizes import GPU_SIZES, vcpus_of
from components.vocabulary import BuildMode
from offline.cli import error, unknown_stack
from offline.stack_files import stack_config
from ops.azure_reads import (
    NEEDS_SUBSCRIPTION,
    NOT_SIGNED_IN,
    SPOT_SCORE_MAX_REGIONS,
    Azure,
    AzureReadError,
    DeployedCluster,
    DeployedPool,
    Reservation,
    ReservationGroup,
    Sku,
    signed_out,
    subscription,
)
from ops.ci_setup import INFINIBAND_FEATURE
from program.config.expiry import Lifetime, expires_at
from program.markdown import table

if TYPE_CHECKING:
    from program.config.schema import StackConfig

QUOTA_REQUEST = "learn.microsoft.com/azure/quotas/per-vm-quota-requests"
SPOT_QUOTA_REQUEST = "learn.microsoft.com/azure/quotas/spot-quota"
REGION_ACCESS = "learn.microsoft.com/troubleshoot/azure/general/region-access-request-process"
REGIONAL_CORES, SPOT_CORES = "cores", "lowprioritycores"
QUOTA_NAMES = {REGIONAL_CORES: "Total Regional vCPUs", SPOT_CORES: "Total Regional Spot vCPUs"}
GOOD_SCORES = ("High", "Medium")
GRANT_PROPAGATION = timedelta(minutes=60)
"""How long a role assignment to the cluster's user-assigned identity can take to reach AKS
(learn.microsoft.com/azure/aks/use-capacity-reservation-groups: "It can take up to 60 minutes")."""
RESERVATIONS = "learn.microsoft.com/azure/virtual-machines/capacity-reservation-overview"


class Verdict(enum.IntEnum):
    """Worst first is largest; the value is the command's exit code."""

    FITS = 0
    MIN_ONLY = 1
    NO_FIT = 2
    UNCHECKED = 3

    @property
    def label(self) -> str:
        return {0: "fits", 1: "fits at min only", 2: "does not fit", 3: "not checked"}[self.value]


@dataclass(frozen=True)
class PoolNeed:
    """What one pool of the stack asks Azure for."""

    pool: str
    vm_size: str
    spot: bool
    min_nodes: int
    max_nodes: int
    zones: tuple[str, ...] = ()
    reservation: str | None = None
    """The capacity reservation group it takes its VMs from: VMs up to what it reserves draw no quota of their own."""
    alternatives: tuple[tuple[str, bool], ...] = ()
    """A node auto-provisioning pool: the other (size, spot) NAP may make when this one cannot be had."""
    rdma: bool = False
    """Its nodes talk over InfiniBand (an RDMA size in a stack with the network operator): the subscription needs
    the AKSInfinibandSupport feature for them to share one fabric."""
    nap: bool = False
    """Node auto-provisioning makes its nodes (a NodePool), not an agent pool."""
    surge: int = 0
    """Nodes an upgrade adds to the pool at its maximum (``_surge``)."""

    @property
    def nodes(self) -> str:
        return f"{self.min_nodes}–{self.max_nodes} {'spot ' if self.spot else ''}nodes"


def pool_needs(cfg: StackConfig) -> list[PoolNeed]:
    """The system pool, the GPU pools, then the CPU pools, as cost.md lists them."""
    pools = [(cfg.cluster.system_pool, False), *((g, g.spot) for g in cfg.gpu_pools),
             *((c, c.spot) for c in cfg.cpu_pools)]
    return [PoolNeed(p.name, p.vm_size, spot, p.min_count, p.max_count, tuple(p.zones),
                     getattr(p, "capacity_reservation_group", None), _nap_alternatives(p),
                     rdma=cfg.addons.network_operator and p.vm_size in GPU_SIZES and GPU_SIZES[p.vm_size].infiniband,
                     nap=getattr(p, "nap", False), surge=_surge(p, spot))
            for p, spot in pools]


def _surge(pool: Any, spot: bool) -> int:
    """Nodes an upgrade adds before it drains: ``UPGRADE_SURGE`` on a regular user pool, AKS's default of one on the
    system pool (upgrade-aks-node-pools-rolling: "AKS configures upgrades to surge with one extra node by default"),
    never more than the nodes there are ("the number of nodes to be upgraded is used"). A spot pool gets no surge node
    (spot-node-pool: Upgrade a Spot node pool); NAP replaces its nodes itself."""
    if spot or getattr(pool, "nap", False):
        return 0
    return min(int(UPGRADE_SURGE), pool.max_count)


def _nap_alternatives(pool: Any) -> tuple[tuple[str, bool], ...]:
    """What else NAP may make for ``pool``, in its order: each size as spot then on-demand for a spot pool."""
    if not getattr(pool, "nap", False):
        return ()
    kinds = (True, False) if pool.spot else (False,)
    return tuple((size, spot) for size in pool.vm_sizes for spot in kinds)[1:]


@dataclass(frozen=True)
class Readings:
    """What Azure said to this subscription, gathered before any verdict."""

    region: str
    skus: Mapping[str, Sku]
    """Every VM size in every region (alternatives come from the other regions)."""
    usage: Mapping[str, tuple[int, int]]
    """Quota name (lower case) → (vCPUs in use, limit) in ``region``."""
    deployed: Mapping[str, DeployedPool] = field(default_factory=dict)
    """The stack's running agent pools by name."""
    spot_scores: Mapping[tuple[str, str], list[dict[str, Any]] | str] = field(default_factory=dict)
    """(spot pool, VM size) → its placement scores, or why there are none."""
    features: Mapping[str, str] = field(default_factory=dict)
    """Preview feature (``namespace/name``) → its registration state, for the features the pools need."""
    cluster: DeployedCluster | None = None
    """The stack's deployed cluster; None before its first deploy."""
    nap_nodes: tuple[tuple[str, str, bool], ...] = ()
    """The VMs node auto-provisioning made in the cluster: (NodePool, VM size, spot) each."""
    reservations: Mapping[str, ReservationGroup | str | None] = field(default_factory=dict)
    """Capacity reservation group id (lower case) → the group; why it could not be read; None: no such group."""
    zone_peers: Mapping[str, Mapping[str, str] | str] = field(default_factory=dict)
    """Another subscription holding a zonal reservation group (lower case) → this subscription's logical zone → its
    logical zone of the same physical zone (Check Zone Peers); or why that could not be read."""
    grants: Mapping[str, datetime | str | None] = field(default_factory=dict)
    """A reservation group's resource group id (lower case) → when the cluster's identity was granted Contributor
    there; why that could not be read; None or absent: not yet (this deploy grants it)."""
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    subscription: str = ""
    """The deploying subscription, whose quota and zones these are."""
    expires: datetime | None = None
    """When the expiry may destroy the stack if it is deployed now (a demo's ``expires-at``); None: long-lived."""


@dataclass
class PoolCheck:
    need: PoolNeed
    verdict: Verdict = Verdict.FITS
    why: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reserved: int | None = None
    """Reserved VMs the pool can take (``_check_reservation``); None: it takes none, every node draws quota."""

    def worse(self, verdict: Verdict, why: str, fix: str | None = None) -> None:
        self.verdict = max(self.verdict, verdict)
        self.why.append(why)
        if fix:
            self.fixes.append(fix)

    def line(self) -> str:
        """One line: pool, size, verdict, why, fix."""
        n = self.need
        text = f"{n.pool} ({n.vm_size}, {n.nodes}): {self.verdict.label}"
        details = self.why + self.notes
        if details:
            text += " — " + "; ".join(details)
        if self.fixes:
            text += ". Fix: " + "; or ".join(self.fixes)
        return text


def _vcpus(size: str, skus: Mapping[str, Sku]) -> int:
    sku = skus.get(size)
    return sku.vcpus if sku and sku.vcpus else vcpus_of(size)


def _buckets(need: PoolNeed, skus: Mapping[str, Sku]) -> tuple[str, ...]:
    """The quotas a pool's VMs count against (reserved VMs aside: ``_quota_nodes``)."""
    if need.spot:
        return (SPOT_CORES,)
    sku = skus.get(need.vm_size)
    return tuple(b for b in ((sku.family.lower() if sku else ""), REGIONAL_CORES) if b)


def _own_vcpus(readings: Readings, agent_pools: Iterable[str], nap_pools: Iterable[str]) -> dict[str, int]:
    """vCPUs the stack's running nodes already hold, per quota: the usage counts them once. That is the nodes of its
    agent pools (those on a reservation of this subscription hold the reservation's quota, not more; a shared
    group's draw this subscription's) and the VMs NAP made for its NAP pools (not agent pools: ``Azure.nap_nodes``).
    Only the stack's own agent pools, by name: NAP's own default NodePools are not the stack's demand, a pool the
    config dropped runs until the update deletes it, and in karpenter-provider-azure's AKS Machine API modes NAP's
    machines sit in an agent pool of mode ``Machines`` (pkg/operator/options/options.go ``AKS_MACHINES_POOL_NAME``;
    pkg/test/aksagentpools.go ``AgentPoolModeMachines``) while their VMs keep the NodePool tag
    (pkg/providers/instance/aksmachineinstanceutils.go): counted as a pool too, they would be given back twice."""
    mine = set(agent_pools)
    running = [(p.vm_size, p.nodes, p.spot) for name, p in readings.deployed.items()
               if name in mine and not (p.reservation and _same_subscription(p.reservation, readings))]
    running += [(size, 1, spot) for pool, size, spot in readings.nap_nodes if pool in set(nap_pools)]
    held: dict[str, int] = {}
    for size, nodes, spot in running:
        for bucket in _buckets(PoolNeed("", size, spot, nodes, nodes), readings.skus):
            held[bucket] = held.get(bucket, 0) + nodes * _vcpus(size, readings.skus)
    return held


def _same_subscription(resource_id: str, readings: Readings) -> bool:
    """Whether ``resource_id`` is in the deploying subscription (taken to be when it is not known)."""
    return not readings.subscription or _scope_of(resource_id)[0].lower() == readings.subscription.lower()


def _quota_nodes(c: PoolCheck) -> tuple[int, int, int]:
    """The pool's nodes that draw vCPU quota at min, at max, and at max with its upgrade surge: those beyond the
    reserved VMs it can take, which Azure allocates as overallocation, quota checked
    (capacity-reservation-overview: "the quota checks are omitted for VM deployment up to the reserved quantity")."""
    n, reserved = c.need, c.reserved or 0
    return (max(0, n.min_nodes - reserved), max(0, n.max_nodes - reserved),
            max(0, n.max_nodes + n.surge - reserved))


def _quota_name(bucket: str, skus: Mapping[str, Sku]) -> str:
    families = {s.family.lower(): s.family for s in skus.values()}
    return QUOTA_NAMES.get(bucket) or f"{families.get(bucket, bucket)} vCPUs"


def _check_quota(checks: list[PoolCheck], readings: Readings) -> None:
    """Each quota against what every pool on it needs at min nodes, at max, and at max while an upgrade adds its
    surge nodes: "Node surges require subscription quota for the requested max surge count" of every pool
    (upgrade-aks-node-pools-rolling), so a pool sized to its quota at max fails its upgrade (InsufficientVCPUQuota)."""
    held = _own_vcpus(readings, [c.need.pool for c in checks if not c.need.nap],
                      [c.need.pool for c in checks if c.need.nap])
    demand: dict[str, list[int]] = {}
    for c in checks:
        vcpus = _vcpus(c.need.vm_size, readings.skus)
        for bucket in _buckets(c.need, readings.skus):
            at = demand.setdefault(bucket, [0, 0, 0])
            for i, nodes in enumerate(_quota_nodes(c)):
                at[i] += nodes * vcpus
    for c in checks:
        if c.verdict == Verdict.NO_FIT:
            continue  # the size cannot be had here at all: quota is not the problem to fix first
        if c.reserved is not None and not any(_quota_nodes(c)):
            continue  # every node on reserved capacity, whose creation took the quota
        for bucket in _buckets(c.need, readings.skus):
            used, limit = readings.usage.get(bucket, (0, 0))
            free = limit - used + held.get(bucket, 0)
            at_min, at_max, upgrading = demand[bucket]
            name = _quota_name(bucket, readings.skus)
            state = f"{name} in {readings.region}: {used} of {limit} used, the stack needs {at_min} at min and " \
                    f"{at_max} at max" + (f", {upgrading} while an upgrade adds a surge node to each regular pool"
                                          if upgrading > at_max else "")
            guide = SPOT_QUOTA_REQUEST if bucket == SPOT_CORES else QUOTA_REQUEST
            request = f"request {name} in {readings.region} raised to {limit - free + upgrading} ({guide})"
            if upgrading <= free:
                c.notes.append(f"{name} {used}/{limit}")
            elif at_max <= free:
                c.worse(Verdict.MIN_ONLY, f"{state}: the maximum fits, an upgrade's surge node does not", request)
            elif at_min <= free:
                c.worse(Verdict.MIN_ONLY, state, request)
            else:
                c.worse(Verdict.NO_FIT, state, request)


def _regions_offering(size: str, skus: Mapping[str, Sku], besides: str, most: int = 5) -> list[str]:
    sku = skus.get(size)
    if sku is None:
        return []
    return sorted(r for r in sku.zones if r != besides and r not in sku.restricted_regions)[:most]


def _same_gpu_here(size: str, region: str, skus: Mapping[str, Sku]) -> list[str]:
    """Catalogue sizes with the same GPU model that this subscription can have in ``region``."""
    model = GPU_SIZES[size].gpu_model if size in GPU_SIZES else None
    return [s.name for s in GPU_SIZES.values() if model and s.gpu_model == model and s.name != size
            and (k := skus.get(s.name)) and k.offered(region) and region not in k.restricted_regions][:3]


def _check_offer(c: PoolCheck, readings: Readings) -> None:
    """Is the size offered here, to this subscription, in the pool's zones, as spot when the pool is spot?"""
    n, region, sku = c.need, readings.region, readings.skus.get(c.need.vm_size)
    elsewhere = _regions_offering(n.vm_size, readings.skus, region)
    move = f"a region that offers it: {', '.join(elsewhere)}" if elsewhere else None
    alternatives = _same_gpu_here(n.vm_size, region, readings.skus)
    other = f"a size of the same GPU offered here: {', '.join(alternatives)}" if alternatives else None
    if sku is None:
        c.worse(Verdict.NO_FIT, f"Azure lists no VM size {n.vm_size} for this subscription in any region",
                "a size from `az vm list-skus --location " + region + " --resource-type virtualMachines`")
        return
    if not sku.offered(region):
        c.worse(Verdict.NO_FIT, f"{n.vm_size} is not offered in {region}", move)
        if other:
            c.fixes.append(other)
        return
    if region in sku.restricted_regions:
        c.worse(Verdict.NO_FIT, f"{n.vm_size} is restricted for this subscription in {region} "
                f"({sku.restricted_regions[region]})", f"a region access request ({REGION_ACCESS})")
        c.fixes += [f for f in (move, other) if f]
        return
    if n.spot and not sku.spot_capable:
        c.worse(Verdict.NO_FIT, f"{n.vm_size} cannot run as spot", "priority: regular")
        return
    usable = sku.usable_zones(region)
    missing = [z for z in n.zones if z not in usable]
    if missing:
        c.worse(Verdict.NO_FIT, f"{n.vm_size} is not available to this subscription in zone(s) "
                f"{', '.join(missing)} of {region}",
                f"zones: [{', '.join(usable)}]" if usable else "no zones (leave zones empty)")


def _check_spot_score(c: PoolCheck, readings: Readings) -> None:
    scores = readings.spot_scores.get((c.need.pool, c.need.vm_size))
    if scores is None:
        return
    if isinstance(scores, str):
        c.notes.append(f"no spot placement score ({scores})")
        return
    region = readings.region
    here = [s for s in scores if s["region"] == region and
            (not c.need.zones or s.get("availabilityZone") in c.need.zones)]
    known = [s for s in here if s.get("score") in (*GOOD_SCORES, "Low")]
    if not known:
        c.notes.append(f"no spot placement score for {c.need.vm_size} in {region} "
                       f"({', '.join(sorted({s.get('score', '?') for s in here})) or 'none returned'})")
        return
    where = ", ".join(f"zone {s['availabilityZone']} {s['score']}" if s.get("availabilityZone") else s["score"]
                      for s in known)
    if any(s["score"] in GOOD_SCORES for s in known):
        c.notes.append(f"spot placement score for {c.need.max_nodes} VMs: {where}")
        return
    better = [f"{s['region']}" + (f" zone {s['availabilityZone']}" if s.get("availabilityZone") else "")
              for s in scores if s.get("score") == "High" and s["region"] != region]
    c.worse(Verdict.MIN_ONLY, f"spot capacity is scarce: placement score for {c.need.max_nodes} VMs in {region} "
            f"is {where}", ("High in: " + ", ".join(better[:4])) if better else "priority: regular")


def check(needs: Iterable[PoolNeed], readings: Readings) -> list[PoolCheck]:
    """Every pool's verdict from what Azure said. A NAP pool takes the first of its sizes and capacity types that
    fits best (as NAP does when it launches a node), the others' quota counted as they are."""
    needs = list(needs)
    checks = _check_each(needs, readings)
    for i, need in enumerate(needs):
        if not need.alternatives or checks[i].verdict == Verdict.FITS:
            continue
        tried = [checks[i]]
        for size, spot in need.alternatives:
            variant = replace(need, vm_size=size, spot=spot, alternatives=())
            tried.append(_check_each([*needs[:i], variant, *needs[i + 1:]], readings)[i])
        best = min(tried, key=lambda c: c.verdict)  # the first of the best: NAP's own order
        if best is not checks[i]:
            best.notes.append(f"node auto-provisioning falls back to this: {need.vm_size}"
                              f"{' spot' if need.spot else ''} {checks[i].verdict.label}")
        checks[i] = best
    return checks


def _check_feature(c: PoolCheck, readings: Readings) -> None:
    """An InfiniBand pool without AKSInfinibandSupport: its nodes may land on different fabrics, and NCCL's
    InfiniBand transport between them fails (learn.microsoft.com/azure/aks/use-amd-gpus: "Register the
    AKSInfinibandSupport feature")."""
    if not c.need.rdma:
        return
    namespace, feature = INFINIBAND_FEATURE
    state = readings.features.get(f"{namespace}/{feature}", "unknown")
    if state != "Registered":
        c.worse(Verdict.NO_FIT, f"the subscription's {feature} feature is {state}, so the pool's nodes may not share "
                "one InfiniBand fabric", f"az feature register --namespace {namespace} --name {feature}, and once it "
                f"shows Registered, az provider register --namespace {namespace} (docs/deploying.md)")


def _check_each(needs: list[PoolNeed], readings: Readings) -> list[PoolCheck]:
    checks = [PoolCheck(n) for n in needs]
    for c in checks:
        _check_offer(c, readings)
        _check_feature(c, readings)
        _check_reservation(c, readings)
        _check_grant(c, readings)
    _check_provisioning(checks, readings)
    _check_quota(checks, readings)
    for c in checks:
        if c.verdict != Verdict.NO_FIT and c.need.spot:
            _check_spot_score(c, readings)
        running = readings.deployed.get(c.need.pool)
        if running and running.nodes:
            c.notes.append(f"{running.nodes} node(s) running, not counted twice")
        made = sum(1 for pool, _, _ in readings.nap_nodes if c.need.nap and pool == c.need.pool)
        if made:
            c.notes.append(f"{made} NAP node(s) running, not counted twice")
    return checks


def _scope_of(group_id: str) -> tuple[str, str, str]:
    """(subscription, resource group, name) of a capacity reservation group's id."""
    parts = group_id.strip("/").split("/")
    return parts[1], parts[3], parts[-1]


def _in(subscription: str, shared: bool) -> str:
    """The ``--subscription`` an Azure CLI fix needs for a group in another subscription than the deploying one."""
    return f" --subscription {subscription}" if shared else ""


def _reservation_fix(need: PoolNeed, group_id: str, region: str, zones: Iterable[str], capacity: int,
                     shared: bool = False) -> str:
    """The Azure CLI command that creates the reservation a pool needs (capacity-reservation-create); ``zones`` in
    the group's subscription's numbering."""
    subscription, group, name = _scope_of(group_id)
    zones = list(zones)
    command = (f"az capacity reservation create -c {name} -g {group} -n <name> -l {region} --sku {need.vm_size} "
               f"--capacity {capacity}{_in(subscription, shared)}")
    if not zones:
        return command
    return command + f" --zone {zones[0]}" + (f" (one for each zone: {', '.join(zones)})" if len(zones) > 1 else "")


BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64)
"""What one Block reservation may hold (azure-mgmt-compute 39.0.0 ``CapacityReservation.sku``: "For Block capacity
reservations, sku.capacity can only accept values 1, 2, 4, 8, 16, 32, 64")."""
SHARED_RESERVATIONS = "learn.microsoft.com/azure/virtual-machines/capacity-reservation-group-share"
AKS_RESERVATIONS = "learn.microsoft.com/azure/aks/use-capacity-reservation-groups"


def _block_fix(group_name: str, size: str, short: int) -> str:
    """A Block group short of ``short`` VMs: a new Block reservation, since one's capacity cannot be updated
    (``CapacityReservationUpdate``: "sku.capacity cannot be updated for Block Capacity Reservation")."""
    fits = next((b for b in BLOCK_SIZES if b >= short), None)
    amount = f" of {fits} {size}" if fits else f"s of {size} adding up to {short} or more, 64 at most each"
    return (f"a new Block reservation{amount} in {group_name} for the days the stack runs (a Block reservation's "
            f"capacity cannot be updated, and one holds 1, 2, 4, 8, 16, 32 or 64 VMs; aka.ms/blockcapacityreservation)")


def _schedule(c: PoolCheck, reservations: Iterable[Reservation], readings: Readings) -> None:
    """A Block reservation holds VMs only from its start to its end date (``scheduleProfile``, immutable; azure-mgmt-
    compute 39.0.0 ``ScheduleProfile``): said on the line, with whether the stack outlives it."""
    today = readings.now.date()
    for r in reservations:
        start, end = (date.fromisoformat(d[:10]) if d else None for d in (r.start, r.end))
        if start and start > today:
            c.notes.append(f"Block reservation {r.name} starts {start}: until then it holds no VM")
        if end is None:
            continue
        if end < today:
            c.notes.append(f"Block reservation {r.name} ended {end}")
        elif readings.expires is None:
            c.notes.append(f"Block reservation {r.name} ends {end}, and this long-lived stack outlives it")
        elif end < readings.expires.date():
            c.notes.append(f"Block reservation {r.name} ends {end}, before this demo stack expires "
                           f"({readings.expires:%Y-%m-%d})")


def _check_reservation(c: PoolCheck, readings: Readings) -> None:
    """A pool on reserved capacity against its group's reservations: AKS adds the pool without an empty group
    ("the node pool is added to the cluster with a warning and no capacity reservation group gets associated",
    use-capacity-reservation-groups), Azure refuses a VM the group holds no reservation of its size and zone for
    ("If the group doesn't have a reservation matching the size and location, Azure returns an error message";
    a reservation without a zone "supports only non-zonal deployments", REST CapacityReservation ``zones``), and
    the group must also hold the surge node of an upgrade ("When maxSurge > 0, reserve extra capacity for the max
    surge value"). Nodes beyond the reservation are overallocated on ordinary quota, except from a Block group.

    A group shared from another subscription (capacity-reservation-group-share, "Using a shared Capacity Reservation
    Group") takes no quota off: "The Consumer subscription making a deployment in the shared reservation group will
    need to hold its own quota"; and its zones are that subscription's logical zones, which the pool's are compared
    with only through Check Zone Peers ("When deploying a VM or scale set to a shared CRG, you must remap the
    zones"). A group that was not read, or whose zones could not be mapped, takes no quota off either, and the line
    says what was not checked. ``c.reserved`` stays None (every node counted against quota) but where the group was
    read and matched in this subscription."""
    n = c.need
    if not n.reservation:
        return
    subscription, resource_group, group_name = _scope_of(n.reservation)
    needed = n.max_nodes + n.surge
    shared = bool(readings.subscription) and subscription.lower() != readings.subscription.lower()
    group = readings.reservations.get(n.reservation.lower())
    if isinstance(group, str):
        c.notes.append(f"capacity reservation group {group_name} was not read ({group}): whether it holds the "
                       "pool's VMs was not checked, and every node is counted against quota")
        return
    if group is None:
        c.worse(Verdict.NO_FIT, f"capacity reservation group {group_name} does not exist",
                "capacityReservationGroup: an existing group's id (az capacity reservation group list)")
        return
    if bool(n.zones) != bool(group.zones):
        # A reservation in a zone takes only VMs in that zone, one without only VMs without (REST CapacityReservation
        # zones), and a group with zones holds only reservations in them (CapacityReservationGroup zones).
        has = f"has zones ({', '.join(group.zones)}) and the pool none" if group.zones else "has no zones, the pool has"
        c.worse(Verdict.NO_FIT, f"capacity reservation group {group_name} {has}, so no reservation of it can take the "
                f"pool's VMs ({RESERVATIONS})", "zones for the pool, or a group without zones" if group.zones and
                shared else f"zones: [{group.zones[0]}] for the pool, or a group without zones" if group.zones else
                "zones: [] for the pool, or a group with the pool's zones")
        return
    if shared:
        c.notes.append(f"{group_name} is shared from subscription {subscription}: every node draws this "
                       f"subscription's quota too ({SHARED_RESERVATIONS}: the consumer subscription \"will need to "
                       "hold its own quota\")")
    if group.block:
        c.notes.append(f"{group_name} is a Block group, which no AKS document names for node pools "
                       f"({AKS_RESERVATIONS} names no reservation type): unverified on AKS")
    elif group.open:
        c.notes.append(f"{group_name} is an Open group, whose reservations any matching VM takes without naming the "
                       f"group; AKS documents no node pool associated with one ({AKS_RESERVATIONS}): unverified")
    zones = _their_zones(n.zones, readings, subscription, shared)
    if not group.reservations:
        fix = _reservation_fix(n, n.reservation, readings.region, zones or (), needed, shared)
        c.worse(Verdict.NO_FIT, f"capacity reservation group {group_name} holds no reservation, so AKS would add the "
                "pool without it (a warning, no group associated) and its VMs would draw ordinary quota",
                fix if zones is not None else f"{fix} --zone <each of the pool's zones as subscription {subscription} "
                "numbers it (Check Zone Peers)>")
        return
    if zones is None:
        peers = readings.zone_peers.get(subscription.lower())
        c.notes.append(f"zone numbers differ between subscriptions and must be remapped for a shared group "
                       f"({SHARED_RESERVATIONS}), and Check Zone Peers did not map subscription {subscription}'s "
                       f"({peers or 'not asked'}): whether {group_name} holds {n.vm_size} in the pool's zone(s) "
                       f"{', '.join(n.zones)} was not checked")
        return
    theirs = (f" (zone(s) {', '.join(zones)} in subscription {subscription})"
              if shared and n.zones and tuple(zones) != tuple(n.zones) else "")
    same = [r for r in group.reservations if r.vm_size.lower() == n.vm_size.lower()
            and (any(z in zones for z in r.zones) if zones else not r.zones)]
    missing = [(ours, z) for ours, z in zip(n.zones, zones, strict=True) if not any(z in r.zones for r in same)]
    if not same or missing:
        where = f" in zone(s) {', '.join(o for o, _ in missing)}" if missing else ""
        held = sorted({f"{r.vm_size}{' in zone ' + ','.join(r.zones) if r.zones else ''}" for r in group.reservations})
        outside = [z for _, z in missing if z not in group.zones]
        view = f" (its zones are subscription {subscription}'s: the pool's map to {', '.join(zones)})" if theirs else ""
        c.worse(Verdict.NO_FIT, f"capacity reservation group {group_name} holds no reservation of {n.vm_size}{where} "
                f"(it holds {'; '.join(held)}){view}, and Azure refuses a VM the group cannot match ({RESERVATIONS})",
                f"zones among the group's ({', '.join(group.zones)}) for the pool" if outside and not shared else
                "zones the group holds reservations in, mapped to this subscription's, for the pool" if outside else
                _reservation_fix(n, n.reservation, readings.region, [z for _, z in missing], needed, shared))
        return
    capacity, allocated = sum(r.capacity for r in same), sum(r.allocated for r in same)
    deployed = readings.deployed.get(n.pool)
    ours = min(deployed.nodes, allocated) if deployed and deployed.reservation == n.reservation.lower() else 0
    free = max(0, capacity - allocated + ours)
    c.reserved = None if shared else free
    if group.block:
        _schedule(c, same, readings)
    held_here = f"{capacity} {n.vm_size} reserved{' in zone(s) ' + ', '.join(n.zones) if n.zones else ''}{theirs}, " \
                f"{free} free for it"
    if needed <= free:
        c.notes.append(f"takes reserved capacity ({group_name}: {held_here})")
        return
    raise_to = capacity + needed - free
    more = (f"az capacity reservation update -c {group_name} -g {resource_group} -n {same[0].name} --capacity "
            f"{raise_to}{_in(subscription, shared)}" if len(same) == 1 else
            f"raise {group_name}'s {n.vm_size} reservations by {needed - free} (az capacity reservation update)")
    short = f"{group_name}: {held_here}, the pool needs {needed} at max with an upgrade's surge node"
    if group.block:
        c.reserved = max(free, needed)  # nothing beyond it draws quota: Azure gives none
        c.worse(Verdict.MIN_ONLY if n.min_nodes <= free else Verdict.NO_FIT,
                f"{short}, and a Block group gives no VM beyond its reservation",
                _block_fix(group_name, n.vm_size, needed - free))
    else:
        c.notes.append(f"{short}: the other {needed - free} come from ordinary quota without the capacity SLA "
                       f"(capacity-reservation-overallocate), or reserve them: {more}")


def _their_zones(zones: tuple[str, ...], readings: Readings, subscription: str, shared: bool
                 ) -> tuple[str, ...] | None:
    """The pool's ``zones`` as the group's subscription numbers them: as they are in the deploying subscription,
    through Check Zone Peers for a shared group; None where that mapping is unknown."""
    if not shared or not zones:
        return zones
    peers = readings.zone_peers.get(subscription.lower())
    if not isinstance(peers, Mapping) or any(z not in peers for z in zones):
        return None
    return tuple(peers[z] for z in zones)


def _check_grant(c: PoolCheck, readings: Readings) -> None:
    """The cluster's user-assigned identity needs Contributor on the reservation group's resource group before a
    pool joins the group, and a fresh grant "can take up to 60 minutes" to reach AKS
    (use-capacity-reservation-groups). The program grants it just before the cluster: the pool's line says whether
    this deploy makes it, or until when a recent one may not be seen, and what to do; the verdict stays, since the
    pool can be had once the grant is seen."""
    if not c.need.reservation:
        return
    scope = resource_group_of(c.need.reservation)
    made, group = readings.grants.get(scope.lower()), scope.rsplit("/", 1)[-1]
    on = f"the cluster identity's Contributor on resource group {group}"
    if isinstance(made, str):
        c.notes.append(f"{on} was not read: {made}")
        return
    if made is None:
        c.notes.append(f"{on} is granted by this deploy, just before the cluster, and can take up to 60 minutes to "
                       "reach AKS (use-capacity-reservation-groups): if creating the pool then fails with an "
                       "authorization error, run pulumi up again once the hour is up")
        return
    ready = made + GRANT_PROPAGATION
    if readings.now < ready:
        c.notes.append(f"{on} was granted at {made:%Y-%m-%d %H:%M} UTC and can take until {ready:%H:%M} UTC to reach "
                       "AKS (up to 60 minutes, use-capacity-reservation-groups): deploy after then, or run pulumi up "
                       "again then if creating the pool fails with an authorization error")


def _check_provisioning(checks: list[PoolCheck], readings: Readings) -> None:
    """A deployed stack whose node auto-provisioning would change: AKS refuses NAP "on clusters enabled with the
    cluster autoscaler" (node-auto-provisioning: limitations), and the program updates the cluster before its pools;
    and it disables NAP only once no NAP node is left and every NodePool has ``limits.cpu: 0``
    (use-node-auto-provisioning: Disable), which the program's update does not do. Said on the system pool's line:
    the cluster resource that AKS refuses to update declares it."""
    cluster = readings.cluster
    if cluster is None or not checks:
        return
    wanted, on = any(c.need.nap for c in checks), cluster.node_provisioning.lower() == "auto"
    where = f"-g {cluster.resource_group} -n {cluster.name}"
    again = "; or pulumi destroy, then deploy the stack again"
    if wanted and not on:
        autoscaled = sorted(name for name, p in readings.deployed.items() if p.autoscale)
        if autoscaled:
            checks[0].worse(
                Verdict.NO_FIT, "switching NAP on a deployed stack is refused by AKS: the cluster autoscaler is on "
                f"in its pool(s) {', '.join(autoscaled)} (node-auto-provisioning: limitations)",
                f"turn it off in each first (az aks nodepool update -g {cluster.resource_group} --cluster-name "
                f"{cluster.name} -n POOL --disable-cluster-autoscaler), then az aks update {where} "
                f"--node-provisioning-mode Auto, then pulumi up{again}")
    elif on and not wanted:
        checks[0].worse(
            Verdict.NO_FIT, "switching NAP off a deployed stack is refused by AKS until no NAP node is left "
            f"({len(readings.nap_nodes)} now) and every NodePool has limits.cpu 0 (use-node-auto-provisioning: "
            "Disable)", "limits.cpu 0 and the karpenter.azure.com/disable:NoSchedule taint on every NodePool "
            "(default and system-surge too), wait until kubectl get nodes -l karpenter.sh/nodepool lists none, then "
            f"az aks update {where} --node-provisioning-mode Manual, then pulumi up{again}")


def connect(subscription: str) -> Azure:
    """Reads of ``subscription``, signed in with azure-identity's chain (the tests answer from recordings)."""
    return Azure(subscription)


def read(azure: Azure, cfg: StackConfig, needs: list[PoolNeed], now: datetime | None = None) -> Readings:
    """Everything the verdicts need, from Azure, as of ``now`` (the clock by default); the spot scores', reservation
    groups' and grants' failures become notes, others raise."""
    region = cfg.location
    skus = azure.vm_skus()
    usage = azure.usage(region)
    deployed = azure.agent_pools(cfg.naming.resource_group(), cfg.naming.cluster())
    cluster = azure.cluster(cfg.naming.resource_group(), cfg.naming.cluster(), cfg.naming.identity("aks")) \
        if deployed else None
    nap_nodes = azure.nap_nodes(cluster.node_resource_group) \
        if cluster and cluster.node_provisioning.lower() == "auto" else []
    scores: dict[tuple[str, str], list[dict[str, Any]] | str] = {}
    for need in needs:
        for size in dict.fromkeys([need.vm_size, *(s for s, spot in need.alternatives if spot)]):
            sku = skus.get(size)
            if not need.spot or sku is None or not sku.offered(region):
                continue
            regions = [region, *_regions_offering(size, skus, region, most=SPOT_SCORE_MAX_REGIONS - 1)]
            try:
                scores[need.pool, size] = azure.spot_scores(region, size, regions, need.max_nodes,
                                                            zonal=bool(sku.zones.get(region)))
            except AzureReadError as error:
                scores[need.pool, size] = ("the identity may not ask: it needs the Compute Recommendations Role or "
                                           "Contributor on the subscription" if error.status == 403 else str(error))
    features = {}
    if any(n.rdma for n in needs):
        namespace, feature = INFINIBAND_FEATURE
        features[f"{namespace}/{feature}"] = azure.feature_state(namespace, feature)
    reservations, grants = _read_reservations(azure, needs, cluster)
    now = now or datetime.now(UTC)
    expires = None if cfg.lifetime == Lifetime.LONG_LIVED else \
        datetime.fromisoformat(expires_at(now, cfg.ttl_hours).replace("Z", "+00:00"))
    return Readings(region, skus, usage, deployed, scores, features, cluster, tuple(nap_nodes), reservations,
                    _read_zone_peers(azure, region, reservations.values()), grants, now,
                    subscription=azure.subscription, expires=expires)


def _read_zone_peers(azure: Azure, region: str, groups: Iterable[ReservationGroup | str | None]
                     ) -> dict[str, Mapping[str, str] | str]:
    """For each other subscription holding a zonal group the stack uses, how its logical zones map to this
    subscription's (Check Zone Peers); a refusal is the pool's note, as for spot scores."""
    found: dict[str, Mapping[str, str] | str] = {}
    for group in groups:
        if not isinstance(group, ReservationGroup) or not group.zones:
            continue
        other = _scope_of(group.id)[0].lower()
        if other == azure.subscription.lower() or other in found:
            continue
        try:
            found[other] = azure.zone_peers(region, other)
        except AzureReadError as error:
            found[other] = ("the identity may not ask: Reader does not grant Microsoft.Resources/checkZonePeers/action"
                            if error.status == 403 else str(error))
    return found


def _read_reservations(azure: Azure, needs: list[PoolNeed], cluster: DeployedCluster | None
                       ) -> tuple[dict[str, ReservationGroup | str | None], dict[str, datetime | str | None]]:
    """The reservation groups the pools take VMs from, and when the deployed cluster's identity was granted
    Contributor on their resource groups (none before it is deployed: the deploy grants it). A read refused is a
    note on the pool's line, as for spot scores."""
    def why(error: AzureReadError) -> str:
        return "the identity may not read it (Reader)" if error.status == 403 else str(error)
    reservations: dict[str, ReservationGroup | str | None] = {}
    grants: dict[str, datetime | str | None] = {}
    for group in sorted({n.reservation for n in needs if n.reservation}):
        try:
            reservations[group.lower()] = azure.reservation_group(group)
        except AzureReadError as error:
            reservations[group.lower()] = why(error)
        scope = resource_group_of(group)
        if cluster and cluster.control_plane_principal and scope.lower() not in grants:
            try:
                grants[scope.lower()] = azure.grant_made(scope, cluster.control_plane_principal, CONTRIBUTOR)
            except AzureReadError as error:
                grants[scope.lower()] = why(error)
    return reservations, grants


def worst(checks: Iterable[PoolCheck]) -> Verdict:
    return max((c.verdict for c in checks), default=Verdict.FITS)


def as_json(stack: str, region: str, checks: list[PoolCheck]) -> dict:
    """``--json``: the stack's verdict and one object per pool, as the lines and the table say them."""
    return {"stack": stack, "region": region, "verdict": worst(checks).label,
            "pools": [{"pool": c.need.pool, "vmSize": c.need.vm_size, "nodes": c.need.nodes, "verdict": c.verdict.label,
                       "why": c.why, "notes": c.notes, "fixes": c.fixes} for c in checks]}


def markdown(stack: str, region: str, checks: list[PoolCheck]) -> str:
    """The job summary and pull-request comment: a table, then each pool's line."""
    lines = [f"### Capacity for stack `{stack}` in `{region}`: {worst(checks).label}", "",
             *table(["pool", "VM size", "nodes", "verdict", "why", "fix"],
                    [(c.need.pool, f"`{c.need.vm_size}`", c.need.nodes, f"**{c.verdict.label}**",
                      "; ".join(c.why + c.notes) or "-", "; or ".join(c.fixes) or "-") for c in checks])]
    lines += ["", "Quota and placement scores are no promise of capacity: Azure can still refuse an allocation "
              "(AllocationFailed), spot most of all. Checked by `python -m ops capacity`."]
    return "\n".join(lines) + "\n"


FAIL_ON = {"never": Verdict.UNCHECKED + 1, "no-fit": Verdict.NO_FIT, "min-only": Verdict.MIN_ONLY}
"""``--fail-on``: the least severe verdict that makes the command fail (exit 1); the workflows fail on no-fit."""


def exit_code(verdict: Verdict, fail_on: str | None) -> int:
    """The worst verdict as the exit code, or with ``fail_on`` 1 from that verdict on and 0 below it."""
    if fail_on is None:
        return int(verdict)
    return 1 if verdict >= FAIL_ON[fail_on] and verdict != Verdict.UNCHECKED else 0


def _not_checked(args: argparse.Namespace, why: str, first: str | None = None, region: str | None = None) -> int:
    """Say why nothing was checked (``first`` alone on the first line, before any detail) and exit as not checked;
    with ``--json`` the same verdict as JSON on stdout too."""
    if args.json:
        print(json.dumps({"stack": args.stack, "region": region, "verdict": Verdict.UNCHECKED.label,
                          "error": why, "pools": []}))
    if first:
        print(first, file=sys.stderr)
    print(f"capacity of {args.stack}: not checked: {why}", file=sys.stderr)
    if args.markdown:
        with args.markdown.open("a") as out:
            out.write(f"### Capacity for stack `{args.stack}`: not checked\n\n{first or why}\n")
    return exit_code(Verdict.UNCHECKED, args.fail_on)


FREE_TRIAL_OFFER = "FreeTrial_2014-09-01"
"""The quotaId of the Azure free account's offer, Free Trial MS-AZR-0044P (learn.microsoft.com/azure/
cost-management-billing/costs/understand-cost-mgt-data: "Supported Microsoft Azure offers")."""


def acr_tasks_line(cfg: StackConfig, azure: Azure) -> str | None:
    """One line, with its fix, when the stack builds its images with ACR Tasks on a Free Trial subscription: ACR
    Task runs "are temporarily paused from Azure free credits" (learn.microsoft.com/azure/container-registry/
    container-registry-tasks-overview), so its first ``pulumi up`` fails in the image build. Other credit offers are
    not named by Microsoft, so they are not guessed at; a stack that builds with Docker asks nothing."""
    if cfg.build.mode != BuildMode.ACR:
        return None
    try:
        offer = azure.quota_id()
    except AzureReadError:
        return None  # the offer is a hint; the pools' verdicts stand without it
    if offer != FREE_TRIAL_OFFER:
        return None
    return (f"images: build.mode acr runs ACR Tasks, paused on Azure free credits, and this subscription is a Free "
            f"Trial ({offer}): pulumi up fails building the images (TasksOperationsNotAllowed). Fix: build.mode "
            "local, the default (Docker where pulumi up runs), or upgrade the subscription to pay-as-you-go")


def capacity_command(args: argparse.Namespace) -> int:
    from azure.core.exceptions import ClientAuthenticationError
    if problem := unknown_stack(args.stack):
        return error(problem)
    if not (subscription_id := subscription(args.subscription)):
        if signed_out():
            return _not_checked(args, "no subscription to ask", NOT_SIGNED_IN)
        return error(NEEDS_SUBSCRIPTION)
    cfg = stack_config(args.stack)
    needs = pool_needs(cfg)
    # azure-identity logs each credential it tried as a warning; without a sign-in that is a page of noise before
    # the one line that matters, which the command prints itself.
    logging.getLogger("azure.identity").setLevel(logging.ERROR)
    try:
        azure = connect(subscription_id)
        checks = check(needs, read(azure, cfg, needs))
        images = acr_tasks_line(cfg, azure)
    except ClientAuthenticationError:
        return _not_checked(args, "no Azure credential (az login here; the workflows sign in with OIDC)",
                            NOT_SIGNED_IN, region=cfg.location)
    except AzureReadError as e:
        return _not_checked(args, str(e), region=cfg.location)
    if args.json:
        print(json.dumps({**as_json(args.stack, cfg.location, checks), **({"images": images} if images else {})}))
    else:
        for found in checks:
            print(found.line())
        if images:
            print(images)
    report = markdown(args.stack, cfg.location, checks) + (f"\n{images}\n" if images else "")
    if args.markdown:
        with args.markdown.open("a") as out:
            out.write(report)
    if args.comment and worst(checks) != Verdict.FITS:
        args.comment.write_text(report)
    return exit_code(worst(checks), args.fail_on)
