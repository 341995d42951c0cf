"""Azure Monitor managed Prometheus for one cluster: the part of what `az aks update --enable-azure-monitor-metrics`
builds that collection needs, an Azure Monitor workspace, a data collection endpoint and rule forwarding the
cluster's Prometheus metrics to it, and the rule's association with the cluster (whose
``azureMonitorProfile.metrics`` runs the collector). The CLI's template also adds the node and Kubernetes
recording-rule groups that Azure's stock dashboards read; they are not created here (the GPU dashboard and the
alerts query raw series).
Beside them: the GPU alert rule group, an action group that e-mails them, and optionally Azure Managed Grafana
reading the workspace.

Names and shapes follow Azure/prometheus-collector's AddonBicepTemplate (FullAzureMonitorMetricsProfile.bicep):
``MSProm-<region>-<cluster>``, 44 characters for the endpoint and 64 for the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import alertsmanagement, dashboard, monitor

from components.azure import roles
from components.monitoring.alert_rules import AlertRule

PROMETHEUS_STREAM = "Microsoft-PrometheusMetrics"
GPU_DASHBOARD = "dashboards/gpu.json"
"""The committed dashboard, relative to the project (where ``pulumi`` runs)."""
ACCOUNT_DESTINATION = "MonitoringAccount1"


def msprom_name(region: str, cluster: str, limit: int) -> str:
    """The add-on's naming: ``MSProm-<region>-<cluster>``, cut to Azure's limit for the resource."""
    return f"MSProm-{region}-{cluster}"[:limit]


def iso_minutes(minutes: int) -> str:
    return f"PT{minutes}M"


@dataclass(frozen=True)
class GrafanaAccess:
    principal_id: pulumi.Input[str]
    """Who gets Grafana Admin (the identity running ``pulumi up``)."""
    principal_type: pulumi.Input[str]
    """``User``, ``ServicePrincipal`` or ``Group``."""


@dataclass(frozen=True)
class ManagedPrometheusArgs:
    resource_group_name: pulumi.Input[str]
    """Resource group of every resource here."""
    location: str
    """Azure region (the workspace, endpoint and rule live beside the cluster)."""
    workspace_name: str
    """Azure Monitor workspace name."""
    cluster_id: pulumi.Input[str]
    """The AKS cluster the rule is associated with."""
    cluster_name: str
    """Its name: the rule group evaluates only this cluster's series (the ``cluster`` label)."""
    rules: Sequence[AlertRule]
    """Alert rules (at most 20 per group, the API's limit)."""
    tags: Mapping[str, str]
    """Tags of every resource."""
    alert_email: str | None = None
    """Where alerts are e-mailed (an action group); none: alerts show only in Azure Monitor."""
    grafana_name: str | None = None
    """An Azure Managed Grafana of this name reading the workspace; none: no Grafana."""
    grafana_admin: GrafanaAccess | None = None
    """Who may administer that Grafana."""


