"""Security defaults for every namespace and pod this program writes (restricted Pod Security Standard)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi_kubernetes import admissionregistration, core

from components.kubernetes.network_policy import deny_all_but_dns
from components.vocabulary import SECURITY_EXCEPTION, SecurityException

NONROOT_UID = 65532
"""An unprivileged UID that exists in distroless images and works as a bare number everywhere else."""
GPU_CLIENT_UID = 10001
"""The UID of every long-running GPU workload (the function, the notebook, vLLM) and of an MPS pool's check: the
device plugin's MPS daemon runs without multi-user mode, so all clients of a GPU's MPS server must be one UID."""

RESTRICTED_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
BASELINE_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "latest",
    # Restricted stays the warning and audit level: kubectl and the audit log show what these pods would need.
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
RDMA_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    # What the pods would need to meet restricted stays visible: kubectl warns, the audit log records it.
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
PRIVILEGED_NAMESPACE_LABELS = {
    # Driver, toolkit and NFD pods load kernel modules and read host devices; nothing else runs here.
    "pod-security.kubernetes.io/enforce": "privileged",
}


NAMESPACE_EXCEPTIONS = {SecurityException.BASELINE_OPERATOR_PODS: BASELINE_NAMESPACE_LABELS,
                        SecurityException.RDMA_MEMORY_LOCK: RDMA_NAMESPACE_LABELS}
"""The namespace exceptions and the Pod Security labels each sets."""


def pod_security_context(uid: int = NONROOT_UID, gid: int | None = None) -> dict[str, Any]:
    """Non-root pod; the group (and volume group) is ``gid``, or the same number as ``uid``."""
    gid = uid if gid is None else gid
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "fsGroup": gid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(read_only_root: bool = True) -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": read_only_root,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


RDMA_UID = 0
"""The InfiniBand pods' user (``SecurityException.RDMA_MEMORY_LOCK``): only root keeps an added capability."""


def rdma_container_security_context() -> dict[str, Any]:
    """An InfiniBand pod's container: root holding IPC_LOCK and no other capability, otherwise restricted's
    settings (``SecurityException.RDMA_MEMORY_LOCK``)."""
    return {**container_security_context(), "runAsNonRoot": False,
            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}


def rdma_pod_security_context() -> dict[str, Any]:
    """An InfiniBand pod: as ``pod_security_context``, but as root (the container adds IPC_LOCK alone)."""
    return {**pod_security_context(), "runAsNonRoot": False, "runAsUser": RDMA_UID, "runAsGroup": RDMA_UID,
            "fsGroup": RDMA_UID}


def resources(cpu: str, memory: str, gpus: int = 0) -> dict[str, Any]:
    """Requests equal to limits; GPUs go in limits (Kubernetes sets the request equal)."""
    limits: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": limits}


def namespace(name: str, namespace_name: str, labels: Mapping[str, str], parent: pulumi.Resource
              ) -> core.v1.Namespace:
    return core.v1.Namespace(
        name, metadata={"name": namespace_name, "labels": {"app.kubernetes.io/managed-by": "pulumi", **labels}},
        opts=pulumi.ResourceOptions(parent=parent),
    )


def workload_namespace(name: str, namespace_name: str, parent: pulumi.Resource,
                       exception: SecurityException | None = None) -> core.v1.Namespace:
    """A namespace for workloads: restricted Pod Security, and no traffic but DNS until a workload opens more.
    ``exception`` lowers enforcement (to baseline for pods an operator writes, to privileged for InfiniBand pods)
    and says why on the namespace."""
    labels = RESTRICTED_NAMESPACE_LABELS
    if exception is not None:
        if exception not in NAMESPACE_EXCEPTIONS:
            raise ValueError(f"{exception} is not a namespace exception")
        labels = {**NAMESPACE_EXCEPTIONS[exception], SECURITY_EXCEPTION: exception.value}
    ns = namespace(name, namespace_name, labels, parent)
    deny_all_but_dns(f"{name}-default-deny", ns.metadata["name"], parent)
    if exception == SecurityException.RDMA_MEMORY_LOCK:
        rdma_admission_policy(f"{name}-rdma-policy", namespace_name, parent)
    return ns


CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _every_container(rule: str) -> str:
    """``rule`` (on a container ``c``) for every container of the pod, ephemeral ones (``kubectl debug``) too."""
    return " && ".join(f"(!has(object.spec.{lst}) || object.spec.{lst}.all(c, {rule}))" for lst in CONTAINER_LISTS)


def _not_unconfined(context: str, field: str) -> str:
    return f"!(has({context}.{field}) && {context}.{field}.type == 'Unconfined')"


