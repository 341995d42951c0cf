"""Carry out a deployed stack's acceptance probes (``program/probes.py``, declared by its scenario) through the e2e
seam (``ops/e2e/tools.py``): kubectl against the stack's cluster, az as the deployer, ``kubectl port-forward`` for
HTTP. Probes run in the order declared, each within its own timeout and what is left of the run's; a hung call
ends at its timeout. A verdict keeps the tail of what the probe saw (a line or two for a pass), with credentials,
subscription and other Azure ids removed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import re
import selectors
import shlex
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from components.azure.storage import blob_batch_command
from components.gpu.node_repair_job import samples
from components.training.jobset import OWNER_UID
from offline.runs import ProbeVerdict
from offline.stack_files import REPO_ROOT
from ops.e2e.tools import ToolFailed, Tools
from program.config.errors import redact
from program.config.schema import StackConfig
from program.outputs import STORAGE_ACCOUNTS
from program.probes import (
    RUN,
    AllReduceVerdict,
    BlobsWritten,
    BlobUpload,
    Content,
    ExistingJob,
    GpuMetricUnderLoad,
    HttpAnswers,
    JobCompletes,
    JobFromTemplate,
    JobRun,
    JobSetFromTemplate,
    Probe,
    problems,
)
from stacks import REGISTRY

T = TypeVar("T")

POLL_S = 15.0
"""Between two looks at something the probe waits for."""
CALL_S = 60.0
"""The longest one kubectl or az call may take (less when the probe has less left)."""
FAILURE_LINES, PASS_LINES = 40, 3
"""What a verdict keeps of what the probe saw."""
_GUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")
"""kubectl's line once a port-forward listens (k8s.io/client-go portforward.go: PortForwarder prints "Forwarding
from %s -> %d" for each listener)."""


def run_id(now: dt.datetime) -> str:
    """The e2e run's id in names (``RUN``): its UTC start to the second, digits only, so it fits Job and blob names."""
    return f"{now.astimezone(dt.UTC):%Y%m%d%H%M%S}"


def scrub(text: str) -> str:
    """``text`` as a run file may keep it: credentials hidden (``program.config.errors.redact``) and every GUID
    (subscription, tenant, client, object ids) replaced."""
    return _GUID.sub("<id>", redact(text))


def tail(lines: list[str], count: int) -> str:
    return "\n".join(line.rstrip() for line in lines[-count:])


class ProbeFailed(Exception):
    """The probe's verdict is a failure: why, in one line."""


class OutOfTime(ProbeFailed):
    """The probe's time ran out before a call."""


DIGITNET_CHECKPOINT = Path("ops/e2e/content/ckpt-00000001.pt")
"""A DigitNet checkpoint as ``docker/jobs/train.py`` writes it after one step on the CPU, committed
(``scripts/e2e_checkpoint.py`` makes it again): the machine that drives a run needs no torch."""


def digitnet_checkpoint() -> bytes:
    return (REPO_ROOT / DIGITNET_CHECKPOINT).read_bytes()


MAKERS: dict[Content, Callable[[], bytes]] = {Content.DIGITNET_CHECKPOINT: digitnet_checkpoint}
"""How each kind of made content is made."""


@dataclass
class Probing:
    """One probe under way: its deadline, what it has seen, the calls it makes."""

    tools: Tools
    cfg: StackConfig
    outputs: Mapping[str, Any]
    run: str
    deadline: dt.datetime
    seen: list[str] = field(default_factory=list)
    made: dict[Content, bytes] = field(default_factory=dict)
    unanswered: dt.datetime | None = None
    """An endpoint probe's latest request that got no expected answer."""

    def left(self) -> float:
        return (self.deadline - self.tools.now()).total_seconds()

    def note(self, text: str) -> None:
        self.seen.extend(text.strip().splitlines())

    def call_timeout(self) -> float:
        left = self.left()
        if left <= 0:
            raise OutOfTime("timed out")
        return max(1.0, min(CALL_S, left))

    def kubectl(self, *args: str) -> str:
        return self.tools.kubectl(*args, timeout_s=self.call_timeout())

    def az(self, *args: str) -> str:
        return self.tools.az(*args, timeout_s=self.call_timeout())

    def fill(self, name: str) -> str:
        return name.replace(RUN, self.run)

    def wait(self, what: str, check: Callable[[], T | None], every: float = POLL_S,
             within: float | None = None) -> T:
        """``check``'s first answer other than None, looking every ``every`` seconds until the deadline (or
        ``within`` seconds from now, if sooner). A call that fails on the way (an API server's hiccup over an hour's
        wait) is noted and the next look tried."""
        ends = self.tools.now() + dt.timedelta(seconds=within) if within is not None else self.deadline

        def left() -> float:
            return min(self.left(), (ends - self.tools.now()).total_seconds())
        while True:
            try:
                found = check()
            except OutOfTime:
                found = None
            except ToolFailed as failed:
                self.note(str(failed))
                found = None
            if found is not None:
                return found
            if left() > 0:
                self.tools.sleep(min(every, left()))
            if left() <= 0:
                raise ProbeFailed(f"timed out waiting for {what}" + (
                    f" ({within / 60:.0f} min)" if within is not None and self.left() > 0 else ""))

    def account(self, role: str) -> str:
        """The storage account of ``role``: the stack's output, else the name the config derives."""
        named = (self.outputs.get(STORAGE_ACCOUNTS) or {}).get(role)
        return str(named) if named else self.cfg.storage_account_name(self.cfg.storage_account(role))


