"""The GPU alert rules as data: PromQL over the series managed Prometheus collects (the DCGM exporter's, scraped
by ``gpu_scraping.py``; kube-state-metrics' from the add-on's default targets), with how long each must hold.

Label names: the DCGM exporter labels each GPU's series with ``Hostname`` (the node) and ``gpu`` (its index), and
with the ``namespace`` and ``pod`` of the workload holding the GPU (the PodMonitor keeps them: ``honorLabels``).
AKS names nodes ``aks-<pool>-<id>-vmss<n>``, so a node's pool is a regex away.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.gpu.gate import GATE_TAINT_KEY
from components.gpu.node_repair_job import FATAL_XIDS
from components.monitoring.gpu_utilisation import gpu_utilisation

SPOT_TAINT_KEY = "kubernetes.azure.com/scalesetpriority"
XID_WINDOW_MINUTES = 10
"""How long a new XID error keeps its alert firing."""
NPD_GPU_CONDITIONS = ("GPUMissing", "NVLinkStatusInactive", "XIDErrors", "IBLinkFlapping")
"""The node conditions AKS's Node Problem Detector sets on GPU nodes (node-problem-detector: Node conditions, "GPU
only"); kube-state-metrics exports each as kube_node_status_condition{condition=...}."""
NPD_GPU_CONDITION_MINUTES = 5
"""How long one of them holds before the alert fires and GPU node repair cordons the node."""
GATE_MINUTES = 30
"""How long a GPU node may stay held by the GPU node gate before its alert fires: a node's driver and check take 2
to 10 minutes (a compiled driver the longest, docs/estimates.md), and a precompiled driver that falls back to
compiling adds 5."""


@dataclass(frozen=True)
class AlertRule:
    name: str
    """Alert name (Prometheus ``alert``)."""
    expression: str
    """PromQL; the alert fires for each series it returns."""
    minutes: int
    """How long the expression must hold before the alert fires (``for``)."""
    severity: int
    """Azure Monitor severity: 0 critical to 4 verbose."""
    summary: str
    """What it means and what to do, for the notification."""


def gpu_alert_rules(idle_minutes: int, provision_minutes: int, gate: bool = True) -> list[AlertRule]:
    """The rules every monitored GPU stack gets.

    ``idle_minutes``: how long a GPU may sit at 0 % before it counts as a cost (``monitoring.idleGpuMinutes``).
    ``provision_minutes``: the cluster autoscaler's ``maxNodeProvisionTime``: a GPU pod pending longer than that
    will not get a node (quota, spot capacity, a pool at its maximum).
    ``gate``: the GPU node gate runs (``addons.gpuNodeGate``), so a node it holds too long alerts.
    """
    fatal = " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {xid}" for xid in sorted(FATAL_XIDS))
    held = AlertRule(
        "GpuNodeNotAdmitted",
        f'max by (node) (kube_node_spec_taint{{key="{GATE_TAINT_KEY}"}}) == 1',
        GATE_MINUTES, 2,
        f"A new GPU node has been held out of service for {GATE_MINUTES} minutes: its GPU check failed (its "
        "annotation aksgpu.io/gpu-check says why) or never ran (its driver or device plugin did not start). GPU "
        "node repair replaces a failed node where its pool can grow (docs/observability.md: Sick GPU nodes).")
    return [
        AlertRule(
            "GpuIdle",
            f"max by (Hostname, gpu) {gpu_utilisation(over='5m')} < 1",
            idle_minutes, 3,
            f"A GPU has done no work for {idle_minutes} minutes while its node runs (and costs): scale the pool "
            "down (minCount) or give it work."),
        AlertRule(
            "GpuPodPending",
            'max by (namespace, pod) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"}) > 0 '
            'and on (namespace, pod) max by (namespace, pod) (kube_pod_status_phase{phase="Pending"}) == 1',
            provision_minutes, 2,
            f"A pod has waited {provision_minutes} minutes for a GPU, longer than the autoscaler gives a node to "
            "appear: check GPU quota and spot capacity in the region, and the pool's maxCount."),
        # The exporter's gauge holds the last XID code until it restarts ("Value of the last XID error
        # encountered", dcp-metrics-included.csv): alerting on the value would fire on one old error forever. A
        # change is a new error; the same code again does not change it, which the summary says.
        AlertRule(
            "GpuXidError",
            f"max by (Hostname, gpu) (changes(DCGM_FI_DEV_XID_ERRORS[{XID_WINDOW_MINUTES}m])) > 0",
            1, 1,
            f"The GPU driver reported a new XID error in the last {XID_WINDOW_MINUTES} minutes "
            "(DCGM_FI_DEV_XID_ERRORS holds its code; a repeat of the same code shows no change): the GPU or its "
            "driver failed; drain the node and look the code up in NVIDIA's XID catalogue."),
        # The gauge keeps the code until the exporter restarts, which here is what is wanted: these codes leave
        # the GPU unusable until it is reset or the node restarted (NVIDIA's XID catalogue), which restarts it.
        AlertRule(
            "GpuFatalXid",
            f"max by (Hostname, gpu) ({fatal})",
            1, 1,
            "A GPU reported an XID error that leaves it unusable until it is reset or its node restarted (NVIDIA's "
            "XID catalogue): GPU node repair cordons and drains the node where its pool can grow; otherwise "
            "replace it by hand (docs/observability.md: Sick GPU nodes)."),
        AlertRule(
            "GpuRowRemapFailure",
            "max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            1, 1,
            "A GPU could not remap a failing memory row: its memory is faulty for good. GPU node repair cordons "
            "and drains the node; ask Azure support to replace the host (docs/observability.md: Sick GPU nodes)."),
        *([held] if gate else []),
        AlertRule(
            "GpuNodeProblem",
            f'max by (node, condition) (kube_node_status_condition{{condition=~"{"|".join(NPD_GPU_CONDITIONS)}", '
            'status="true"}) == 1',
            NPD_GPU_CONDITION_MINUTES, 1,
            "AKS's Node Problem Detector reports a GPU problem on a node (a GPU missing, NVLink down, XID errors in "
            "the kernel log, InfiniBand links flapping): the gpu-node-repair CronJob cordons and drains it within 5 "
            "minutes and the autoscaler replaces it; where addons.gpuNodeRepair is off, or it holds another node "
            "already, do it by hand (docs/observability.md: Sick GPU nodes)."),
        AlertRule(
            "SpotNodeNotReady",
            f'max by (node) (kube_node_spec_taint{{key="{SPOT_TAINT_KEY}", value="spot"}}) '
            'and on (node) max by (node) (kube_node_status_condition{condition="Ready", status="true"}) == 0',
            2, 2,
            "A spot node is not ready: Azure is evicting it (or it failed). Its pods restart elsewhere; Jobs retry "
            "without counting the eviction against their backoff limit."),
    ]