RDMA_POD_RULES = (
    (_every_container("!has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged"),
     "no privileged container: the rdma-memory-lock exception is IPC_LOCK alone"),
    (_every_container("!has(c.securityContext) || !has(c.securityContext.capabilities) || "
                      "!has(c.securityContext.capabilities.add) || "
                      "c.securityContext.capabilities.add.all(a, a == 'IPC_LOCK')"),
     "a container may add IPC_LOCK and no other capability"),
    (_every_container("has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) && "
                      "!c.securityContext.allowPrivilegeEscalation"),
     "every container sets allowPrivilegeEscalation false"),
    ("!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && "
     "object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC)",
     "no host network, PID or IPC namespace"),
    ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))", "no hostPath volume"),
    (_every_container("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)"), "no host port"),
    ("!has(object.spec.securityContext) || (" + " && ".join((
        _not_unconfined("object.spec.securityContext", "seccompProfile"),
        _not_unconfined("object.spec.securityContext", "appArmorProfile"),
        "!has(object.spec.securityContext.sysctls)")) + ")",
     "no Unconfined seccomp or AppArmor profile and no sysctl for the pod"),
    (_every_container("!has(c.securityContext) || (" + " && ".join((
        _not_unconfined("c.securityContext", "seccompProfile"), _not_unconfined("c.securityContext", "appArmorProfile"),
        "!(has(c.securityContext.procMount) && c.securityContext.procMount != 'Default')")) + ")"),
     "no container with an Unconfined seccomp or AppArmor profile or an unmasked /proc"),
    ("!has(object.spec.securityContext) || !has(object.spec.securityContext.seLinuxOptions) || "
     "(!has(object.spec.securityContext.seLinuxOptions.user) && !has(object.spec.securityContext.seLinuxOptions.role)"
     " && (!has(object.spec.securityContext.seLinuxOptions.type) || object.spec.securityContext.seLinuxOptions.type "
     "in ['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']))",
     "no SELinux user or role, and only the container SELinux types, for the pod"),
    (_every_container("!has(c.securityContext) || !has(c.securityContext.seLinuxOptions) || "
                      "(!has(c.securityContext.seLinuxOptions.user) && !has(c.securityContext.seLinuxOptions.role) && "
                      "(!has(c.securityContext.seLinuxOptions.type) || c.securityContext.seLinuxOptions.type in "
                      "['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']))"),
     "no SELinux user or role, and only the container SELinux types, for any container"),
    ("!has(object.spec.securityContext) || !has(object.spec.securityContext.windowsOptions) || "
     "!has(object.spec.securityContext.windowsOptions.hostProcess) || "
     "!object.spec.securityContext.windowsOptions.hostProcess",
     "no Windows HostProcess pod"),
)
"""CEL rules every pod of an rdma-memory-lock namespace must meet: Pod Security's baseline level, which the
namespace's privileged level no longer enforces (kubernetes.io/docs/concepts/security/pod-security-standards:
HostProcess, host namespaces, privileged, capabilities, hostPath, host ports, AppArmor, SELinux, /proc mount type,
seccomp, sysctls; no sysctl at all, stricter than baseline's safe set), and of restricted's the one the InfiniBand
pods meet too (allowPrivilegeEscalation false); root with IPC_LOCK is the exception's whole width."""


def rdma_admission_policy(name: str, namespace_name: str, parent: pulumi.Resource) -> None:
    """The API server itself holds the pods of an rdma-memory-lock namespace to IPC_LOCK alone (a
    ValidatingAdmissionPolicy, GA in Kubernetes 1.30): the namespace enforces privileged Pod Security, and runs are
    applied with kubectl from templates the policy pack checks, so a changed template would otherwise go through."""
    child = pulumi.ResourceOptions(parent=parent)
    policy = admissionregistration.v1.ValidatingAdmissionPolicy(name, metadata={"name": f"{namespace_name}-rdma-only"},
        spec={"failurePolicy": "Fail",
              # pods/ephemeralcontainers: `kubectl debug` adds a container through the subresource, whose object
              # is the whole pod (Pod Security's admission checks it the same way).
              "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                      "operations": ["CREATE", "UPDATE"],
                                                      "resources": ["pods", "pods/ephemeralcontainers"]}]},
              # As Pod Security: a pod is judged when it is created and when a container is added to it, not on
              # the metadata updates of a pod admitted earlier (a controller's finalizer, a label), which a pod
              # admitted under older rules would otherwise fail for good.
              # request.subResource is absent on a request for the pod itself: has() first, or CEL errs and the
              # failure policy refuses every update (found on the test control plane).
              "matchConditions": [{"name": "create-or-add-container", "expression":
                                   "request.operation == 'CREATE' || (has(request.subResource) && "
                                   "request.subResource == 'ephemeralcontainers')"}],
              "validations": [{"expression": rule, "message": message} for rule, message in RDMA_POD_RULES]},
        opts=child)
    admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{name}-binding", metadata={"name": f"{namespace_name}-rdma-only"},
        spec={"policyName": policy.metadata["name"], "validationActions": ["Deny"],
              "matchResources": {"namespaceSelector": {"matchLabels": {
                  "kubernetes.io/metadata.name": namespace_name}}}},
        opts=child)
