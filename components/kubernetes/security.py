"""Security defaults for every namespace and pod this program writes (restricted Pod Security Standard)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi_kubernetes import core

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
    # Restricted stays the warning level: kubectl shows what these pods would need to meet it.
    "pod-security.kubernetes.io/warn": "restricted",
}
PRIVILEGED_NAMESPACE_LABELS = {
    # Driver, toolkit and NFD pods load kernel modules and read host devices; nothing else runs here.
    "pod-security.kubernetes.io/enforce": "privileged",
}


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
    ``exception`` (``baseline-operator-pods`` only) lowers enforcement to baseline and says why on the namespace."""
    labels = RESTRICTED_NAMESPACE_LABELS
    if exception is not None:
        if exception != SecurityException.BASELINE_OPERATOR_PODS:
            raise ValueError(f"{exception} is not a namespace exception")
        labels = {**BASELINE_NAMESPACE_LABELS, SECURITY_EXCEPTION: exception.value}
    ns = namespace(name, namespace_name, labels, parent)
    deny_all_but_dns(f"{name}-default-deny", ns.metadata["name"], parent)
    return ns