# Runs: started, watched, read.

def start(p: Probing, namespace: str, run: JobRun) -> tuple[str, str]:
    """Start ``run`` where the e2e run starts it; its kind (``job``, ``jobset``) and name."""
    if isinstance(run, ExistingJob):
        return "job", run.name
    if isinstance(run, JobFromTemplate):
        name = f"{run.template}-e2e-{p.run}"
        p.kubectl("-n", namespace, "create", "job", name, f"--from=cronjob/{run.template}")
        p.note(f"created job/{name} from cronjob/{run.template}")
        return "job", name
    create_jobset(p, namespace, run)
    return "jobset", run.name


def create_jobset(p: Probing, namespace: str, run: JobSetFromTemplate) -> None:
    """What the run template's submit command does (components/training/jobset.py RunTemplate): the previous run of
    the name deleted, the kept manifest created with its owner claim's uid filled in."""
    p.kubectl("-n", namespace, "delete", "jobset", run.name, "--ignore-not-found", "--wait=false")
    # Its pods may take longer to go than one call may wait: look until it is gone.
    p.wait(f"the previous jobset/{run.name} to be deleted", lambda: True if not p.kubectl(
        "-n", namespace, "get", "jobset", run.name, "--ignore-not-found", "-o", "name").strip() else None)
    config_map = json.loads(p.kubectl("-n", namespace, "get", "configmap", run.config_map, "-o", "json"))
    text = (config_map.get("data") or {}).get(run.key)
    if not text:
        raise ProbeFailed(f"configmap/{run.config_map} has no {run.key}")
    if OWNER_UID in text:
        owners = json.loads(text)["metadata"].get("ownerReferences") or []
        claim = next((o["name"] for o in owners if o.get("uid") == OWNER_UID), None)
        if claim is None:
            raise ProbeFailed(f"configmap/{run.config_map}: {OWNER_UID} is in no ownerReference")
        uid = p.kubectl("-n", namespace, "get", "pvc", claim, "-o", "jsonpath={.metadata.uid}").strip()
        text = text.replace(OWNER_UID, uid)
    with tempfile.TemporaryDirectory() as folder:
        manifest = Path(folder) / f"{run.name}.json"
        manifest.write_text(text)
        p.kubectl("-n", namespace, "create", "-f", str(manifest))
    p.note(f"created jobset/{run.name} from configmap/{run.config_map}")


FINISHED = {"job": ("Complete", "Failed"), "jobset": ("Completed", "Failed")}
"""The conditions that end a Job (batch/v1 JobConditionType) and a JobSet (jobset.sigs.k8s.io v1alpha2
JobSetConditionType)."""


def finished(p: Probing, namespace: str, kind: str, name: str) -> tuple[bool, str] | None:
    """(succeeded, how) once the run has ended; None while it runs."""
    status = json.loads(p.kubectl("-n", namespace, "get", kind, name, "-o", "json")).get("status") or {}
    done, failed = FINISHED[kind]
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == done:
            return True, f"{kind}/{name} {done.lower()}"
        if condition.get("type") == failed:
            why = ": ".join(x for x in (condition.get("reason"), condition.get("message")) if x)
            return False, f"{kind}/{name} failed{': ' + why if why else ''}"
    return None


JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""What the Job controller labels a Job's pods with (Kubernetes 1.27+: well-known labels)."""


def job_pods(p: Probing, namespace: str, job: str) -> list[dict[str, Any]]:
    found = json.loads(p.kubectl("-n", namespace, "get", "pods", "-l", f"{JOB_NAME_LABEL}={job}", "-o", "json"))
    return sorted(found["items"], key=lambda pod: pod["metadata"].get("creationTimestamp") or "")


