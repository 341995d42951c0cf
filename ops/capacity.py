"""Can the stack's pools get their VMs? The capacity preflight (``python -m ops capacity --stack NAME``).

For every pool of the stack, in its region, from what Azure says to this subscription:
  - the vCPU quota the pool draws on: the size's family and the region's total for regular VMs, the region's
    low-priority total for spot (learn.microsoft.com/azure/virtual-machines/spot-vms: spot VMs count against
    ``lowPriorityCores`` only); used, limit and what every pool of the stack on it needs at min and at max nodes,
    the stack's own running nodes given back (a second run of a deployed stack does not count them twice);
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
from typing import TYPE_CHECKING, Any

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
    Sku,
    signed_out,
    subscription,
)
from ops.ci_setup import INFINIBAND_FEATURE
from program.markdown import table

if TYPE_CHECKING:
    from program.config.schema import StackConfig

QUOTA_REQUEST = "learn.microsoft.com/azure/quotas/per-vm-quota-requests"
SPOT_QUOTA_REQUEST = "learn.microsoft.com/azure/quotas/spot-quota"
REGION_ACCESS = "learn.microsoft.com/troubleshoot/azure/general/region-access-request-process"
REGIONAL_CORES, SPOT_CORES = "cores", "lowprioritycores"
QUOTA_NAMES = {REGIONAL_CORES: "Total Regional vCPUs", SPOT_CORES: "Total Regional Spot vCPUs"}
GOOD_SCORES = ("High", "Medium")


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
    """The capacity reservation group it takes its VMs from: the reservation already holds their quota."""
    alternatives: tuple[tuple[str, bool], ...] = ()
    """A node auto-provisioning pool: the other (size, spot) NAP may make when this one cannot be had."""
    rdma: bool = False
    """Its nodes talk over InfiniBand (an RDMA size in a stack with the network operator): the subscription needs
    the AKSInfinibandSupport feature for them to share one fabric."""

    @property
    def nodes(self) -> str:
        return f"{self.min_nodes}–{self.max_nodes} {'spot ' if self.spot else ''}nodes"


def pool_needs(cfg: StackConfig) -> list[PoolNeed]:
    """The system pool, the GPU pools, then the CPU pools, as cost.md lists them."""
    pools = [(cfg.cluster.system_pool, False), *((g, g.spot) for g in cfg.gpu_pools),
             *((c, c.spot) for c in cfg.cpu_pools)]
    return [PoolNeed(p.name, p.vm_size, spot, p.min_count, p.max_count, tuple(p.zones),
                     getattr(p, "capacity_reservation_group", None), _nap_alternatives(p),
                     rdma=cfg.addons.network_operator and p.vm_size in GPU_SIZES and GPU_SIZES[p.vm_size].infiniband)
            for p, spot in pools]


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
    deployed: Mapping[str, tuple[str, int, bool]] = field(default_factory=dict)
    """The stack's running pools: name → (VM size, nodes, spot)."""
    spot_scores: Mapping[tuple[str, str], list[dict[str, Any]] | str] = field(default_factory=dict)
    """(spot pool, VM size) → its placement scores, or why there are none."""
    features: Mapping[str, str] = field(default_factory=dict)
    """Preview feature (``namespace/name``) → its registration state, for the features the pools need."""


@dataclass
class PoolCheck:
    need: PoolNeed
    verdict: Verdict = Verdict.FITS
    why: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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
    """The quotas a pool's VMs count against (none for reserved VMs: the reservation counted them)."""
    if need.reservation:
        return ()
    if need.spot:
        return (SPOT_CORES,)
    sku = skus.get(need.vm_size)
    return tuple(b for b in ((sku.family.lower() if sku else ""), REGIONAL_CORES) if b)


def _own_vcpus(readings: Readings) -> dict[str, int]:
    """vCPUs the stack's running nodes already hold, per quota: the usage counts them once."""
    held: dict[str, int] = {}
    for size, nodes, spot in readings.deployed.values():
        need = PoolNeed("", size, spot, nodes, nodes)
        for bucket in _buckets(need, readings.skus):
            held[bucket] = held.get(bucket, 0) + nodes * _vcpus(size, readings.skus)
    return held


def _quota_name(bucket: str, skus: Mapping[str, Sku]) -> str:
    families = {s.family.lower(): s.family for s in skus.values()}
    return QUOTA_NAMES.get(bucket) or f"{families.get(bucket, bucket)} vCPUs"


def _check_quota(checks: list[PoolCheck], readings: Readings) -> None:
    """Each quota against what every pool on it needs at min and at max nodes."""
    held = _own_vcpus(readings)
    demand: dict[str, list[int]] = {}
    for c in checks:
        vcpus = _vcpus(c.need.vm_size, readings.skus)
        for bucket in _buckets(c.need, readings.skus):
            at = demand.setdefault(bucket, [0, 0])
            at[0] += c.need.min_nodes * vcpus
            at[1] += c.need.max_nodes * vcpus
    for c in checks:
        if c.verdict == Verdict.NO_FIT:
            continue  # the size cannot be had here at all: quota is not the problem to fix first
        for bucket in _buckets(c.need, readings.skus):
            used, limit = readings.usage.get(bucket, (0, 0))
            free = limit - used + held.get(bucket, 0)
            at_min, at_max = demand[bucket]
            name = _quota_name(bucket, readings.skus)
            state = f"{name} in {readings.region}: {used} of {limit} used, the stack needs {at_min} at min and " \
                    f"{at_max} at max"
            guide = SPOT_QUOTA_REQUEST if bucket == SPOT_CORES else QUOTA_REQUEST
            request = f"request {name} in {readings.region} raised to {limit - free + at_max} ({guide})"
            if at_max <= free:
                c.notes.append(f"{name} {used}/{limit}")
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
    _check_quota(checks, readings)
    for c in checks:
        if c.verdict != Verdict.NO_FIT and c.need.spot:
            _check_spot_score(c, readings)
        if c.need.reservation:
            c.notes.append(f"takes reserved capacity ({c.need.reservation.rsplit('/', 1)[-1]}), whose reservations "
                           "hold their quota: as many nodes as they reserve")
        running = readings.deployed.get(c.need.pool)
        if running and running[1]:
            c.notes.append(f"{running[1]} node(s) running, not counted twice")
    return checks


def connect(subscription: str) -> Azure:
    """Reads of ``subscription``, signed in with azure-identity's chain (the tests answer from recordings)."""
    return Azure(subscription)


def read(azure: Azure, cfg: StackConfig, needs: list[PoolNeed]) -> Readings:
    """Everything the verdicts need, from Azure; the spot scores' failures become notes, others raise."""
    region = cfg.location
    skus = azure.vm_skus()
    usage = azure.usage(region)
    deployed = azure.agent_pools(cfg.naming.resource_group(), cfg.naming.cluster())
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
    return Readings(region, skus, usage, deployed, scores, features)


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
