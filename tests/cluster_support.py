"""A stack's render on the test control plane (testcluster/): the CRDs its custom resources need, simulated AKS nodes
for its pools, every Kubernetes object it declares applied and deleted in Pulumi's order, and API clients as the
cluster admin or as one of the stack's ServiceAccounts.

What is left out, and why: Helm releases (the render holds a chart's name and values, not its objects; the CRDs a
chart ships are installed from the pinned chart's fixture instead), and patches of objects AKS add-ons own (KEDA's
operator in kube-system), which no add-on creates here.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from components.azure.node_capacity import allocatable
from components.gpu.kube_api import Api
from components.gpu.network_operator import RDMA_HCA_MAX, RDMA_RESOURCE
from components.gpu.sizes import GPU_SIZES, vcpus_of
from offline.render import Render, Resource
from offline.report import is_manifest

FIXTURES = Path(__file__).parent / "fixtures"
HARNESS_GROUPS = {"kueue.x-k8s.io", "jobset.x-k8s.io"}
"""API groups whose CRDs and controllers the harness installs itself (testcluster/cluster.py)."""
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
CPU_GIB_PER_VCPU = 4
"""Memory of the general-purpose sizes the system and CPU pools use (Dds_v5, Das_v5: 4 GiB per vCPU, Azure's
Dv5-series pages)."""
SPOT_LABEL = "kubernetes.azure.com/scalesetpriority"
SPOT_TAINT = {"key": SPOT_LABEL, "value": "spot", "effect": "NoSchedule"}


# The objects a render declares --------------------------------------------------------------------------------

def kubernetes_objects(render: Render) -> list[list[Resource]]:
    """The whole Kubernetes objects the render declares (no Helm release, no patch) in Pulumi's creation order, as
    waves: each object in the wave after the last of what it depends on (its parent included), so a wave can be
    applied at once and the waves deleted in reverse, as the engine does."""
    found = {r.name: r for r in render.resources if is_manifest(r)}
    by_name = {r.name: r for r in render.resources}
    depth: dict[str, int] = {}

    def level(name: str, trail: frozenset[str] = frozenset()) -> int:
        """The wave of ``name``: one past its deepest dependency among the objects (others pass through)."""
        if name in depth:
            return depth[name]
        r = by_name.get(name)
        deps = {*r.depends_on, *([r.parent] if r.parent else [])} - trail - {name} if r else set()
        below = [level(d, trail | {name}) for d in deps]
        depth[name] = max(below, default=-1) + (1 if name in found else 0)
        return depth[name]

    waves: dict[int, list[Resource]] = {}
    for name in sorted(found):
        waves.setdefault(level(name), []).append(found[name])
    return [waves[k] for k in sorted(waves)]


def manifest(r: Resource) -> dict[str, Any]:
    """What Pulumi sends for ``r``: its inputs with secrets shown (the tests' own placeholders)."""
    return {k: v for k, v in r.revealed.items() if k in ("apiVersion", "kind", "metadata", "spec", "data",
                                                              "stringData", "type", "rules", "subjects", "roleRef",
                                                              "webhooks", "automountServiceAccountToken")}


def group_kind(obj: Mapping[str, Any]) -> tuple[str, str]:
    api = obj["apiVersion"]
    return (api.split("/")[0] if "/" in api else "", obj["kind"])


# CRDs from the pinned charts' and operators' fixtures ---------------------------------------------------------

def _crd_facts() -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    found = {}
    for path in sorted(FIXTURES.glob("charts/*/*/crds.json")) + sorted(FIXTURES.glob("crds/*/*/crds.json")):
        for name, facts in json.loads(path.read_text()).items():
            found[(facts["group"], facts["kind"])] = (name, facts)
    return found


def crd(name: str, facts: Mapping[str, Any], storage: str | None = None) -> dict[str, Any]:
    """A CustomResourceDefinition with the fixture's served versions and schemas (as the chart would install it)."""
    versions = list(facts["versions"])
    storage = storage if storage in versions else versions[0]
    plural = name.split(".")[0]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": facts["group"], "scope": facts["scope"],
                     "names": {"kind": facts["kind"], "plural": plural, "singular": facts["kind"].lower(),
                               "listKind": f"{facts['kind']}List"},
                     "versions": [{"name": v, "served": True, "storage": v == storage,
                                   "schema": {"openAPIV3Schema": schema},
                                   "subresources": {"status": {}} if "status" in schema.get("properties", {})
                                   else {}}
                                  for v, schema in facts["versions"].items()]}}


