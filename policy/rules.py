"""The policy pack's rules as plain functions over resource inputs: standard library only, so they run in the
policy pack's own environment (``pulumi preview --policy-pack policy``) and in the project's tests alike.

A resource rule takes a resource's inputs as the engine sends them (camelCase, as ``python -m offline render``
writes them) and yields one line per violation. A stack rule takes every resource of the stack. ``evaluate``
and ``evaluate_stack`` never raise:

- a value unknown during ``pulumi preview`` (computed from another resource's outputs) makes the rule pass for
  now; the engine runs the pack again during ``pulumi up`` with the values known;
- malformed input (a wrong type where an object or list is expected) is a violation naming the property;
- anything else that goes wrong in a rule is a violation naming the rule, never a crash of the pack.

Sources: ``reliability-anchors.md`` section 6 (requirement numbers in each rule's ``source``), the AKS docs named
there, and docs/security.md, which lists every rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# The engine's placeholders for values unknown during preview (pulumi_policy.proxy, pulumi.runtime.rpc).
UNKNOWN_VALUES = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
})

SECURITY_EXCEPTION = "security-exception"
"""Tag naming a resource's one deliberate departure from these rules (program/config/schema.py, same name)."""
OPEN_API_SERVER = "open-api-server"
BASELINE_OPERATOR_PODS = "baseline-operator-pods"
RDMA_MEMORY_LOCK = "rdma-memory-lock"
EXCEPTIONS = {
    OPEN_API_SERVER: "apiServerAccessProfile",
    BASELINE_OPERATOR_PODS: "pod-security.kubernetes.io/enforce",
    RDMA_MEMORY_LOCK: "pod-security.kubernetes.io/enforce",
}
"""Each exception the rules accept, and the property it excuses: on a resource without that property the tag
means nothing, so it is a mistake. The namespace one is a label, not a tag: a workload namespace at baseline."""
OPERATOR_NAMESPACES = frozenset({"gpu-operator", "node-feature-discovery", "network-operator", "kube-system"})
"""Where privileged pods may run: the GPU and InfiniBand drivers, the toolkit, NFD and the RDMA device plugin load
kernel modules and read host devices."""

MC = "azure-native:containerservice:ManagedCluster"
AGENT_POOL = "azure-native:containerservice:AgentPool"
REGISTRY = "azure-native:containerregistry:Registry"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
BLOB_CONTAINER = "azure-native:storage:BlobContainer"
RESOURCE_GROUP = "azure-native:resources:ResourceGroup"
PRIVATE_ENDPOINT = "azure-native:network:PrivateEndpoint"
RELEASE = "kubernetes:helm.sh/v3:Release"
SERVICE = "kubernetes:core/v1:Service"
NAMESPACE = "kubernetes:core/v1:Namespace"
GPU_NODE_OS = "Ubuntu"
"""The GPU pools' OS where the operator installs a driver (components/vocabulary.py GPU_NODE_OS, same value)."""
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
WORKLOADS = ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:StatefulSet",
             "kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob", "kubernetes:core/v1:Pod")

ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
GPU_SIZE = re.compile(r"^Standard_N", re.IGNORECASE)
"""Azure's GPU families (NC, ND, NV) all start with N."""
SPOT_TAINT = "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"
GPU = "nvidia.com/gpu"
POOL_LABEL = "kubernetes.azure.com/agentpool"
NAP_NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NAP_NODECLASS = "kubernetes:karpenter.azure.com/v1beta1:AKSNodeClass"
NAP_POOL_LABEL = "karpenter.sh/nodepool"
"""Node auto-provisioning (Karpenter) labels every node it makes with its NodePool's name."""
MIN_MAX_PODS = 50
"""checkov CKV_AZURE_168: 30 pods per node (Azure CNI's old default) starves DaemonSet-heavy GPU nodes."""
MAX_SAS_DAYS = 365
MIN_OPERATOR_TIMEOUT = 600
EXPIRES_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class Unknown(Exception):
    """A value the rule needs is not known yet (preview)."""


class Malformed(Exception):
    """The input does not have the shape the resource's schema gives it."""


_MISSING = object()


def is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value in UNKNOWN_VALUES


def at(value: Any, *path: str | int, default: Any = None) -> Any:
    """``value[path[0]][path[1]]...``: ``default`` where a key is missing, ``Unknown`` where a value is unknown,
    ``Malformed`` where an object or list is something else."""
    where: list[str | int] = []
    for key in path:
        if is_unknown(value):
            raise Unknown(".".join(map(str, where)))
        where.append(key)
        if isinstance(key, int):
            if not isinstance(value, list):
                raise Malformed(f"{'.'.join(map(str, where[:-1])) or 'input'} must be a list")
            if key >= len(value):
                return default
            value = value[key]
        else:
            if not isinstance(value, Mapping):
                raise Malformed(f"{'.'.join(map(str, where[:-1])) or 'input'} must be an object")
            if key not in value or value[key] is None:
                return default
            value = value[key]
    if is_unknown(value):
        raise Unknown(".".join(map(str, where)))
    return value


