"""What a scenario asks of the platform, as one value (``Needs``): the layers read it, the scenario declares it.
Plain Python, so config tools can read it too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from components.monitoring.alert_rules import AlertRule
from components.vocabulary import SecurityException

DataAccess = Mapping[str, Mapping[str, bool]]
"""Workload (also its ServiceAccount's name) → storage role → write (True) or read only (False)."""


@dataclass(frozen=True)
class Needs:
    """Everything a scenario asks of the platform, as one value; each default asks nothing."""

    images: Mapping[str, str] = field(default_factory=dict)
    """Repository → folder under ``docker/``, built into the stack's registry."""
    storage_roles: tuple[str, ...] = ()
    """Storage account roles the stack must configure (``storage.accounts[].role``)."""
    namespace: str | None = None
    """The scenario's namespace (restricted Pod Security, default-deny network policy); None: none."""
    namespace_exception: SecurityException | None = None
    """A stated departure from restricted Pod Security for that namespace (pods an operator writes)."""
    data_access: DataAccess = field(default_factory=dict)
    """Which of its workloads touch which storage roles, and whether they write: each gets its own identity and
    volumes in the namespace."""
    deployer_blob_access: Mapping[str, bool] = field(default_factory=dict)
    """Storage role → write (True) or read access for whoever runs ``pulumi up``, for the blob commands the stack
    outputs (granted with ``cluster.grantDeployerAdmin``)."""
    job_queue: bool = False
    """Its GPU Jobs queue in Kueue (``addons.kueue``) within the GPU pools' capacity."""
    job_sets: bool = False
    """Its distributed runs are JobSets (one Job per node): the platform installs the JobSet controller, and Kueue
    admits each run whole, all its pods or none."""
    alert_rules: Sequence[AlertRule] = ()
    """Alert rules on its workloads' own metrics, added to the stack's rule group (``monitoring.enabled``)."""
    autoscaled: bool = False
    """Some of its Deployments can scale (more than one replica possible) with KEDA on managed Prometheus: only
    then does the stack give KEDA an identity to read metrics with (``addons.keda``, ``monitoring.enabled``)."""
    ai_toolchain_operator: bool = False
    """The cluster runs the AKS AI toolchain operator add-on (KAITO)."""
    add_on_kinds: tuple[str, ...] = ()
    """Custom resource definitions an AKS add-on installs that its workloads write: ``pulumi up`` waits until the
    cluster serves them before the first Kubernetes call."""