def crds_for(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The CRDs the objects' custom kinds need, but those the harness installs."""
    facts, wanted = _crd_facts(), {}
    for obj in objects:
        group, kind = group_kind(obj)
        custom = "." in group and not group.endswith(".k8s.io")  # *.k8s.io: Kubernetes' own groups
        if custom and group not in HARNESS_GROUPS and (group, kind) not in wanted:
            if (group, kind) not in facts:
                raise LookupError(f"no CRD fixture for {kind}.{group}: add its chart's or operator's CRDs")
            name, found = facts[(group, kind)]
            wanted[(group, kind)] = crd(name, found, obj["apiVersion"].split("/")[1])
    return list(wanted.values())


# Simulated AKS nodes ------------------------------------------------------------------------------------------

def _taint(text: str) -> dict[str, str]:
    """AKS's ``key=value:Effect`` as a Node taint."""
    key_value, effect = text.rsplit(":", 1)
    key, _, value = key_value.partition("=")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def node(name: str, pool: str, vm_size: str, *, labels: Mapping[str, str] = {}, taints: Iterable[dict] = (),
         extended: Mapping[str, str] = {}, mode: str = "user", pool_label: str = "kubernetes.azure.com/agentpool",
         ready: bool = True) -> dict[str, Any]:
    """A Node as AKS registers it (learn.microsoft.com/azure/aks/use-labels), with the allocatable the project's
    node-capacity model gives its size; ``ready`` False leaves KWOK's heartbeat off (it goes NotReady)."""
    size = GPU_SIZES.get(vm_size)
    vcpus = vcpus_of(vm_size)
    free = allocatable(vcpus, size.memory_gib if size else vcpus * CPU_GIB_PER_VCPU)
    alloc = {"cpu": f"{free.cpu_m}m", "memory": f"{free.memory_mi}Mi", "pods": "110", "ephemeral-storage": "100Gi",
             **extended}
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  pool_label: pool, "agentpool": pool, "kubernetes.azure.com/mode": mode,
                  "node.kubernetes.io/instance-type": vm_size, "topology.kubernetes.io/region": "eastus",
                  "topology.kubernetes.io/zone": "0",
                  **({"kubernetes.azure.com/accelerator": "nvidia"} if size else {}), **labels}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": all_labels,
                         "annotations": {**(KWOK_ANNOTATION if ready else {}), "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": list(taints)},
            "status": {"capacity": dict(alloc), "allocatable": alloc, "phase": "Running"}}


def node_name(pool: str, index: int) -> str:
    digest = hashlib.sha256(pool.encode()).hexdigest()[:8]
    return f"aks-{pool}-{int(digest, 16) % 10**8:08d}-vmss{index:06d}"


def gpu_resources(render: Render, pool: str, vm_size: str) -> dict[str, str]:
    """What the device plugins advertise on a node of ``pool``: its GPUs (shares: time-slicing or MPS replicas,
    MIG instances with the single strategy) and, on InfiniBand sizes with the Network Operator, RDMA devices."""
    size = GPU_SIZES.get(vm_size)
    if size is None:
        return {}
    extended = {"nvidia.com/gpu": str(render.cfg.gpu_pool(pool).schedulable_gpus_per_node)}
    if size.infiniband and render.cfg.addons.network_operator:
        extended[RDMA_RESOURCE] = str(RDMA_HCA_MAX)
    return extended