def objects(value: Any, where: str) -> list[Mapping[str, Any]]:
    """A list of objects, or Malformed."""
    if not isinstance(value, list) or not all(isinstance(v, Mapping) or is_unknown(v) for v in value):
        raise Malformed(f"{where} must be a list of objects")
    if any(is_unknown(v) for v in value):
        raise Unknown(where)
    return value


def strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Malformed(f"{where} must be a list of strings")
    if any(is_unknown(v) for v in value):
        raise Unknown(where)
    return value


def tags(props: Mapping[str, Any]) -> Mapping[str, Any]:
    value = at(props, "tags", default={})
    if not isinstance(value, Mapping):
        raise Malformed("tags must be an object")
    return value


@dataclass(frozen=True)
class Resource:
    """One resource of a stack, for the stack rules."""

    type: str
    name: str
    props: Mapping[str, Any]


Check = Callable[[Mapping[str, Any]], Iterable[str]]
StackCheck = Callable[[list[Resource]], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class Rule:
    name: str
    """The policy's name in the pack (lowercase, hyphens)."""
    description: str
    source: str
    """Where the requirement comes from."""
    types: tuple[str, ...]
    """Resource types it applies to; an entry ending in ``:`` is a prefix (``azure-native:``)."""
    check: Check

    def applies(self, resource_type: str) -> bool:
        return any(resource_type == t or (t.endswith(":") and resource_type.startswith(t)) for t in self.types)


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    source: str
    check: StackCheck
    """Yields (resource name, message)."""


def evaluate(rule: Rule, resource_type: str, props: Any) -> list[str]:
    """The rule's violations for one resource: a pass while values are unknown, never an exception."""
    if not rule.applies(resource_type):
        return []
    try:
        if is_unknown(props):
            return []
        if not isinstance(props, Mapping):
            raise Malformed("the resource's inputs must be an object")
        return list(rule.check(props))
    except Unknown:
        return []
    except Malformed as error:
        return [f"malformed input: {error}"]
    except Exception as error:  # noqa: BLE001 - a policy reports, it never crashes the preview
        return [f"could not be checked ({type(error).__name__}: {error}); fix the input or the rule"]


def evaluate_stack(rule: StackRule, resources: list[Resource]) -> list[tuple[str, str]]:
    try:
        return list(rule.check(resources))
    except Unknown:
        return []
    except Malformed as error:
        return [("", f"malformed input: {error}")]
    except Exception as error:  # noqa: BLE001
        return [("", f"could not be checked ({type(error).__name__}: {error}); fix the input or the rule")]


# Azure: the cluster ---------------------------------------------------------------------------------------------

def aks_entra_id_and_rbac(p: Mapping[str, Any]) -> Iterator[str]:
    if at(p, "enableRBAC") is not True:
        yield "enableRBAC must be true"
    if at(p, "aadProfile", "managed") is not True or at(p, "aadProfile", "enableAzureRBAC") is not True:
        yield "aadProfile must be managed Entra ID with enableAzureRBAC: true"
    if at(p, "disableLocalAccounts") is not True:
        yield "disableLocalAccounts must be true: local admin certificates are a non-auditable backdoor"


def aks_api_server_access(p: Mapping[str, Any]) -> Iterator[str]:
    private = at(p, "apiServerAccessProfile", "enablePrivateCluster", default=False)
    ranges = strings(at(p, "apiServerAccessProfile", "authorizedIPRanges", default=[]),
                     "apiServerAccessProfile.authorizedIPRanges")
    if any(r in ("0.0.0.0/0", "::/0") for r in ranges):
        yield "apiServerAccessProfile.authorizedIPRanges must not contain 0.0.0.0/0"
    elif not (private is True or ranges or tags(p).get(SECURITY_EXCEPTION) == OPEN_API_SERVER):
        yield ("a public API server needs apiServerAccessProfile.authorizedIPRanges, enablePrivateCluster: true, "
               f"or the tag {SECURITY_EXCEPTION}: {OPEN_API_SERVER} (config cluster.openApiServer)")


def aks_network_policy(p: Mapping[str, Any]) -> Iterator[str]:
    if at(p, "networkProfile", "networkPlugin") != "azure":
        yield "networkProfile.networkPlugin must be azure (Azure CNI)"
    if at(p, "networkProfile", "networkPolicy") not in ("azure", "calico", "cilium"):
        yield "networkProfile.networkPolicy must be set (cilium, calico or azure): NetworkPolicies do nothing without"


def _pool_hardening(pool: Mapping[str, Any], where: str) -> Iterator[str]:
    if at(pool, "enableNodePublicIP") is True:
        yield f"{where}enableNodePublicIP must be false"
    max_pods = at(pool, "maxPods")
    if not isinstance(max_pods, int) or max_pods < MIN_MAX_PODS:
        yield f"{where}maxPods must be set to {MIN_MAX_PODS} or more (got {max_pods})"


def aks_node_hardening(p: Mapping[str, Any]) -> Iterator[str]:
    if "agentPoolName" in p:  # an AgentPool
        yield from _pool_hardening(p, "")
        return
    for i, pool in enumerate(objects(at(p, "agentPoolProfiles", default=[]), "agentPoolProfiles")):
        yield from _pool_hardening(pool, f"agentPoolProfiles[{i}].")
    if at(p, "autoUpgradeProfile", "upgradeChannel", default="none") == "none":
        yield "autoUpgradeProfile.upgradeChannel must not be none (patch, stable, rapid or node-image)"


def aks_pools(p: Mapping[str, Any]) -> Iterator[str]:
    if "agentPoolName" not in p:  # the cluster: its inline pools are the system pools
        for i, pool in enumerate(objects(at(p, "agentPoolProfiles", default=[]), "agentPoolProfiles")):
            if at(pool, "scaleSetPriority") == "Spot":
                yield f"agentPoolProfiles[{i}] is spot: the system pool must be regular (AKS evicts spot nodes)"
            if GPU_SIZE.match(str(at(pool, "vmSize", default=""))):
                yield f"agentPoolProfiles[{i}].vmSize is a GPU size: GPU pools are separate AgentPools"
        return
    if not GPU_SIZE.match(str(at(p, "vmSize", default=""))):
        return
    if at(p, "mode") != "User":
        yield "a GPU pool must be mode User (never carry system pods)"
    if at(p, "enableAutoScaling") is not True:
        yield "a GPU pool must autoscale (enableAutoScaling: true): idle GPUs are the largest cost"
    low, high = at(p, "minCount"), at(p, "maxCount")
    if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high):
        yield f"a GPU pool needs 0 <= minCount <= maxCount (got {low}, {high})"
    if at(p, "scaleSetPriority") == "Spot":
        if at(p, "scaleSetEvictionPolicy", default="Delete") != "Delete":
            yield "a spot GPU pool must evict with Delete (Deallocate keeps quota and disks)"
        price = at(p, "spotMaxPrice", default=-1)
        if not isinstance(price, (int, float)) or not (price == -1 or price > 0):
            yield f"spotMaxPrice must be -1 (never evicted for price) or a positive price (got {price})"
        if SPOT_TAINT not in strings(at(p, "nodeTaints", default=[]), "nodeTaints"):
            yield f"a spot pool must declare the taint AKS adds ({SPOT_TAINT}), so pods that tolerate it are chosen"


