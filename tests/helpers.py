"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from dataclasses import dataclass
from typing import Any

from offline.mocks import SUBSCRIPTION
from offline.render import Render, render_namespace
from offline.report import is_manifest, manifest
from offline.stack_files import project_defaults, stack_files, stack_namespace

STACKS = sorted(stack_files())
"""Every committed stack, by name: the parameter of each per-stack test, so a failure names its stack."""
API_SERVER_KEYS = ("private", "authorizedIpRanges", "openApiServer")


def with_api_server_decision(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``cluster.openApiServer: true`` (as the committed public stacks have) unless it already
    decides how the API server is reached: every stack must, and most tests are about something else."""
    cluster = config.get("cluster", {})
    if isinstance(cluster, dict) and not any(k in cluster for k in API_SERVER_KEYS):
        return {**config, "cluster": {**cluster, "openApiServer": True}}
    return config


SHAPES: dict[str, dict[str, Any]] = {
    # a private cluster (private registry and storage behind endpoints, local builds) with a time-sliced
    # spot T4 pool at 1-5 and an A100 pool from zero, both on the operator's precompiled driver
    "private-two-pools": {"scenario": "av-resim",
                          "ciRunner": "aksgpu-av-resim",
                          "network": {"addressSpace": "10.40.0.0/16",
                                      "nodeSubnet": "10.40.0.0/20",
                                      "endpointSubnet": "10.40.16.0/24"},
                          "cluster": {"private": True, "skuTier": "Standard"},
                          "gpuPools": [{"name": "nc4ast4",
                                        "vmSize": "Standard_NC4as_T4_v3",
                                        "driver": "precompiled",
                                        "minCount": 1,
                                        "maxCount": 5,
                                        "sharing": {"mode": "time-slicing", "replicas": 2}},
                                       {"name": "nc48a100",
                                        "vmSize": "Standard_NC48ads_A100_v4",
                                        "driver": "precompiled",
                                        "minCount": 0,
                                        "maxCount": 2}],
                          "registry": {"sku": "Premium", "private": True},
                          "build": {"mode": "local"},
                          "storage": {"private": True,
                                      "accounts": [{"role": "input", "containers": ["input"]},
                                                   {"role": "output", "containers": ["output"], "protect": True}]}},
    # a public cluster with one T4 spot pool from zero (its first node with the pool) and the smoke test
    "spot-from-zero": {"scenario": "gpu-basics",
                       "cluster": {"openApiServer": True},
                       "gpuPools": [{"name": "t4",
                                     "vmSize": "Standard_NC4as_T4_v3",
                                     "minCount": 0,
                                     "count": 1,
                                     "maxCount": 2}],
                       "addons": {"smokeTest": True}},
    # the cheapest: a 2-vCPU system node, one T4 spot node at most, a Basic registry, no monitoring or
    # KEDA, long-lived
    "dev-minimal": {"scenario": "gpu-basics",
                    "lifetime": "long-lived",
                    "cluster": {"openApiServer": True,
                                "systemPool": {"vmSize": "Standard_D2ds_v5", "minCount": 1, "maxCount": 2}},
                    "gpuPools": [{"name": "t4",
                                  "vmSize": "Standard_NC4as_T4_v3",
                                  "minCount": 0,
                                  "count": 1,
                                  "maxCount": 1}],
                    "registry": {"sku": "Basic"},
                    "addons": {"smokeTest": True, "keda": False},
                    "monitoring": {"enabled": False}},
    # the GPU function on a T4 spot pool at 1-2, scaled by KEDA, built by ACR Tasks
    "function": {"scenario": "function-gpu",
                 "ttlHours": 8,
                 "cluster": {"openApiServer": True},
                 "gpuPools": [{"name": "t4", "vmSize": "Standard_NC4as_T4_v3", "minCount": 1, "maxCount": 2}],
                 "build": {"mode": "acr"},
                 "function": {"exposure": "internal"}},
    # training from zero on a T4 spot pool at 0-3, checkpoints in blob storage, prediction on a CPU
    # pool, the autoscaler's logs
    "training": {"scenario": "training-autoscale",
                 "cluster": {"openApiServer": True,
                             "autoscaler": {"scaleDownUnneededTime": "5m", "scaleDownDelayAfterAdd": "5m"}},
                 "gpuPools": [{"name": "gpu",
                               "vmSize": "Standard_NC4as_T4_v3",
                               "minCount": 0,
                               "count": 1,
                               "maxCount": 3}],
                 "cpuPools": [{"name": "cpu", "vmSize": "Standard_D4ds_v5", "minCount": 1, "maxCount": 3}],
                 "storage": {"accounts": [{"role": "ckpt", "containers": ["checkpoints"]}]},
                 "monitoring": {"autoscalerLogs": True}},
    # one T4 spot pool at 1-2 shared four ways by time-slicing
    "time-slicing": {"scenario": "gpu-sharing",
                     "ttlHours": 8,
                     "cluster": {"openApiServer": True},
                     "gpuPools": [{"name": "shared",
                                   "vmSize": "Standard_NC4as_T4_v3",
                                   "minCount": 1,
                                   "maxCount": 2,
                                   "sharing": {"mode": "time-slicing", "replicas": 4}}]},
    # one T4 spot pool at 1-2 shared four ways by MPS
    "mps": {"scenario": "gpu-sharing",
            "ttlHours": 8,
            "cluster": {"openApiServer": True},
            "gpuPools": [{"name": "mps",
                          "vmSize": "Standard_NC4as_T4_v3",
                          "minCount": 1,
                          "maxCount": 2,
                          "sharing": {"mode": "mps", "replicas": 4}}]},
    # a T4 GPU pool of node auto-provisioning (three sizes, spot first)
    "nap": {"scenario": "gpu-basics",
            "cluster": {"openApiServer": True, "systemPool": {"minCount": 2, "maxCount": 2}},
            "gpuPools": [{"name": "t4",
                          "provisioning": "nap",
                          "vmSize": "Standard_NC4as_T4_v3",
                          "alternativeVmSizes": ["Standard_NC8as_T4_v3", "Standard_NC16as_T4_v3"],
                          "minCount": 0,
                          "maxCount": 2}],
            "addons": {"smokeTest": True}},
    # vLLM on a T4 spot pool at 1-2, its weights in an image
    "llm": {"scenario": "llm-serving",
            "ttlHours": 8,
            "cluster": {"openApiServer": True},
            "gpuPools": [{"name": "llm", "vmSize": "Standard_NC4as_T4_v3", "minCount": 1, "maxCount": 2}],
            "llm": {"model": "Qwen/Qwen2.5-1.5B-Instruct",
                    "weights": "image",
                    "revision": "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
                    "maxModelLen": 4096}},
    # two ND96isr H100 v5 nodes on InfiniBand from zero, the Network Operator
    "infiniband": {"scenario": "distributed-training",
                   "cluster": {"openApiServer": True},
                   "gpuPools": [{"name": "ndh100",
                                 "vmSize": "Standard_ND96isr_H100_v5",
                                 "driver": "precompiled",
                                 "priority": "regular",
                                 "minCount": 0,
                                 "maxCount": 2}],
                   "storage": {"accounts": [{"role": "ckpt", "containers": ["checkpoints"]}]},
                   "addons": {"networkOperator": True},
                   "distributed": {"nodes": 2}},
}
"""Platform tests render these configs, named for what they exercise, never the committed stack files: a stack file
may change with its scenario without moving a platform test."""


def stack_config_of(stack: str) -> dict[str, Any]:
    """A committed stack's config namespace, for its scenario's own tests to render variants of it."""
    return stack_namespace(stack_files()[stack])


def shape(name: str) -> dict[str, Any]:
    """A copy of one of SHAPES, to render a variant of it with ``render_with``."""
    import copy
    return copy.deepcopy(SHAPES[name])


def render_with(stack: str = "t", subscription: str = SUBSCRIPTION, **config: Any) -> Render:
    """Render a stack whose file would hold ``config`` (keys without ``aksgpu:``), Pulumi.yaml defaults first, as
    deployed into ``subscription``. See ``with_api_server_decision``."""
    return render_namespace(stack, {**project_defaults(), **with_api_server_decision(config)},
                            subscription=subscription)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a workload object (a manifest, or a resource's revealed inputs): a Pod's own, a CronJob's
    Job template's, any other kind's template's."""
    kind = obj.get("kind")
    if kind == "Pod":
        return obj["spec"]
    spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
    return spec["template"]["spec"]


def api_clients(render: Render) -> set[str]:
    """The service accounts (``namespace/name``) a role binding gives Kubernetes API rights: the only pods that may
    carry a token."""
    return {f"{s['namespace']}/{s['name']}" for r in render.resources
            if r.type.endswith((":ClusterRoleBinding", ":RoleBinding"))
            for s in r.revealed["subjects"] if s["kind"] == "ServiceAccount"}


def device_plugin_configs(render: Render) -> list[Any]:
    """The GPU operator's device-plugin ConfigMaps (time-slicing, MPS) of a render."""
    return [r for r in render.of_type("kubernetes:core/v1:ConfigMap") if r.name.endswith("-sharing-config")]


def load(raw: dict[str, Any], stack: str = "test"):
    """A stack's config loaded with the registered scenarios (``cluster.openApiServer: true`` unless ``raw``
    decides how the API server is reached); raises ``ConfigError``."""
    from program.config.loader import load_config
    from stacks import REGISTRY
    return load_config(with_api_server_decision(raw), "aksgpu", stack, REGISTRY)


def jobset_templates(render: Render) -> dict[str, dict[str, Any]]:
    """The JobSets a stack keeps as manifests in ConfigMaps to create on demand (components/training/jobset.py
    RunTemplate): name → the JobSet."""

    from components.training.jobset import MANIFEST_KEY
    found = {}
    for r in render.of_type("kubernetes:core/v1:ConfigMap"):
        if r.revealed["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "run-template":
            jobset = json.loads(r.revealed["data"][MANIFEST_KEY])
            found[jobset["metadata"]["name"]] = jobset
    return found


def jobset_pods(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod template of each replicated job of a JobSet."""
    return [rj["template"]["spec"]["template"] for rj in jobset["spec"]["replicatedJobs"]]


def command(package: str, *args: object, input: str = "", env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    """``python -m PACKAGE ARGS`` run in this process (a process per call cost two seconds of imports each): its
    exit status, stdout and stderr, with ``input`` on stdin and ``env`` as the whole environment. The entry points
    themselves run as processes once (tests/test_workflows.py, tests/test_render.py)."""
    import contextlib
    import importlib
    import io
    import os
    import sys
    from unittest import mock

    main = importlib.import_module(f"{package}.__main__").main
    out, err = io.StringIO(), io.StringIO()
    with (mock.patch.dict(os.environ, env if env is not None else {}, clear=env is not None),
          mock.patch.object(sys, "stdin", io.StringIO(input)),
          contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:  # argparse refusing an argument
            code = exit_.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


# NetworkPolicies evaluated the way Kubernetes does: a pod no policy selects for a direction is open; otherwise some
# selecting policy's rule must match the peer and the port. Tests ask about traffic instead of restating policies.

POD_WORKLOADS = {"Job", "CronJob", "Deployment", "DaemonSet"}
KUBE_DNS = ("kube-system", {"k8s-app": "kube-dns"})
IMDS = "169.254.169.254"
PUBLIC = "203.0.113.10"
VNET = "10.20.4.4"


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict
    ports: dict
    """Named container ports → numbers."""


def manifests_of(render, kind: str) -> list[dict[str, Any]]:
    """The manifests of one kind in a render."""
    return [manifest(r) for r in render.resources if is_manifest(r) and manifest(r)["kind"] == kind]


def pods(render) -> dict[str, Pod]:
    found = {}
    for kind in POD_WORKLOADS:
        for obj in manifests_of(render, kind):
            spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
            template = spec["template"]
            ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])
                     if "name" in p}
            found[obj["metadata"]["name"]] = Pod(obj["metadata"]["namespace"], template["metadata"]["labels"], ports)
    for name, jobset in jobset_templates(render).items():
        for template in jobset_pods(jobset):
            found[name] = Pod(jobset["metadata"]["namespace"], template["metadata"]["labels"], {})
    return found


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _port_matches(rule_ports, port: int, protocol: str, target: Pod | None) -> bool:
    if not rule_ports:
        return True
    for p in rule_ports:
        number = p.get("port")
        if isinstance(number, str):
            number = (target.ports if target else {}).get(number)
        if p.get("protocol", "TCP") == protocol and (number is None or number == port):
            return True
    return False


def _peer_matches(peer: dict, policy_namespace: str, other) -> bool:
    if "ipBlock" in peer:
        if not isinstance(other, str):
            return False
        address = ipaddress.ip_address(other)
        block = peer["ipBlock"]
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except", []))
    if isinstance(other, str):
        return False
    namespace, labels = other
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": namespace}):
            return False
    elif namespace != policy_namespace:
        return False
    return _selects(peer.get("podSelector", {}), labels)


def direction_allows(policies, pod: Pod, direction: str, other, port: int, protocol: str, target: Pod | None):
    selecting = [p for p in policies if p["metadata"]["namespace"] == pod.namespace
                 and _selects(p["spec"]["podSelector"], pod.labels)
                 and direction in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if (peers is None or any(_peer_matches(peer, pod.namespace, other) for peer in peers)) and \
                    _port_matches(rule.get("ports"), port, protocol, target):
                return True
    return False


def allowed(render, source, destination, port: int, protocol: str = "TCP") -> bool:
    """Whether ``source`` (a workload name, or an IP outside the cluster) may reach ``destination`` (a workload
    name, an IP, or ``KUBE_DNS``) on ``port``."""
    policies = manifests_of(render, "NetworkPolicy")
    workloads = pods(render)
    src = workloads.get(source) if isinstance(source, str) else None
    dst = workloads.get(destination) if isinstance(destination, str) else None
    src_peer = (src.namespace, src.labels) if src else source
    dst_peer = (dst.namespace, dst.labels) if dst else destination
    if src and not direction_allows(policies, src, "Egress", dst_peer, port, protocol, dst):
        return False
    return not dst or direction_allows(policies, dst, "Ingress", src_peer, port, protocol, dst)


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that puts a Job in a Kueue LocalQueue."""


def gpu_jobs(render) -> dict[str, tuple[dict, dict]]:
    """Every GPU Job and Job template: name -> (the Job's metadata, its pod spec)."""
    found = {}
    for r in render.resources:
        if r.type == "kubernetes:batch/v1:Job":
            job = manifest(r)
            meta, spec = job["metadata"], job["spec"]
        elif r.type == "kubernetes:batch/v1:CronJob":
            cron = manifest(r)
            meta, spec = cron["spec"]["jobTemplate"]["metadata"], cron["spec"]["jobTemplate"]["spec"]
            meta = {**meta, "name": cron["metadata"]["name"], "namespace": cron["metadata"]["namespace"]}
        else:
            continue
        pod = spec["template"]["spec"]
        if any("nvidia.com/gpu" in c["resources"].get("limits", {}) for c in pod["containers"]):
            found[meta["name"]] = (meta, spec)
    for name, jobset in jobset_templates(render).items():  # a JobSet is queued as a whole, with its label
        for replicated in jobset["spec"]["replicatedJobs"]:
            found[name] = (jobset["metadata"], replicated["template"]["spec"])
    return found


def data_identities(render) -> set[str]:
    """Names of the workload identities that touch data (KEDA's reads metrics, test_autoscaling.py)."""
    return {u.inputs["resourceName"] for u in render.of_type("azure-native:managedidentity:UserAssignedIdentity")
            if u.name != "identity-keda-identity"}


def pod_templates(render):
    """(workload kind and name, pod spec) of every Deployment, Job and Job template."""
    for r in render.resources:
        kind = r.type.rsplit(":", 1)[-1]
        if kind in ("Deployment", "Job", "CronJob"):
            spec = r.revealed["spec"]
            spec = spec["jobTemplate"]["spec"] if kind == "CronJob" else spec
            yield f"{kind}/{r.revealed['metadata']['name']}", spec["template"]["spec"]
    for name, jobset in jobset_templates(render).items():
        for template in jobset_pods(jobset):
            yield f"JobSet/{name}", template["spec"]


def job_specs(render):
    """(kind and name, Job spec) of every Job, CronJob's Job template and JobSet's replicated job."""
    for r in render.resources:
        kind = r.type.rsplit(":", 1)[-1]
        if kind in ("Job", "CronJob"):
            spec = r.revealed["spec"]
            yield f"{kind}/{r.revealed['metadata']['name']}", spec["jobTemplate"]["spec"] if kind == "CronJob" else spec
    for name, jobset in jobset_templates(render).items():
        for replicated in jobset["spec"]["replicatedJobs"]:
            yield f"JobSet/{name}/{replicated['name']}", replicated["template"]["spec"]


DEPLOYMENT, JOB, CRONJOB, SERVICE = ("kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job",
                                     "kubernetes:batch/v1:CronJob", "kubernetes:core/v1:Service")
"""Resource types the scenario tests look for."""


def gpus(pod: dict[str, Any]) -> int:
    """``nvidia.com/gpu`` a pod spec's containers ask for."""
    return sum(int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) for c in pod["containers"])


def unreadable(monkeypatch, name: str, error: OSError) -> None:
    """Reading a file called ``name`` raises ``error``, as on a blob mount that failed; other files read as usual."""
    from pathlib import Path
    read = Path.read_bytes

    def dead_mount(path: Path) -> bytes:
        if path.name == name:
            raise error
        return read(path)
    monkeypatch.setattr(type(Path()), "read_bytes", dead_mount)