def pool_nodes(render: Render, at: str = "max") -> list[dict[str, Any]]:
    """Nodes for every pool of the render, ``at`` its minimum or its maximum (NAP's: its node limit, or one),
    once past the GPU node gate: labels and taints as AKS and NAP set them."""
    nodes = []
    cluster = next(r for r in render.resources if r.type.endswith(":ManagedCluster"))
    for profile in cluster.revealed.get("agentPoolProfiles") or []:
        count = profile.get("minCount" if at == "min" else "maxCount") or profile.get("count") or 1
        for i in range(count):
            nodes.append(node(node_name(profile["name"], i), profile["name"], profile["vmSize"], mode="system",
                              labels=profile.get("nodeLabels") or {},
                              taints=[_taint(t) for t in profile.get("nodeTaints") or []]))
    for pool in render.resources:
        if pool.type.endswith(":AgentPool"):
            i = pool.revealed
            name = i["agentPoolName"]
            count = (i.get("minCount") if at == "min" else i.get("maxCount")) if i.get("enableAutoScaling") \
                else i.get("count")
            spot = i.get("scaleSetPriority") == "Spot"
            taints = [_taint(t) for t in i.get("nodeTaints") or []]
            if spot and SPOT_TAINT not in taints:
                taints.append(SPOT_TAINT)  # AKS adds it to every spot pool
            for n in range(count or 0):
                nodes.append(node(node_name(name, n), name, i["vmSize"], taints=taints,
                                  labels={**(i.get("nodeLabels") or {}), **({SPOT_LABEL: "spot"} if spot else {})},
                                  extended=gpu_resources(render, name, i["vmSize"])))
        elif pool.type == "kubernetes:karpenter.sh/v1:NodePool":
            spec = pool.revealed["spec"]
            name = pool.revealed["metadata"]["name"]
            sizes = [v for q in spec["template"]["spec"]["requirements"] if q["key"] ==
                     "karpenter.azure.com/sku-name" for v in q["values"]]
            limit = int((spec.get("limits") or {}).get("nodes", 1))
            for n in range(0 if at == "min" else limit):
                nodes.append(node(f"{name}-{n:05d}", name, sizes[0], pool_label="karpenter.sh/nodepool",
                                  labels={**spec["template"]["metadata"].get("labels", {}),
                                          "karpenter.azure.com/sku-name": sizes[0]},
                                  taints=spec["template"]["spec"].get("taints", []),
                                  extended=gpu_resources(render, name, sizes[0])))
    return nodes


# API clients --------------------------------------------------------------------------------------------------

class Admin(Api):
    """The cluster admin (system:masters) over the harness's client certificate, with a few waits."""

    @classmethod
    def of(cls, cluster) -> Admin:
        pki = cluster.workdir / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        return cls(cluster.server, context=context, backoff=0.2)

    def items(self, path: str, **query: str) -> list[dict[str, Any]]:
        return self.get(f"{path}?{urllib.parse.urlencode(query)}" if query else path)["items"]

    def until(self, what: str, check: Callable[[], Any], timeout: float = 30, every: float = 0.25) -> Any:
        """``check()``'s first truthy answer; a TimeoutError naming ``what`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not after {timeout:g} s")
            time.sleep(every)

    def token_of(self, namespace: str, service_account: str) -> str:
        """A token of ``service_account``, as the kubelet mounts one in its pods (TokenRequest)."""
        status, body = self.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 3600}})
        if status != 201:
            raise RuntimeError(f"token of {namespace}/{service_account}: HTTP {status}: {body}")
        return body["status"]["token"]

    def as_service_account(self, namespace: str, service_account: str) -> Api:
        """An API client that is ``service_account``, as the pods of the stack's controllers are."""
        return Api(self.base, self.token_of(namespace, service_account), self.context, backoff=0.2)


def path_of(obj: Mapping[str, Any], plural: str) -> str:
    """The REST path of an object (``plural``: its resource name)."""
    group, _ = group_kind(obj)
    version = obj["apiVersion"].split("/")[-1]
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    namespace = obj["metadata"].get("namespace")
    return f"{prefix}{f'/namespaces/{namespace}' if namespace else ''}/{plural}/{obj['metadata']['name']}"


# A stack's life on the cluster --------------------------------------------------------------------------------

