"""What one end-to-end run on Azure found (``python -m ops e2e``): the record it writes, and what reads it offline.

A run deploys a stack with `pulumi up`, measures its phases from authoritative timestamps, runs the scenario's
acceptance probes, drills a spot eviction where the scenario has a spot drill, destroys the stack and looks for
anything left. It writes one file into ``RESULTS``, named ``e2e-<stack>-<UTC stamp>.json``, which a pull request
commits; the scoreboard (``docs/scoreboard.md``) and the timeline estimate read the committed ones. ``RUN_SCHEMA``
is the file's JSON Schema, generated from ``Run`` (``python -m offline docs``), so tools other than this project can
check a result.

Times: every phase is seconds from its clock's zero, named by ``Phase.clock``: the start of `pulumi up`; the
moment a pending GPU pod asked for a node (scale from zero); the evicted spot node's going (the spot drill); the
start of `pulumi destroy`.
Nothing in a run is a secret: no token, key, connection string, SAS or subscription id (the e2e command removes
them from probe output before it writes).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from offline.stack_files import REPO_ROOT

RESULTS = Path("docs/results")
RUN_PREFIX = "e2e-"
RUN_SCHEMA = Path("docs/results/e2e-run.schema.json")
SCHEMA_VERSION = 1


class Clock(StrEnum):
    UP = "up"
    """From the start of `pulumi up`."""
    SCALE_UP = "scale-up"
    """From the moment a pending GPU pod asked for a node the pool did not have (scale from zero)."""
    EVICTION = "eviction"
    """From the moment the spot GPU node the drill had Azure evict went, as Kubernetes recorded it (its Ready
    condition leaving True, its deletion, or the evicted pod's termination, whichever came first), not from the
    simulate-eviction call, which Azure carries out within 30 minutes."""
    DESTROY = "destroy"
    """From the start of `pulumi destroy`."""


class PhaseName(StrEnum):
    """The phases a run measures; each clock's phases in the order they happen."""

    UP = "up"
    """`pulumi up` finished (Pulumi engine events)."""
    CLUSTER_READY = "cluster-ready"
    """The managed cluster's create finished (Pulumi engine events)."""
    GPU_NODE_READY = "gpu-node-ready"
    """The first GPU node's Ready condition turned True (its lastTransitionTime)."""
    DRIVER_READY = "driver-ready"
    """The GPU driver on that node is loaded: the operator's driver pod Ready, or the node Ready with AKS's driver."""
    DEVICE_PLUGIN_READY = "device-plugin-ready"
    """The device plugin pod on that node turned Ready."""
    GPU_ALLOCATABLE = "gpu-allocatable"
    """The node first advertised ``nvidia.com/gpu`` (observed by polling: Kubernetes keeps no timestamp for it)."""
    GPU_POD_READY = "gpu-pod-ready"
    """The first of the scenario's GPU pods turned Ready (or its Job's pod finished)."""
    ENDPOINT_ANSWERING = "endpoint-answering"
    """The scenario's endpoint first answered its probe (the first endpoint probe's first expected answer, measured
    only where a request before it got none: the moment is then known to within one look)."""
    DESTROY = "destroy"
    """`pulumi destroy` finished (Clock.DESTROY)."""
    NODE_REPLACED = "node-replaced"
    """A new node of the pool is Ready (scale-up and eviction clocks)."""
    RUN_RESUMED = "run-resumed"
    """The training run logged its first step after resuming from its checkpoint (eviction clock)."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class Phase(Model):
    name: PhaseName
    clock: Clock = Clock.UP
    measured_seconds: Annotated[float, Field(ge=0)] | None
    """None: the run did not get there (the step before it failed, or the stack has no such phase)."""
    estimated_seconds: Annotated[float, Field(ge=0)] | None = None
    """What the render's estimate says for the same phase (offline/estimates), when it has one."""
    source: str
    """Where the measured time comes from: ``pulumi engine event``, ``Node/<name> Ready``, ``poll``, ..."""


class Pool(Model):
    name: str
    vm_size: str
    spot: bool
    min_count: Annotated[int, Field(ge=0)]
    max_count: Annotated[int, Field(ge=0)]


class Outcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    TIMED_OUT = "timed-out"
    INTERRUPTED = "interrupted"


class StepName(StrEnum):
    PREFLIGHT = "preflight"
    UP = "up"
    PROBES = "probes"
    DRILL = "drill"
    DESTROY = "destroy"
    LEFTOVERS = "leftovers"


class Step(Model):
    step: StepName
    outcome: Outcome
    seconds: Annotated[float, Field(ge=0)]
    detail: str = ""
    """Why it failed or was skipped, in one line."""


class ProbeVerdict(Model):
    name: str
    passed: bool
    seconds: Annotated[float, Field(ge=0)]
    output: str = ""
    """The last lines of what the probe saw (secrets removed): kept for a failure, shortened for a pass."""
    answered: dt.datetime | None = None
    """When an endpoint probe first got its expected answer (the run's ``endpoint-answering`` phase)."""
    unanswered: dt.datetime | None = None
    """An endpoint probe's last request before ``answered`` that got no expected answer: the endpoint came up between
    the two. None with ``answered``: its first request got the answer (the endpoint was up before the probe
    asked)."""


class Drill(Model):
    pool: str
    node: str
    """The evicted node."""
    weights_match: bool | None
    """The resumed run's final weights equal an uninterrupted run's; None: the run did not finish."""
    resumed_from: Annotated[int, Field(ge=0)] | None = None
    """The step the evicted run went on from in its new pod (its checkpoint); 0 is a restart, not a resume; None:
    it did not go on."""
    eviction_seconds: Annotated[float, Field(ge=0)] | None = None
    """From Azure's simulate-eviction call to the node's going (Azure evicts within 30 minutes of the call); None:
    it did not go."""


class Leftover(Model):
    id: str
    """The Azure resource id (or the role assignment's, or the federated credential's)."""
    kind: str
    """Its type, e.g. ``Microsoft.Network/publicIPAddresses``, ``roleAssignment``, ``federatedCredential``."""


class Run(Model):
    """One end-to-end run of one stack."""

    schema_version: int = SCHEMA_VERSION
    stack: str
    scenario: str
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{7,40}$")]
    region: str
    started: dt.datetime
    finished: dt.datetime
    pools: tuple[Pool, ...]
    steps: tuple[Step, ...]
    phases: tuple[Phase, ...]
    probes: tuple[ProbeVerdict, ...] = ()
    drill: Drill | None = None
    leftovers: tuple[Leftover, ...] = ()
    cost_usd: Annotated[float, Field(ge=0)] | None
    """What the run cost, from the price table and how long each pool's nodes ran; None: no price for a size."""
    passed: bool
    """Every step ok or skipped, every probe passed, nothing left over."""

    @property
    def file_name(self) -> str:
        return f"{RUN_PREFIX}{self.stack}-{self.started.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}.json"

    def phase(self, name: PhaseName, clock: Clock = Clock.UP) -> Phase | None:
        return next((p for p in self.phases if p.name == name and p.clock == clock), None)


def run_schema() -> dict[str, object]:
    """The JSON Schema of a run file (committed as ``RUN_SCHEMA``)."""
    return Run.model_json_schema()


RUN_FILE = re.compile(rf"^{RUN_PREFIX}(?P<stack>[a-z0-9-]+)-\d{{8}}T\d{{6}}Z\.json$")


def run_files(root: Path = REPO_ROOT) -> list[Path]:
    """The committed run files, oldest first (their names sort by stack, then time)."""
    return sorted((p for p in (root / RESULTS).glob(f"{RUN_PREFIX}*.json") if RUN_FILE.match(p.name)),
                  key=lambda p: p.name)


def load_runs(root: Path = REPO_ROOT) -> list[Run]:
    """Every committed run, validated against ``Run`` (a bad file fails loudly: it is committed data)."""
    return [Run.model_validate_json(p.read_text()) for p in run_files(root)]


def latest_runs(runs: Iterable[Run]) -> dict[str, Run]:
    """Each stack's latest run."""
    latest: dict[str, Run] = {}
    for run in sorted(runs, key=lambda r: r.started):
        latest[run.stack] = run
    return latest
