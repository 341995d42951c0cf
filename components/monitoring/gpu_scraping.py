"""Managed Prometheus scraping the GPU operator's DCGM exporter.

The managed add-on reads only its own ``azmonitoring.coreos.com`` kinds; the operator's ServiceMonitor
(``monitoring.coreos.com``) is invisible to it, and the add-on's built-in ``dcgmexporter`` target only finds the
exporter AKS runs for AKS-managed GPU drivers (SOURCES-crds.md §2). So a PodMonitor selects the operator's exporter
pods (label ``app: nvidia-dcgm-exporter``, container port ``metrics``, 9400) as AKS's ML-ops guide does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_kubernetes import apiextensions

EXPORTER_LABELS = {"app": "nvidia-dcgm-exporter"}
"""What GPU operator v26.7.0 labels its exporter pods with (assets/state-dcgm-exporter/0800_daemonset.yaml)."""
PODMONITOR_API = "azmonitoring.coreos.com/v1"
PODMONITOR_CRD = "podmonitors.azmonitoring.coreos.com"
"""Installed by the managed Prometheus add-on, not by this program."""
SCRAPE_INTERVAL = "30s"


@dataclass(frozen=True)
class GpuMetricsScrapingArgs:
    namespace: pulumi.Input[str]
    """The GPU operator's namespace, where its exporter runs."""
    operator: pulumi.Resource
    """The operator's release, which creates the exporter (and fills the namespace)."""


class GpuMetricsScraping(pulumi.ComponentResource):
    def __init__(self, name: str, args: GpuMetricsScrapingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:monitoring:GpuMetricsScraping", name, None, opts)  # frozen: components/__init__.py
        _pod_monitor(f"{name}-podmonitor", args.namespace, self, args.operator)
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
