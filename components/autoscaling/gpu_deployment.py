"""A Deployment of GPU pods, scaled by KEDA on its GPUs' utilisation when the stack has metrics to read, else a
fixed number of replicas."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import apps, policy

from components.autoscaling.keda import MetricsAccess, gpu_utilisation_query, scaled_object
from components.kubernetes.pods import AWAIT_GPU_START, GPU_ROLLOUT, GPU_SURGE_ROLLOUT


@dataclass(frozen=True)
class GpuScaling:
    min_replicas: int
    """Replicas at rest (at least 1: an idle GPU reports no load that could wake a workload from zero)."""
    max_replicas: int
    """At most as many as the pool's GPUs (or GPU shares) at its maximum size."""
    target: int
    """Per replica, the value of ``query`` KEDA aims for (GPU utilisation %, queued requests); above it, more
    replicas (and GPU nodes for them)."""
    metrics: MetricsAccess | None = None
    """How KEDA reads the utilisation; None: ``min_replicas`` replicas, unscaled."""
    auth: pulumi.Resource | None = None
    """The namespace's TriggerAuthentication (with ``metrics``)."""
    query: Callable[[str, str], str] = gpu_utilisation_query
    """(namespace, Deployment name) → the PromQL KEDA reads: by default the pods' summed GPU utilisation."""
    surge: bool = False
    """The pool at its maximum holds a GPU (or share) beyond every replica its Deployments may run, so a rollout
    may start the new pod first (``GPU_SURGE_ROLLOUT``)."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"GPU scaling needs 1 <= min <= max, got {self.min_replicas}..{self.max_replicas}")

    @property
    def scales(self) -> bool:
        """KEDA has metrics to read and room to move; with min = max a ScaledObject would only restate the count."""
        return self.metrics is not None and self.max_replicas > self.min_replicas


def gpu_deployment(name: str, deployment: str, namespace: pulumi.Input[str], namespace_name: str,
                   labels: Mapping[str, str], pod: Mapping[str, Any], scaling: GpuScaling,
                   depends_on: Sequence[pulumi.Resource], parent: pulumi.Resource,
                   await_ready: bool = True) -> apps.v1.Deployment:
    """``name``: the Deployment's resource name (its ScaledObject is ``<name>-scaler``); ``deployment``: its
    Kubernetes name. ``await_ready`` False: ``pulumi up`` does not wait for it (its pods wait for something the
    user provides after the first deploy)."""
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(labels)},
                            "strategy": GPU_SURGE_ROLLOUT if scaling.surge else GPU_ROLLOUT,
                            "template": {"metadata": {"labels": dict(labels)}, "spec": dict(pod)}}
    if not scaling.scales:
        spec["replicas"] = scaling.min_replicas
    # Scaled: no replicas here, or every `pulumi up` would reset what the HPA chose.
    workload = apps.v1.Deployment(
        name,
        metadata={"name": deployment, "namespace": namespace, "labels": dict(labels),
                  "annotations": AWAIT_GPU_START if await_ready else {"pulumi.com/skipAwait": "true"}},
        spec=spec,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
    if scaling.min_replicas >= 2:
        # Drains (node-image upgrades, consolidation) take one replica at a time; one alone is not held, or the
        # drain, and with it the upgrade, would fail.
        policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata={"name": deployment, "namespace": namespace, "labels": dict(labels)},
            spec={"maxUnavailable": 1, "selector": {"matchLabels": dict(labels)}},
            opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)))
    if scaling.scales and scaling.metrics is not None and scaling.auth is not None:
        scaled_object(f"{name}-scaler", deployment, namespace, scaling.min_replicas, scaling.max_replicas,
                      scaling.query(namespace_name, deployment), scaling.target, scaling.metrics, scaling.auth,
                      parent, labels=labels)
    return workload
