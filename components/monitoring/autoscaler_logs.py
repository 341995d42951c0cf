"""The cluster autoscaler's decisions, made visible: the AKS control plane's ``cluster-autoscaler`` log category
sent to a Log Analytics workspace (diagnostic settings), where a query shows each scale-up and scale-down with its
reason. AKS runs the autoscaler in the control plane, so its log exists nowhere else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import monitor, operationalinsights

LOG_CATEGORY = "cluster-autoscaler"
RETENTION_DAYS = 30
"""Log Analytics' included retention: no extra charge."""
QUERY = ("AKSControlPlane | where Category == 'cluster-autoscaler' | project TimeGenerated, Message "
         "| order by TimeGenerated desc")
"""What to run in the workspace (resource-specific tables: ``logAnalyticsDestinationType: Dedicated``)."""


@dataclass(frozen=True)
class AutoscalerLogsArgs:
    resource_group_name: pulumi.Input[str]
    """Resource group of the workspace."""
    location: str
    """Azure region."""
    workspace_name: str
    """Log Analytics workspace name."""
    cluster_id: pulumi.Input[str]
    """The AKS cluster whose control-plane logs are sent."""
    tags: Mapping[str, str]
    """Tags of the workspace."""


class AutoscalerLogs(pulumi.ComponentResource):
    workspace_name: pulumi.Output[str]
    query: str
    query_command: pulumi.Output[str]
    """The ``az`` command that shows the autoscaler's latest decisions."""

    def __init__(self, name: str, args: AutoscalerLogsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:monitoring:AutoscalerLogs", name, None, opts)  # frozen: components/__init__.py
        workspace = operationalinsights.Workspace(
            f"{name}-workspace", workspace_name=args.workspace_name, resource_group_name=args.resource_group_name,
            location=args.location, sku=operationalinsights.WorkspaceSkuArgs(name="PerGB2018"),
            retention_in_days=RETENTION_DAYS, tags=dict(args.tags), opts=pulumi.ResourceOptions(parent=self))
        monitor.DiagnosticSetting(
            f"{name}-diagnostics", name="autoscaler-logs", resource_uri=args.cluster_id, workspace_id=workspace.id,
            log_analytics_destination_type="Dedicated",
            logs=[monitor.DiagnosticsLogSettingsArgs(category=LOG_CATEGORY, enabled=True)],
            opts=pulumi.ResourceOptions(parent=self))
        self.workspace_name = workspace.name
        self.query = QUERY
        self.query_command = pulumi.Output.concat(
            "az monitor log-analytics query --workspace ", workspace.customer_id, f' --analytics-query "{QUERY}"')
        self.register_outputs({"workspace_name": self.workspace_name})
