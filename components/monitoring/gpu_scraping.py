"""Managed Prometheus scraping the GPU operator's DCGM exporter.

The managed add-on reads only its own ``azmonitoring.coreos.com`` kinds; the operator's ServiceMonitor
(``monitoring.coreos.com``) is invisible to it, and the add-on's built-in ``dcgmexporter`` target only finds the
exporter AKS runs for AKS-managed GPU drivers (SOURCES-crds.md §2). So a PodMonitor selects the operator's exporter
pods (label ``app: nvidia-dcgm-exporter``, container port ``metrics``, 9400) as AKS's ML-ops guide does.
"""

from __future__ import annotations

import pulumi
from pulumi_kubernetes import apiextensions

EXPORTER_LABELS = {"app": "nvidia-dcgm-exporter"}
"""What GPU operator v26.7.0 labels its exporter pods with (assets/state-dcgm-exporter/0800_daemonset.yaml)."""
PODMONITOR_API = "azmonitoring.coreos.com/v1"
PODMONITOR_CRD = "podmonitors.azmonitoring.coreos.com"
"""Installed by the managed Prometheus add-on, not by this program."""
SCRAPE_INTERVAL = "30s"


class GpuMetricsScraping(pulumi.ComponentResource):
    def __init__(self, name: str, namespace: pulumi.Input[str], operator: pulumi.Resource,
                 opts: pulumi.ResourceOptions | None = None):
        """``namespace``: the GPU operator's; ``operator``: its release, which creates the exporter."""
        super().__init__("aksgpu:monitoring:GpuMetricsScraping", name, None, opts)
        self.pod_monitor = _pod_monitor(f"{name}-podmonitor", namespace, self, operator)
        self.register_outputs({})


def _pod_monitor(name: str, namespace: pulumi.Input[str], parent: pulumi.Resource,
                 operator: pulumi.Resource) -> apiextensions.CustomResource:
    return apiextensions.CustomResource(
        name,
        api_version=PODMONITOR_API,
        kind="PodMonitor",
        metadata={"name": "nvidia-dcgm-exporter", "namespace": namespace, "labels": EXPORTER_LABELS},
        spec={
            "selector": {"matchLabels": EXPORTER_LABELS},
            "podMetricsEndpoints": [{
                "port": "metrics", "interval": SCRAPE_INTERVAL, "scrapeTimeout": "10s",
                # The exporter labels each GPU's series with the namespace and pod that hold the GPU; keep those
                # rather than the exporter pod's own (Prometheus would rename them exported_namespace/_pod).
                "honorLabels": True,
            }],
        },
        # The namespace is the operator's, created by its component: wait for the release that fills it.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[operator]),
    )