def logs(p: Probing, namespace: str, kind: str, name: str, leader: str | None) -> str:
    """The run's log: for a Job its succeeded pod's (else its newest pod's: a Job retried after a spot eviction
    has several), for a JobSet its leader pod's."""
    if kind == "job":
        found = job_pods(p, namespace, name)
        done = [pod for pod in found if (pod.get("status") or {}).get("phase") == "Succeeded"]
        if not (done or found):
            return ""
        pod = (done or found)[-1]["metadata"]["name"]
        return p.kubectl("-n", namespace, "logs", f"pod/{pod}", "--tail=-1")
    if leader is None:
        raise ProbeFailed(f"{kind}/{name}: no leader selector to read a log from")
    return p.kubectl("-n", namespace, "logs", "-l", leader, "--tail=-1")


def upload(p: Probing, given: tuple[BlobUpload, ...]) -> None:
    """Every blob of ``given``, one ``upload-batch`` per container, as the deployer (Entra ID)."""
    by_container: dict[tuple[str, str], list[BlobUpload]] = {}
    for blob in given:
        by_container.setdefault((blob.role, blob.container), []).append(blob)
    for (role, container), blobs in by_container.items():
        with tempfile.TemporaryDirectory() as folder:
            for blob in blobs:
                path = Path(folder) / p.fill(blob.name)
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(blob.content, Content):
                    if blob.content not in p.made:
                        p.made[blob.content] = MAKERS[blob.content]()
                    path.write_bytes(p.made[blob.content])
                else:
                    path.write_bytes(blob.content)
            command = shlex.split(blob_batch_command(p.account(role), container, True, folder))

            # Tried again on a failure, like every wait: a data role `pulumi up` just granted takes minutes to take
            # effect, and until then the upload answers 403. A rerun against a kept stack writes the same names
            # again (Azure/azure-cli#21477: add --overwrite).
            p.wait(f"the upload to {role}/{container}",
                   functools.partial(p.az, *command[1:], "--overwrite", "true"))
        p.note(f"uploaded {len(blobs)} blob(s) to {role}/{container}")


# HTTP through kubectl port-forward.