# Azure: registry, roles, storage, resource groups, exceptions ----------------------------------------------------

def acr_locked_down(p: Mapping[str, Any]) -> Iterator[str]:
    if at(p, "adminUserEnabled") is True:
        yield "adminUserEnabled must be false: pulls use the kubelet identity's AcrPull role"
    if at(p, "anonymousPullEnabled") is True:
        yield "anonymousPullEnabled must be false"
    if at(p, "publicNetworkAccess") == "Disabled" and at(p, "sku", "name") != "Premium":
        yield "a registry without public access needs the Premium sku (private endpoints are Premium-only)"


def acr_pull_to_a_service_principal(p: Mapping[str, Any]) -> Iterator[str]:
    if not str(at(p, "roleDefinitionId", default="")).endswith(ACR_PULL):
        return
    if at(p, "principalType") != "ServicePrincipal":
        yield "the AcrPull assignment must send principalType: ServicePrincipal (the kubelet identity)"
    if "/Microsoft.ContainerRegistry/registries/" not in str(at(p, "scope", default="")):
        yield "the AcrPull assignment must be scoped to the registry, not wider"


def _sas_days(period: Any) -> float | None:
    match = re.fullmatch(r"(\d+)\.(\d{2}):(\d{2}):(\d{2})", str(period))
    if not match:
        return None
    days, hours, minutes, seconds = map(int, match.groups())
    return days + (hours * 3600 + minutes * 60 + seconds) / 86400


def storage_secure(p: Mapping[str, Any]) -> Iterator[str]:
    if "containerName" in p:  # a BlobContainer
        if at(p, "publicAccess", default="None") != "None":
            yield "publicAccess must be None"
        return
    if at(p, "enableHttpsTrafficOnly") is not True:
        yield "enableHttpsTrafficOnly must be true"
    if at(p, "minimumTlsVersion") != "TLS1_2":
        yield "minimumTlsVersion must be TLS1_2"
    if at(p, "allowBlobPublicAccess") is not False:
        yield "allowBlobPublicAccess must be false"
    if at(p, "publicNetworkAccess") == "Disabled" and at(p, "networkRuleSet", "defaultAction") != "Deny":
        yield "a private account needs networkRuleSet.defaultAction: Deny"
    if at(p, "allowSharedKeyAccess", default=True) is not False:
        days = _sas_days(at(p, "sasPolicy", "sasExpirationPeriod"))
        if at(p, "sasPolicy", "expirationAction") != "Block" or days is None or not 0 < days <= MAX_SAS_DAYS:
            yield ("allowSharedKeyAccess must be false, or a sasPolicy must block SAS tokens longer than "
                   f"{MAX_SAS_DAYS} days (sas mode)")