class ManagedPrometheus(pulumi.ComponentResource):
    workspace_id: pulumi.Output[str]
    query_endpoint: pulumi.Output[str]
    """The workspace's Prometheus query endpoint (KEDA and Grafana read it)."""
    grafana_endpoint: pulumi.Output[str] | None
    import_dashboard_command: pulumi.Output[str] | None
    """The ``az grafana`` command that imports the committed GPU dashboard (with Grafana)."""

    def __init__(self, name: str, args: ManagedPrometheusArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:monitoring:ManagedPrometheus", name, None, opts)  # frozen: components/__init__.py
        child = pulumi.ResourceOptions(parent=self)
        group, region, tags = args.resource_group_name, args.location, dict(args.tags)
        workspace = monitor.AzureMonitorWorkspace(
            f"{name}-workspace", azure_monitor_workspace_name=args.workspace_name, resource_group_name=group,
            location=region, tags=tags, opts=child)
        endpoint = monitor.DataCollectionEndpoint(
            f"{name}-endpoint", data_collection_endpoint_name=msprom_name(region, args.cluster_name, 44),
            resource_group_name=group, location=region, kind="Linux", tags=tags, opts=child)
        rule = monitor.DataCollectionRule(
            f"{name}-rule",
            data_collection_rule_name=msprom_name(region, args.cluster_name, 64),
            resource_group_name=group, location=region, kind="Linux", tags=tags,
            data_collection_endpoint_id=endpoint.id,
            data_sources=monitor.DataCollectionRuleDataSourcesArgs(prometheus_forwarder=[
                monitor.PrometheusForwarderDataSourceArgs(name="PrometheusDataSource", streams=[PROMETHEUS_STREAM])]),
            destinations=monitor.DataCollectionRuleDestinationsArgs(monitoring_accounts=[
                monitor.MonitoringAccountDestinationArgs(account_resource_id=workspace.id,
                                                         name=ACCOUNT_DESTINATION)]),
            data_flows=[monitor.DataFlowArgs(streams=[PROMETHEUS_STREAM], destinations=[ACCOUNT_DESTINATION])],
            opts=child)
        monitor.DataCollectionRuleAssociation(
            f"{name}-association", association_name=msprom_name(region, args.cluster_name, 64),
            resource_uri=args.cluster_id, data_collection_rule_id=rule.id,
            description="Sends the cluster's Prometheus metrics to its Azure Monitor workspace.", opts=child)

        actions = []
        if args.alert_email:
            group_action = monitor.ActionGroup(
                f"{name}-action-group", action_group_name=f"ag-{args.cluster_name}"[:260],
                group_short_name="gpualerts", resource_group_name=group, location="Global", enabled=True,
                email_receivers=[monitor.MicrosoftCommonEmailReceiverArgs(
                    name="email", email_address=args.alert_email, use_common_alert_schema=True)],
                tags=tags, opts=child)
            actions = [alertsmanagement.PrometheusRuleGroupActionArgs(action_group_id=group_action.id)]
        alertsmanagement.PrometheusRuleGroup(
            f"{name}-gpu-alerts", rule_group_name=f"gpu-alerts-{args.cluster_name}",
            resource_group_name=group, location=region, tags=tags,
            # The text the first deploys carry (issue 18 kept every input); the rules it names now live in
            # components/monitoring/alert_rules.py.
            description="GPU cost, capacity and health alerts (aksgpu/monitoring/alert_rules.py).",
            scopes=[workspace.id], cluster_name=args.cluster_name, enabled=True, interval="PT1M",
            rules=[alertsmanagement.PrometheusRuleArgs(
                alert=r.name, expression=r.expression, for_=iso_minutes(r.minutes), severity=r.severity,
                enabled=True, annotations={"summary": r.summary}, actions=actions,
                resolve_configuration=alertsmanagement.PrometheusRuleResolveConfigurationArgs(
                    auto_resolved=True, time_to_resolve="PT10M"),
            ) for r in args.rules],
            opts=child)

        self.grafana_endpoint = self.import_dashboard_command = None
        if args.grafana_name:
            grafana = dashboard.Grafana(
                f"{name}-grafana", workspace_name=args.grafana_name, resource_group_name=group, location=region,
                sku=dashboard.ResourceSkuArgs(name="Standard"),
                identity=dashboard.ManagedServiceIdentityArgs(type="SystemAssigned"),
                properties=dashboard.ManagedGrafanaPropertiesArgs(
                    grafana_integrations=dashboard.GrafanaIntegrationsArgs(azure_monitor_workspace_integrations=[
                        dashboard.AzureMonitorWorkspaceIntegrationArgs(
                            azure_monitor_workspace_resource_id=workspace.id)])),
                tags=tags, opts=child)
            roles.assign(f"{name}-grafana-reads-metrics", roles.MONITORING_DATA_READER,
                         grafana.identity.apply(lambda i: i.principal_id), workspace.id,
                         "Grafana queries the workspace's Prometheus metrics.", self)
            if args.grafana_admin is not None:
                roles.assign(f"{name}-grafana-admin", roles.GRAFANA_ADMIN, args.grafana_admin.principal_id,
                             grafana.id, "The identity running pulumi up administers Grafana (dashboards).", self,
                             principal_type=args.grafana_admin.principal_type)
            self.grafana_endpoint = grafana.properties.apply(lambda p: p.endpoint)
            self.import_dashboard_command = pulumi.Output.concat(
                "az grafana dashboard import --resource-group ", group, " --name ", grafana.name,
                f" --definition {GPU_DASHBOARD} --overwrite true")

        self.workspace_id = workspace.id
        self.query_endpoint = workspace.metrics.apply(lambda m: m.prometheus_query_endpoint)
        self.register_outputs({"workspace_id": self.workspace_id, "query_endpoint": self.query_endpoint})