FIELD_MANAGER = "pulumi-kubernetes"
"""The field manager pulumi-kubernetes applies with (its server-side apply mode)."""


def yaml_of(objects: Iterable[Mapping[str, Any]]) -> str:
    """Objects as kubectl reads them: JSON documents are YAML too, one per document."""
    return "\n---\n".join(json.dumps(o) for o in objects)


def apply_waves(cluster, waves: list[list[dict[str, Any]]]) -> list[str]:
    """Server-side apply each wave in turn, as Pulumi creates them; what the API server refused, one line each."""
    refused = []
    for wave in waves:
        done = cluster.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
                               "-f", "-", input=yaml_of(wave), check=False)
        if done.returncode != 0:
            refused += [line for line in done.stderr.splitlines() if line.strip()]
    return refused


SPEC_DIFF = Path(__file__).with_name("kubectl_spec_diff.py")
"""kubectl diff's differ here: objects compared without their status, which controllers change meanwhile."""


def changed_on_second_apply(cluster, waves: list[list[dict[str, Any]]]) -> str:
    """What a second apply of the same objects would change (kubectl diff against a server-side dry run, status
    aside: a running Job's controller updates it between kubectl's read and its dry run): ''."""
    before = os.environ.get("KUBECTL_EXTERNAL_DIFF")
    os.environ["KUBECTL_EXTERNAL_DIFF"] = f"{sys.executable} {SPEC_DIFF}"
    try:
        done = cluster.kubectl("diff", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
                               "-f", "-", input=yaml_of(o for wave in waves for o in wave), check=False)
    finally:
        if before is None:
            os.environ.pop("KUBECTL_EXTERNAL_DIFF")
        else:
            os.environ["KUBECTL_EXTERNAL_DIFF"] = before
    if done.returncode > 1:
        raise RuntimeError(f"kubectl diff failed: {done.stderr}")
    return done.stdout


def delete_waves(cluster, waves: list[list[dict[str, Any]]], timeout: int = 60) -> list[str]:
    """Delete the waves last first, each waited for as Pulumi waits for a deletion; what did not go. In the
    foreground, as pulumi-kubernetes deletes (unless ``pulumi.com/deletionPropagationPolicy`` says otherwise): an
    owner goes once its dependents have (a Deployment's pods, a claim's runs). Objects of the CRDs installed a moment
    ago go in the background: the garbage collector learns a new CRD only at its next discovery, which a
    foreground deletion would wait for (a cluster's CRDs are older than that, and nothing here owns by them)."""
    stuck = []
    for wave in reversed(waves):
        custom = [o for o in wave if "." in group_kind(o)[0] and not group_kind(o)[0].endswith(".k8s.io")]
        for cascade, objects in (("foreground", [o for o in wave if o not in custom]), ("background", custom)):
            if not objects:
                continue
            done = cluster.kubectl("delete", "--ignore-not-found", f"--cascade={cascade}", "--wait=true",
                                   f"--timeout={timeout}s", "-f", "-", input=yaml_of(objects), check=False,
                                   timeout=timeout + 30)
            if done.returncode != 0:
                stuck += [line for line in done.stderr.splitlines() if line.strip()]
    return stuck


def wait_for_garbage_collector(admin: Admin, timeout: float = 90) -> None:
    """Wait until the garbage collector knows the harness's JobSets: it learns CRDs at its discovery, every 30 s,
    and until then leaves their objects' owners waiting (a claim that owns runs never goes). A JobSet owned by a
    ConfigMap that is deleted goes once it does."""
    namespace = "gc-probe"
    admin.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": namespace}})
    status, owner = admin.call("POST", f"/api/v1/namespaces/{namespace}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})
    assert status == 201, owner
    job = {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}
    status, body = admin.call("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "dependent", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "j", "replicas": 1, "template": {"spec": job}}]}})
    assert status == 201, body
    admin.call("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/owner")
    admin.until("the garbage collector's discovery of JobSets",
                lambda: admin.call("GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/"
                                          "dependent")[0] == 404, timeout=timeout, every=1)
    admin.call("DELETE", f"/api/v1/namespaces/{namespace}")