def demo_groups_expire(p: Mapping[str, Any]) -> Iterator[str]:
    lifetime = tags(p).get("lifetime")
    if lifetime not in ("demo", "long-lived"):
        yield f"the resource group needs the tag lifetime: demo or long-lived (got {lifetime})"
    elif lifetime == "demo":
        expires = tags(p).get("expires-at")
        try:
            datetime.strptime(str(expires), EXPIRES_AT_FORMAT)
        except ValueError:
            yield f"a demo resource group needs the tag expires-at as {EXPIRES_AT_FORMAT} (got {expires})"


def security_exceptions_are_known(p: Mapping[str, Any]) -> Iterator[str]:
    value = tags(p).get(SECURITY_EXCEPTION)
    if value is None:
        return
    if value not in EXCEPTIONS:
        yield f"{SECURITY_EXCEPTION}: {value} is not an exception this pack knows ({', '.join(EXCEPTIONS)})"
    elif EXCEPTIONS[value] not in p:
        yield f"{SECURITY_EXCEPTION}: {value} excuses {EXCEPTIONS[value]}, which this resource does not have"


# Kubernetes -----------------------------------------------------------------------------------------------------

def pod_of(p: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """(namespace, pod spec) of a workload's inputs."""
    namespace = at(p, "metadata", "namespace", default="default")
    spec = at(p, "spec", default={})
    if "jobTemplate" in spec:
        spec = at(spec, "jobTemplate", "spec", default={})
    if "template" in spec:
        spec = at(spec, "template", "spec", default={})
    if not isinstance(spec, Mapping):
        raise Malformed("spec.template.spec must be an object")
    return namespace, spec


def containers_of(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*objects(at(pod, "initContainers", default=[]), "initContainers"),
            *objects(at(pod, "containers", default=[]), "containers")]


IMAGE = re.compile(r"^(?P<repo>[^@]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")


def images_pinned(p: Mapping[str, Any]) -> Iterator[str]:
    _, pod = pod_of(p)
    for c in containers_of(pod):
        image = at(c, "image", default="")
        match = IMAGE.match(str(image))
        if not match:
            yield f"container {at(c, 'name')}: {image!r} is not an image reference"
        elif match["digest"]:
            continue
        elif not match["repo"].split("/")[0].endswith(".azurecr.io"):
            yield f"container {at(c, 'name')}: {image} must be pinned by digest (or come from the stack's ACR)"
        elif not match["tag"] or match["tag"] == "latest":
            yield f"container {at(c, 'name')}: {image} needs a tag other than latest"


def no_privileged_workloads(p: Mapping[str, Any]) -> Iterator[str]:
    namespace, pod = pod_of(p)
    if namespace in OPERATOR_NAMESPACES:
        return
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if at(pod, flag) is True:
            yield f"{flag} is for the operator namespaces only ({namespace})"
    for volume in objects(at(pod, "volumes", default=[]), "volumes"):
        if "hostPath" in volume:
            yield f"volume {at(volume, 'name')}: hostPath is for the operator namespaces only ({namespace})"
    for c in containers_of(pod):
        if at(c, "securityContext", "privileged") is True:
            yield f"container {at(c, 'name')}: privileged is for the operator namespaces only ({namespace})"
        if at(c, "securityContext", "allowPrivilegeEscalation") is True:
            yield f"container {at(c, 'name')}: allowPrivilegeEscalation must not be true"


def load_balancers_have_source_ranges(p: Mapping[str, Any]) -> Iterator[str]:
    if at(p, "spec", "type") != "LoadBalancer":
        return
    ranges = strings(at(p, "spec", "loadBalancerSourceRanges", default=[]), "spec.loadBalancerSourceRanges")
    if not ranges:
        yield "a LoadBalancer Service needs spec.loadBalancerSourceRanges (who may connect)"
    elif any(r in ("0.0.0.0/0", "::/0") for r in ranges):
        yield "spec.loadBalancerSourceRanges must not contain 0.0.0.0/0"


def restricted_namespaces(p: Mapping[str, Any]) -> Iterator[str]:
    name = at(p, "metadata", "name")
    level = at(p, "metadata", "labels", "pod-security.kubernetes.io/enforce")
    exception = at(p, "metadata", "labels", SECURITY_EXCEPTION)
    if name in OPERATOR_NAMESPACES or level == "restricted":
        return
    if level == "baseline" and exception == BASELINE_OPERATOR_PODS:
        return  # pods an operator writes without a security context (KAITO's); never privileged
    if level == "privileged" and exception == RDMA_MEMORY_LOCK:
        # InfiniBand pods, held to rdma-exception-is-narrow; whatever else departs from restricted is logged.
        for mode in ("warn", "audit"):
            if at(p, "metadata", "labels", f"pod-security.kubernetes.io/{mode}") != "restricted":
                yield f"namespace {name} ({RDMA_MEMORY_LOCK}) must {mode} at the restricted level"
        return
    yield f"namespace {name} must enforce the restricted Pod Security Standard (got {level})"


def helm_pinned_and_atomic(p: Mapping[str, Any]) -> Iterator[str]:
    if not re.fullmatch(r"v?\d+\.\d+\.\d+([-+][\w.-]+)?", str(at(p, "version", default=""))):
        yield f"version must pin one chart version (got {at(p, 'version')})"
    if at(p, "atomic") is not True:
        yield "atomic must be true: a failed install rolls back instead of blocking the next pulumi up"
    if at(p, "cleanupOnFail") is not True:
        yield "cleanupOnFail must be true"
    timeout = at(p, "timeout", default=300)
    if not isinstance(timeout, (int, float)) or timeout < MIN_OPERATOR_TIMEOUT:
        yield f"timeout must be at least {MIN_OPERATOR_TIMEOUT} s (driver builds and image pulls), got {timeout}"


# Stack rules: what needs several resources -----------------------------------------------------------------------

RUN_TEMPLATE_KEY = "jobset.json"
"""Where a run template ConfigMap (components/training/jobset.py) keeps its JobSet."""
RDMA_RESOURCE = "rdma/shared_ib"


def _template_pods(config_map: Resource) -> list[tuple[str, Mapping[str, Any]]]:
    """(namespace, pod spec) of each pod of a JobSet kept in a run-template ConfigMap."""
    text = at(config_map.props, "data", RUN_TEMPLATE_KEY)
    if not isinstance(text, str):
        return []
    try:
        jobset = json.loads(text)
    except ValueError as e:
        raise Malformed(f"data.{RUN_TEMPLATE_KEY} is not JSON: {e}") from None
    namespace = at(jobset, "metadata", "namespace", default="default")
    return [(namespace, at(job, "template", "spec", "template", "spec", default={}))
            for job in objects(at(jobset, "spec", "replicatedJobs", default=[]), "replicatedJobs")]


def _exception_namespaces(resources: list[Resource], exception: str) -> set[str]:
    return {at(n.props, "metadata", "name") for n in _of(resources, NAMESPACE)
            if at(n.props, "metadata", "labels", SECURITY_EXCEPTION) == exception}


def _host_departures(pod: Mapping[str, Any]) -> Iterator[str]:
    """What no pod of an rdma-memory-lock namespace may have, IPC_LOCK or not (the namespace enforces privileged)."""
    for c in containers_of(pod):
        context = at(c, "securityContext", default={})
        if at(context, "privileged") is True:
            yield f"container {at(c, 'name')}: privileged is not part of the {RDMA_MEMORY_LOCK} exception"
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if at(pod, flag) is True:
            yield f"{flag} is not part of the {RDMA_MEMORY_LOCK} exception"
    for volume in objects(at(pod, "volumes", default=[]), "volumes"):
        if "hostPath" in volume:
            yield f"volume {at(volume, 'name')}: hostPath is not part of the {RDMA_MEMORY_LOCK} exception"


def _rdma_departures(pod: Mapping[str, Any]) -> Iterator[str]:
    """How an InfiniBand pod departs from restricted beyond root with IPC_LOCK: each a violation."""
    for c in containers_of(pod):
        name = at(c, "name")
        context = at(c, "securityContext", default={})
        if at(context, "capabilities") != {"drop": ["ALL"], "add": ["IPC_LOCK"]}:
            yield f"container {name}: capabilities must drop ALL and add IPC_LOCK alone"
        if at(context, "allowPrivilegeEscalation") is not False:
            yield f"container {name}: allowPrivilegeEscalation must be false"
        if RDMA_RESOURCE not in (at(c, "resources", "limits", default={}) or {}):
            yield f"container {name}: IPC_LOCK is for containers that ask for {RDMA_RESOURCE}"
    if at(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault":
        yield "the pod must run the runtime's seccomp profile"


def rdma_exception_is_narrow(resources: list[Resource]) -> Iterator[tuple[str, str]]:
    """Pods that add a capability run only in an rdma-memory-lock namespace, and there only as InfiniBand pods:
    root holding IPC_LOCK alone, nothing else privileged (run templates' JobSets included)."""
    allowed = _exception_namespaces(resources, RDMA_MEMORY_LOCK)
    pods = [(r.name, *pod_of(r.props)) for r in resources if r.type in WORKLOADS]
    pods += [(r.name, namespace, pod) for r in _of(resources, CONFIG_MAP) for namespace, pod in _template_pods(r)]
    for name, namespace, pod in pods:
        adds = any(at(c, "securityContext", "capabilities", "add") for c in containers_of(pod))
        if namespace in allowed:
            for message in _host_departures(pod):
                yield name, message
            if adds or at(pod, "securityContext", "runAsNonRoot") is False:
                for message in _rdma_departures(pod):
                    yield name, message
        elif adds and namespace not in OPERATOR_NAMESPACES:
            yield name, f"adds a capability outside the operator namespaces and {RDMA_MEMORY_LOCK} ones ({namespace})"


def _of(resources: list[Resource], resource_type: str) -> list[Resource]:
    return [r for r in resources if r.type == resource_type]


def _chart(release: Resource) -> str:
    return str(at(release.props, "chart", default="")).rsplit("/", 1)[-1]


def _gpu_pools(resources: list[Resource]) -> list[Resource]:
    return [r for r in _of(resources, AGENT_POOL) if GPU_SIZE.match(str(at(r.props, "vmSize", default="")))]


def _nap_gpu_pools(resources: list[Resource]) -> list[Resource]:
    """Node auto-provisioning pools whose nodes are GPU sizes (``karpenter.azure.com/sku-name``)."""
    pools = []
    for pool in _of(resources, NAP_NODEPOOL):
        requirements = objects(at(pool.props, "spec", "template", "spec", "requirements", default=[]), "requirements")
        sizes = [v for q in requirements if at(q, "key") == "karpenter.azure.com/sku-name"
                 for v in at(q, "values", default=[]) or []]
        if any(GPU_SIZE.match(str(v)) for v in sizes):
            pools.append(pool)
    return pools


def _nap_taints(pool: Resource) -> list[str]:
    taints = objects(at(pool.props, "spec", "template", "spec", "taints", default=[]), "taints")
    return [f"{at(t, 'key')}{'=' + str(at(t, 'value')) if at(t, 'value') else ''}:{at(t, 'effect')}" for t in taints]


def _pool_taints(resources: list[Resource]) -> dict[tuple[str, Any], list[str]]:
    """Each GPU pool's taints by the node label that selects it: agent pools and NAP pools alike."""
    taints = {(POOL_LABEL, at(p.props, "agentPoolName")): strings(at(p.props, "nodeTaints", default=[]), "nodeTaints")
              for p in _gpu_pools(resources)}
    taints.update({(NAP_POOL_LABEL, at(p.props, "metadata", "name")): _nap_taints(p)
                   for p in _nap_gpu_pools(resources)})
    return taints


def one_gpu_driver_owner(resources: list[Resource]) -> Iterator[tuple[str, str]]:
    """§6 item 6: gpuProfile.driver None needs the operator's driver; an AKS driver keeps the operator's off."""
    operator = [r for r in _of(resources, RELEASE) if _chart(r) == "gpu-operator"]
    values = at(operator[0].props, "values", default={}) if operator else {}
    operator_driver = at(values, "driver", "enabled", default=True) is not False
    operator_toolkit = at(values, "toolkit", "enabled", default=True) is not False
    # NVIDIA builds its precompiled drivers for Ubuntu's Azure kernels only (gpu-driver-container precompiled matrix),
    # and the operator serves one OS per cluster (gpu-operator state_manager.go getGPUNodeOSInfo).
    pools = _gpu_pools(resources)
    operator_owns = operator_driver and (
        any(at(p.props, "gpuProfile", "driver", default="Install") == "None" for p in pools)
        or any(at(c.props, "spec", "gpu", "mode") == "None" for c in _of(resources, NAP_NODECLASS)))
    for pool in pools:
        driver = at(pool.props, "gpuProfile", "driver", default="Install")
        labels = at(pool.props, "nodeLabels", default={})
        if operator_owns and at(pool.props, "osSKU", default="Ubuntu") != GPU_NODE_OS:
            yield pool.name, (f"GPU pools need osSKU {GPU_NODE_OS} where the GPU operator installs a driver (the OS "
                              "NVIDIA builds precompiled drivers for, one per cluster)")
        if driver == "None":
            if not operator:
                yield pool.name, "gpuProfile.driver None, but no GPU operator installs a driver"
            elif not (operator_driver and operator_toolkit):
                yield pool.name, "gpuProfile.driver None needs the operator's driver and toolkit enabled"
        elif operator and (operator_driver or operator_toolkit):
            if (labels.get("nvidia.com/gpu.deploy.driver") != "false"
                    or labels.get("nvidia.com/gpu.deploy.container-toolkit") != "false"):
                yield pool.name, ("AKS installs this pool's driver: its nodes need nvidia.com/gpu.deploy.driver and "
                                  "container-toolkit false so the operator keeps off")
    classes = {at(c.props, "metadata", "name"): c.props for c in _of(resources, NAP_NODECLASS)}
    for pool in _nap_gpu_pools(resources):
        node_class = classes.get(at(pool.props, "spec", "template", "spec", "nodeClassRef", "name"), {})
        mode = at(node_class, "spec", "gpu", "mode", default="Driver") if node_class else None
        labels = at(pool.props, "spec", "template", "metadata", "labels", default={}) or {}
        if mode == "None" and not (operator and operator_driver and operator_toolkit):
            yield pool.name, "AKSNodeClass gpu.mode None needs the GPU operator's driver and toolkit enabled"
        elif operator_owns and at(node_class, "spec", "imageFamily", default="Ubuntu") != GPU_NODE_OS:
            yield pool.name, f"GPU pools need AKSNodeClass imageFamily {GPU_NODE_OS} where the operator installs one"
        elif mode != "None" and operator and (operator_driver or operator_toolkit) and (
                labels.get("nvidia.com/gpu.deploy.driver") != "false"
                or labels.get("nvidia.com/gpu.deploy.container-toolkit") != "false"):
            yield pool.name, ("NAP installs this pool's driver: its nodes need nvidia.com/gpu.deploy.driver and "
                              "container-toolkit false so the operator keeps off")


def _taint(text: str) -> tuple[str, str, str]:
    key_value, _, effect = text.partition(":")
    key, _, value = key_value.partition("=")
    return key, value, effect


def tolerates(tolerations: list[Mapping[str, Any]], taint: str) -> bool:
    key, value, effect = _taint(taint)
    for t in tolerations:
        if at(t, "effect") not in (None, "", effect):
            continue
        if at(t, "operator", default="Equal") == "Exists":
            if at(t, "key") in (None, "", key):
                return True
        elif at(t, "key") == key and at(t, "value", default="") == value:
            return True
    return False


def gpu_pods_fit_their_pools(resources: list[Resource]) -> Iterator[tuple[str, str]]:
    """§6 item 7: GPU pods and the operator's DaemonSets tolerate the GPU pools' taints; GPU limits are set."""
    taints = _pool_taints(resources)
    for r in resources:
        if r.type not in WORKLOADS:
            continue
        _, pod = pod_of(r.props)
        containers = containers_of(pod)
        asks = [c for c in containers if GPU in (at(c, "resources", "limits", default={}) or {})
                or GPU in (at(c, "resources", "requests", default={}) or {})]
        if not asks:
            continue
        for c in asks:
            if GPU not in (at(c, "resources", "limits", default={}) or {}):
                yield r.name, f"container {at(c, 'name')} must set {GPU} in limits (requests alone are refused)"
        selector = at(pod, "nodeSelector", default={}) or {}
        pool = next(((label, selector[label]) for label in (POOL_LABEL, NAP_POOL_LABEL)
                     if (label, selector.get(label)) in taints), None)
        if pool is None:
            yield r.name, (f"a GPU pod must select its GPU pool with nodeSelector {POOL_LABEL} or {NAP_POOL_LABEL} "
                           f"(got {selector.get(POOL_LABEL)})")
            continue
        tolerations = objects(at(pod, "tolerations", default=[]), "tolerations")
        for taint in taints[pool]:
            if not tolerates(tolerations, taint):
                yield r.name, f"a pod on pool {pool[1]} must tolerate {taint}"
    all_taints = {t for ts in taints.values() for t in ts}
    for release in _of(resources, RELEASE):
        values = at(release.props, "values", default={})
        paths: dict[str, list[tuple[str, ...]]] = {"gpu-operator": [("daemonsets", "tolerations")],
                                                   "node-feature-discovery": [("worker", "tolerations")]}
        if _chart(release) == "gpu-operator" and at(values, "nfd", "enabled", default=True) is not False:
            paths["gpu-operator"].append(("node-feature-discovery", "worker", "tolerations"))
        for path in paths.get(_chart(release), []):
            tolerations = objects(at(values, *path, default=[]), ".".join(path))
            for taint in sorted(all_taints):
                if not tolerates(tolerations, taint):
                    yield release.name, f"values.{'.'.join(path)} must tolerate {taint}, or its pods skip GPU nodes"


def private_registries_have_endpoints(resources: list[Resource]) -> Iterator[tuple[str, str]]:
    """§6 item 8: a registry without public access is reached through a private endpoint in the VNet."""
    connections = [c for e in _of(resources, PRIVATE_ENDPOINT) for c in objects(
        at(e.props, "privateLinkServiceConnections", default=[]), "privateLinkServiceConnections")]
    targets = {str(at(c, "privateLinkServiceId", default="")).rsplit("/", 1)[-1] for c in connections
               if "registry" in (at(c, "groupIds", default=[]) or [])}
    for registry in _of(resources, REGISTRY):
        if at(registry.props, "publicNetworkAccess") == "Disabled" and \
                at(registry.props, "registryName") not in targets:
            yield registry.name, "a registry without public access needs a private endpoint (groupIds: registry)"


def registries_are_attached(resources: list[Resource]) -> Iterator[tuple[str, str]]:
    """§6 item 9: the cluster pulls from each registry with an AcrPull assignment scoped to it."""
    scopes = {str(at(a.props, "scope", default="")).rsplit("/", 1)[-1] for a in _of(resources, ROLE_ASSIGNMENT)
              if str(at(a.props, "roleDefinitionId", default="")).endswith(ACR_PULL)}
    for registry in _of(resources, REGISTRY):
        if at(registry.props, "registryName") not in scopes:
            yield registry.name, "no AcrPull assignment is scoped to this registry: the kubelet cannot pull"


RULES: tuple[Rule, ...] = (
    Rule("aks-entra-id-rbac", "AKS uses managed Entra ID with Azure RBAC and no local accounts.", "§6.1; "
         "local-accounts.md", (MC,), aks_entra_id_and_rbac),
    Rule("aks-api-server-access", "The API server is private, limited to authorized ranges, or a tagged "
         "exception.", "§6.2; api-server-authorized-ip-ranges.md", (MC,), aks_api_server_access),
    Rule("aks-network-policy", "Azure CNI with a network policy engine.", "§6.3; checkov CKV_AZURE_7, "
         "CKV2_AZURE_29", (MC,), aks_network_policy),
    Rule("aks-node-hardening", "No node public IPs, maxPods >= 50, automatic upgrades.", "§6.4; checkov "
         "CKV_AZURE_143, CKV_AZURE_168, CKV_AZURE_171", (MC, AGENT_POOL), aks_node_hardening),
    Rule("aks-gpu-pools", "GPU pools are autoscaled User AgentPools; spot pools evict with Delete at a valid "
         "price; the system pool is regular.", "§6.5; spot-node-pool.md", (MC, AGENT_POOL), aks_pools),
    Rule("acr-locked-down", "The registry has no admin user or anonymous pull; a private one is Premium.",
         "§6.8; CKV_AZURE_137, CKV_AZURE_138", (REGISTRY,), acr_locked_down),
    Rule("acr-pull-to-a-service-principal", "AcrPull goes to a service principal, scoped to the registry.",
         "§6.9; cluster-container-registry-integration.md", (ROLE_ASSIGNMENT,), acr_pull_to_a_service_principal),
    Rule("storage-secure", "Storage is HTTPS-only, TLS 1.2, without anonymous blobs; shared keys only with a "
         "bounded SAS policy; containers are private.", "§6.10; CKV_AZURE_3, CKV_AZURE_44, CKV_AZURE_190, "
         "CKV2_AZURE_40, CKV2_AZURE_41", (STORAGE_ACCOUNT, BLOB_CONTAINER), storage_secure),
    Rule("demo-resource-groups-expire", "A demo stack's resource group carries its expiry.", "docs/lifecycle.md",
         (RESOURCE_GROUP,), demo_groups_expire),
    Rule("security-exceptions-known", "Only the exceptions docs/security.md justifies, on resources they "
         "apply to.", "docs/security.md", ("azure-native:",), security_exceptions_are_known),
    Rule("images-pinned", "Workload images are pinned by digest, or come from the stack's ACR with a tag.",
         "§6.13; CKV_K8S_14, CKV_K8S_43", WORKLOADS, images_pinned),
    Rule("no-privileged-workloads", "No privileged, host-namespace or hostPath pods outside the operator "
         "namespaces.", "Pod Security Standards; CKV_K8S_16-20", WORKLOADS, no_privileged_workloads),
    Rule("load-balancers-have-source-ranges", "No LoadBalancer Service open to every address.",
         "docs/security.md", (SERVICE,), load_balancers_have_source_ranges),
    Rule("restricted-pod-security", "Workload namespaces enforce the restricted Pod Security Standard.",
         "Pod Security Admission", (NAMESPACE,), restricted_namespaces),
    Rule("helm-pinned-and-atomic", "Helm releases pin a version, are atomic, clean up on failure and wait 600 s.",
         "§6.14; pulumi/pulumi-kubernetes#1697", (RELEASE,), helm_pinned_and_atomic),
)

STACK_RULES: tuple[StackRule, ...] = (
    StackRule("one-gpu-driver-owner", "Exactly one owner of each GPU node's driver: AKS or the GPU operator.",
              "§6.6; NVIDIA/gpu-operator#525", one_gpu_driver_owner),
    StackRule("gpu-pods-fit-their-pools", "GPU pods and operator DaemonSets tolerate the GPU pools' taints; GPU "
              "limits are set.", "§6.7; NVIDIA/gpu-operator#577", gpu_pods_fit_their_pools),
    StackRule("private-registries-have-endpoints", "A registry without public access has a private endpoint.",
              "§6.8", private_registries_have_endpoints),
    StackRule("registries-are-attached", "Every registry has an AcrPull assignment scoped to it.", "§6.9",
              registries_are_attached),
    StackRule("rdma-exception-is-narrow", "Only InfiniBand pods add a capability: IPC_LOCK alone, as root, in a "
              "namespace tagged rdma-memory-lock.", "docs/security.md; Azure/aks-rdma-infiniband "
              "01-network-operator.md", rdma_exception_is_narrow),
)


def resource_violations(resource_type: str, props: Any) -> list[tuple[str, str]]:
    """(rule name, message) of every resource rule for one resource."""
    return [(rule.name, message) for rule in RULES for message in evaluate(rule, resource_type, props)]


def stack_violations(resources: list[Resource]) -> list[tuple[str, str, str]]:
    """(rule name, resource name, message) of every rule, resource and stack, over a whole stack."""
    found = [(rule, r.name, message) for r in resources for rule, message in resource_violations(r.type, r.props)]
    found += [(rule.name, name, message) for rule in STACK_RULES for name, message in evaluate_stack(rule, resources)]
    return found