@contextlib.contextmanager
def forwarded(tools: Tools, namespace: str, target: str, port: int, timeout_s: float) -> Iterator[int]:
    """``kubectl port-forward`` of ``target``'s ``port`` to a free local port, for as long as the block runs; the
    local port. The forward reaches the pod through the API server and kubelet, so no network policy and no
    LoadBalancer stands between (an internal Service answers as a public one does)."""
    argv = [*tools.kubectl_argv, *tools.kubectl_config(), "-n", namespace, "port-forward", target, f":{port}",
            "--address", "127.0.0.1"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield _listening(process, timeout_s)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _listening(process: subprocess.Popen[str], timeout_s: float) -> int:
    """The local port once kubectl says it forwards; ``ToolFailed`` if it exits or stays silent."""
    assert process.stdout is not None
    said: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ends = time.monotonic() + timeout_s
        while (left := ends - time.monotonic()) > 0:
            if not selector.select(left):
                break
            line = process.stdout.readline()
            if not line:
                raise ToolFailed("kubectl port-forward", (said or ["exited"])[-1])
            said.append(line.strip())
            if found := _FORWARDING.search(line):
                return int(found[1])
    raise ToolFailed("kubectl port-forward", f"no answer in {timeout_s:.0f} s", timed_out=True)


def http(url: str, method: str, body: str | None, timeout_s: float) -> tuple[int, str]:
    """Status and body of one request (an error status's too)."""
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"{url}: probes call their port-forward only")
    request = urllib.request.Request(url, data=body.encode() if body is not None else None, method=method,  # noqa: S310 (checked above)
                                     headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 (checked above)
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def fetch(p: Probing, namespace: str, target: str, port: int, path: str, method: str = "GET",
          body: str | None = None) -> tuple[int, str]:
    timeout = p.call_timeout()
    with forwarded(p.tools, namespace, target, port, timeout) as local:
        return http(f"http://127.0.0.1:{local}{path}", method, body, timeout)


# The probes.

def job_completes(p: Probing, probe: JobCompletes) -> str:
    if probe.given:
        upload(p, probe.given)
    kind, name = start(p, probe.namespace, probe.run)
    ok, how = p.wait(f"{kind}/{name} to finish", lambda: finished(p, probe.namespace, kind, name))
    p.note(how)
    text = logs(p, probe.namespace, kind, name, probe.leader)
    p.note(text)
    if not ok:
        raise ProbeFailed(how)
    if probe.log_pattern is not None and not re.search(probe.log_pattern, text, re.MULTILINE):
        raise ProbeFailed(f"{kind}/{name} finished, but its log has no match for {probe.log_pattern!r}")
    return how


def http_answers(p: Probing, probe: HttpAnswers) -> str:
    target = f"service/{probe.service}"

    def answered() -> str | None:
        try:
            status, text = fetch(p, probe.namespace, target, probe.port, probe.path, probe.method, probe.body)
        except (ToolFailed, OSError) as error:
            p.note(f"{probe.method} {probe.path}: {error}")
            p.unanswered = p.tools.now()
            return None
        p.note(f"{probe.method} {probe.path}: HTTP {status}: {text[:500]}")
        if 200 <= status < 300 and re.search(probe.expect, text):
            return text
        p.unanswered = p.tools.now()
        return None

    p.wait(f"{target} to answer {probe.method} {probe.path} with {probe.expect!r}", answered)
    return f"{target} answered {probe.method} {probe.path}"


def blobs_written(p: Probing, probe: BlobsWritten) -> str:
    prefix = p.fill(probe.prefix)

    def listed() -> list[str] | None:
        found = json.loads(p.az("storage", "blob", "list", "--auth-mode", "login", "--account-name",
                                p.account(probe.role), "--container-name", probe.container, "--prefix", prefix))
        names = [b["name"] for b in found]
        p.note(f"{len(names)} blob(s) under {probe.container}/{prefix}: {', '.join(names[:5])}")
        return names if len(names) >= probe.count else None

    names = p.wait(f"{probe.count} blob(s) under {probe.container}/{prefix}", listed)
    return f"{len(names)} blob(s) under {probe.container}/{prefix}"


def pods(p: Probing, namespace: str, selector: str, running: bool = False) -> list[str]:
    found = json.loads(p.kubectl("-n", namespace, "get", "pods", "-l", selector, "-o", "json"))["items"]
    return [pod["metadata"]["name"] for pod in found
            if not running or (pod.get("status") or {}).get("phase") == "Running"]


def gpu_series(p: Probing, probe: GpuMetricUnderLoad, namespace: str) -> dict[str, float]:
    """Each pod of ``namespace`` and its highest GPU series of ``probe.metrics`` on every exporter's page."""
    busy: dict[str, float] = {}
    for exporter in pods(p, probe.exporter_namespace, probe.exporter_selector, running=True):
        try:
            status, page = fetch(p, probe.exporter_namespace, f"pod/{exporter}", probe.exporter_port, "/metrics")
        except (ToolFailed, OSError) as error:  # one exporter out of reach: the others still count
            p.note(f"{exporter}: {error}")
            continue
        if status != 200:
            p.note(f"{exporter}: HTTP {status}")
            continue
        for name, labels, value in samples(page):
            if name in probe.metrics and labels.get("namespace") == namespace and "pod" in labels:
                busy[labels["pod"]] = max(value, busy.get(labels["pod"], 0.0))
    return busy


def gpu_metric_under_load(p: Probing, probe: GpuMetricUnderLoad) -> str:
    loads: list[str] = []

    def start_load() -> None:
        name = f"{probe.load.template}-e2e-{p.run}" + (f"-{len(loads) + 1}" if loads else "")
        p.kubectl("-n", probe.namespace, "create", "job", name, f"--from=cronjob/{probe.load.template}")
        p.note(f"created job/{name} from cronjob/{probe.load.template}")
        loads.append(name)

    def all_busy() -> str | None:
        busy = gpu_series(p, probe, probe.namespace)
        missing = []
        for selector in probe.pods:
            values = {pod: busy[pod] for pod in pods(p, probe.namespace, selector) if pod in busy}
            if not any(v > 0 for v in values.values()):
                missing.append(selector)
            p.note(f"{selector}: {values or 'no series'}")
        if not missing:
            return f"every selector's pods show GPU work under {loads[-1]}"
        if finished(p, probe.namespace, "job", loads[-1]) is not None:
            start_load()  # the load ended before the exporter sampled every pod busy: another round
        return None

    try:
        start_load()
        return p.wait("a GPU series above zero for each service under load", all_busy)
    finally:
        for name in loads:  # the evidence is in the verdict; the Jobs would hold the pool
            with contextlib.suppress(ToolFailed, ProbeFailed):
                p.kubectl("-n", probe.namespace, "delete", "job", name, "--ignore-not-found", "--wait=false")


def allreduce_verdict(p: Probing, probe: AllReduceVerdict) -> str:
    create_jobset(p, probe.namespace, probe.run)
    ok, how = p.wait(f"jobset/{probe.run.name} to finish",
                     lambda: finished(p, probe.namespace, "jobset", probe.run.name))
    p.note(how)
    text = logs(p, probe.namespace, "jobset", probe.run.name, probe.leader)
    p.note(text)
    report = next((r for r in map(_json_object, reversed(text.splitlines())) if r and "verdict" in r), None)
    if report is None:
        raise ProbeFailed(f"{how}, and the leader's log holds no verdict line")
    verdict, best = report["verdict"], report.get("best_busbw_gbps")
    if probe.warn_below is None:
        if verdict != "measured":
            raise ProbeFailed(f"verdict {verdict} (best {best} GB/s) where the size has no thresholds")
        return f"measured {best} GB/s of bus bandwidth (no thresholds published for the size)"
    used = (report.get("warn_below_gbps"), report.get("faulty_below_gbps"))
    if verdict == "measured" or used != (probe.warn_below, probe.faulty_below):
        size = (probe.warn_below, probe.faulty_below)
        raise ProbeFailed(f"the check ran with thresholds (warn, faulty) {used}, the size's are {size}")
    if verdict != "pass":
        raise ProbeFailed(f"verdict {verdict}: best {best} GB/s, below {probe.warn_below} GB/s")
    return f"pass: best {best} GB/s of bus bandwidth, at or above {probe.warn_below}"


def _json_object(line: str) -> dict[str, Any] | None:
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


RUNNERS: dict[type, Callable[[Probing, Any], str]] = {
    JobCompletes: job_completes, HttpAnswers: http_answers, BlobsWritten: blobs_written,
    GpuMetricUnderLoad: gpu_metric_under_load, AllReduceVerdict: allreduce_verdict,
}


def run_probe(probe: Probe, tools: Tools, cfg: StackConfig, outputs: Mapping[str, Any], run: str,
              budget_s: float, made: dict[Content, bytes] | None = None) -> ProbeVerdict:
    """One probe's verdict within ``budget_s``."""
    began = tools.now()
    p = Probing(tools, cfg, outputs, run, began + dt.timedelta(seconds=budget_s), made=made if made is not None else {})
    try:
        p.note(RUNNERS[type(probe)](p, probe))
        passed = True
    except ProbeFailed as failure:
        p.note(f"failed: {failure}")
        passed = False
    except ToolFailed as failure:
        p.note(f"failed: {failure}")
        passed = False
    except (ValueError, KeyError, subprocess.SubprocessError, OSError) as error:
        # An answer not shaped as expected (not JSON, a field missing) or content that could not be made.
        p.note(f"failed: {type(error).__name__}: {error}")
        passed = False
    ended = tools.now()
    seconds = max(0.0, (ended - began).total_seconds())
    endpoint = passed and isinstance(probe, HttpAnswers)
    return ProbeVerdict(name=probe.name, passed=passed, seconds=round(seconds, 1),
                        output=scrub(tail(p.seen, PASS_LINES if passed else FAILURE_LINES)),
                        answered=ended if endpoint else None, unanswered=p.unanswered if endpoint else None)


def run_probes(stack: str, cfg: StackConfig, outputs: Mapping[str, Any], tools: Tools,
               timeout_s: float) -> list[ProbeVerdict]:
    """The verdict of each of the stack's acceptance probes (its scenario's, for ``cfg`` as deployed), all within
    ``timeout_s``. A probe that follows a failed one fails without running."""
    scenario = REGISTRY[cfg.scenario]
    probes = scenario.probes_of(cfg, cfg.settings)
    wrong = problems(probes)
    if wrong:
        return [ProbeVerdict(name=f"{stack}: the scenario's probes", passed=False, seconds=0.0,
                             output="\n".join(wrong))]
    began, run = tools.now(), run_id(tools.now())
    verdicts: list[ProbeVerdict] = []
    made: dict[Content, bytes] = {}
    for probe in probes:
        left = timeout_s - (tools.now() - began).total_seconds()
        after = probe.after if isinstance(probe, BlobsWritten) else None
        if after is not None and not next(v.passed for v in verdicts if v.name == after):
            verdicts.append(ProbeVerdict(name=probe.name, passed=False, seconds=0.0,
                                         output=f"not checked: {after!r} failed"))
        elif left <= 0:
            verdicts.append(ProbeVerdict(name=probe.name, passed=False, seconds=0.0,
                                         output=f"not run: the probes' {timeout_s:.0f} s were spent"))
        else:
            verdicts.append(run_probe(probe, tools, cfg, outputs, run, min(probe.timeout_s, left), made))
    return verdicts
