"""GPU metrics, alerts and dashboards: managed Prometheus wired to the cluster, the DCGM exporter scraped, and every
PromQL expression parsing and naming only series that managed Prometheus actually keeps."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import promql_parser
import pytest

from components.azure import roles
from components.monitoring.alert_rules import gpu_alert_rules
from components.monitoring.managed_prometheus import msprom_name
from offline.mocks import azure_id
from offline.report import manifest
from program import outputs
from tests import upstream
from tests.helpers import render_with, shape

MC = "azure-native:containerservice:ManagedCluster"
AMW = "azure-native:monitor:AzureMonitorWorkspace"
RULES = "azure-native:alertsmanagement:PrometheusRuleGroup"
ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "dashboards" / "gpu.json"
PROMETHEUS_COLLECTOR = "7.1.1-main-07-21-2026-39583fd5"
DCGM_EXPORTER = "4.6.0-4.8.3"
"""The exporter GPU operator v26.7.0 runs; it collects dcp-metrics-included.csv (DCGM_EXPORTER_COLLECTORS)."""
VLLM = "0.10"
"""The vLLM metrics fixture (tests/fixtures/metrics/vllm-0.10.json): the series used here are ones the deployed
0.33 server and KAITO 0.6.0's vLLM 0.9 both export (vLLM's metrics docs)."""


def metric_names(expression: str) -> set[str]:
    """Every series name a PromQL expression selects, found by walking promql-parser's syntax tree."""
    names: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)
        elif isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
        elif isinstance(node, promql_parser.BinaryExpr):
            walk(node.lhs)
            walk(node.rhs)
        elif isinstance(node, promql_parser.AggregateExpr):
            walk(node.expr)
        elif isinstance(node, promql_parser.Call):
            for arg in node.args:
                walk(arg)
        elif isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)):
            walk(node.expr)

    walk(promql_parser.parse(expression))
    return names


def monitored(renders) -> list:
    """The renders with managed Prometheus (``monitoring.enabled``)."""
    found = [r for r in renders.values() if r.cfg.monitoring.enabled]
    assert found
    return found


@cache
def kept_series() -> frozenset[str]:
    """What managed Prometheus keeps: every DCGM counter the exporter collects and every vLLM series (PodMonitor
    targets, which the minimal ingestion profile does not filter), and kube-state-metrics' series in the add-on's
    minimal ingestion profile."""
    dcgm = {c["name"] for c in upstream.fixture("dcgm", DCGM_EXPORTER, "dcp-metrics-included.json")}
    vllm = {s for series in upstream.fixture("metrics", f"vllm-{VLLM}.json")["series"].values() for s in series}
    keep = upstream.fixture("metrics", "managed-prometheus-minimal-ingestion.json")
    return frozenset(dcgm | vllm | set(keep["kubestate"]))


def test_the_metric_walker_finds_every_selector_and_a_broken_expression_is_refused():
    assert metric_names('sum(rate(a[5m])) / on (x) group_left() max by (x) (b{y="1"}) > bool 0') == {"a", "b"}
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(a[5m])")


def test_every_alert_parses_and_names_only_series_managed_prometheus_keeps(renders):
    """The GPU rules and each scenario's own, as rendered into the stack's rule group."""
    for r in monitored(renders):
        (group,) = r.of_type(RULES)
        for rule in group.revealed["rules"]:
            names = metric_names(rule["expression"])
            assert names and names <= kept_series(), (rule["alert"], names - kept_series())
            assert 0 <= rule["severity"] <= 4


def test_the_alerts_cover_idle_gpus_pending_gpu_pods_gpu_faults_held_nodes_and_spot_evictions():
    rules = {r.name: r for r in gpu_alert_rules(idle_minutes=45, provision_minutes=20)}
    assert set(rules) == {"GpuIdle", "GpuPodPending", "GpuXidError", "GpuFatalXid", "GpuRowRemapFailure",
                          "GpuNodeNotAdmitted", "GpuNodeProblem", "SpotNodeNotReady"}
    assert "GpuNodeNotAdmitted" not in {r.name for r in gpu_alert_rules(45, 20, gate=False)}
    # Each GPU condition AKS's NPD documents, as kube-state-metrics names it.
    for condition in ("GPUMissing", "NVLinkStatusInactive", "XIDErrors", "IBLinkFlapping"):
        assert condition in rules["GpuNodeProblem"].expression
    assert rules["GpuIdle"].minutes == 45 and rules["GpuPodPending"].minutes == 20
    assert "nvidia_com_gpu" in rules["GpuPodPending"].expression
    assert "kubernetes.azure.com/scalesetpriority" in rules["SpotNodeNotReady"].expression


def test_the_rule_group_fits_the_api_one_workspace_scope_few_rules_iso_durations(renders):
    """Microsoft.AlertsManagement/prometheusRuleGroups 2023-03-01 (REST spec): scopes 1 item, rules 1-20,
    interval 1-15 minutes, labels at most 10, severity 0-4, `for` an ISO 8601 duration."""
    for r in monitored(renders):
        (group,) = r.of_type(RULES)
        g = group.revealed
        workspace = r.named("metrics-workspace", AMW)
        assert g["scopes"] == [azure_id(AMW, workspace.name, workspace.inputs)]
        assert g["clusterName"] == r.cfg.naming.cluster()
        assert re.fullmatch(r"PT([1-9]|1[0-5])M", g["interval"])
        assert 1 <= len(g["rules"]) <= 20
        for rule in g["rules"]:
            assert re.fullmatch(r"PT\d+M", rule["for"]) and 0 <= rule["severity"] <= 4
            assert len(rule.get("labels", {})) <= 10
            promql_parser.parse(rule["expression"])
        assert re.fullmatch(r"[^:@/#{}%&+*<>?\\]+", g["ruleGroupName"])


def test_the_cluster_sends_its_prometheus_metrics_to_its_workspace(render_shape):
    r = render_shape("spot-from-zero")
    cluster = r.named("aks-aks", MC)
    assert cluster.inputs["azureMonitorProfile"]["metrics"]["enabled"] is True
    workspace = r.named("metrics-workspace", AMW)
    workspace_id = azure_id(AMW, workspace.name, workspace.inputs)
    rule = r.named("metrics-rule").revealed
    assert rule["kind"] == "Linux"
    assert rule["dataSources"]["prometheusForwarder"][0]["streams"] == ["Microsoft-PrometheusMetrics"]
    (account,) = rule["destinations"]["monitoringAccounts"]
    assert account["accountResourceId"] == workspace_id
    assert rule["dataFlows"] == [{"destinations": [account["name"]], "streams": ["Microsoft-PrometheusMetrics"]}]
    endpoint = r.named("metrics-endpoint")
    assert endpoint.inputs["kind"] == "Linux" and len(endpoint.inputs["dataCollectionEndpointName"]) <= 44
    assert rule["dataCollectionEndpointId"].endswith("/dataCollectionEndpoints/" +
                                                     endpoint.inputs["dataCollectionEndpointName"])
    association = r.named("metrics-association").revealed
    assert association["resourceUri"] == azure_id(MC, cluster.name, cluster.inputs)
    assert association["dataCollectionRuleId"].endswith("/dataCollectionRules/" + rule["dataCollectionRuleName"])


def test_add_on_names_are_cut_to_azures_limits():
    assert msprom_name("eastus", "aks-" + "x" * 60, 44) == ("MSProm-eastus-aks-" + "x" * 60)[:44]


def test_the_dcgm_exporter_is_scraped_through_the_add_ons_own_pod_monitor(render_shape):
    r = render_shape("spot-from-zero")
    monitor = manifest(r.named("gpu-metrics-podmonitor"))
    upstream.validate_against_crd(monitor, upstream.operator_crd(
        "prometheus-collector", PROMETHEUS_COLLECTOR, "podmonitors.azmonitoring.coreos.com"))
    assert monitor["metadata"]["namespace"] == "gpu-operator"
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "nvidia-dcgm-exporter"}}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is True
    assert "gpu-operator-release" in r.named("gpu-metrics-podmonitor").depends_on


def test_the_cheapest_dev_stack_collects_nothing(render_shape):
    r = render_shape("dev-minimal")
    assert "azureMonitorProfile" not in r.named("aks-aks", MC).inputs
    assert not [x for x in r.resources if x.type.startswith(("azure-native:monitor:", "azure-native:alertsmanag"))]


def test_alerts_e_mail_only_when_an_address_is_configured(render_shape):
    assert not render_shape("spot-from-zero").of_type("azure-native:monitor:ActionGroup")
    r = render_with(**{**shape("spot-from-zero"), "monitoring": {"alertEmail": "ml-team@example.com"}})
    (group,) = r.of_type("azure-native:monitor:ActionGroup")
    assert group.inputs["emailReceivers"] == [{"emailAddress": "ml-team@example.com", "name": "email",
                                               "useCommonAlertSchema": True}]
    assert len(group.inputs["groupShortName"]) <= 12
    for rule in r.named("metrics-gpu-alerts").revealed["rules"]:
        assert rule["actions"] == [{"actionGroupId": azure_id(group.type, group.name, group.inputs)}]


def test_grafana_reads_the_workspace_and_the_deployer_administers_it():
    r = render_with(**{**shape("spot-from-zero"), "monitoring": {"grafana": True}})
    grafana = r.named("metrics-grafana")
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,21}[A-Za-z0-9]", grafana.inputs["workspaceName"])
    workspace = r.named("metrics-workspace", AMW)
    workspace_id = azure_id(AMW, workspace.name, workspace.inputs)
    integrations = grafana.inputs["properties"]["grafanaIntegrations"]["azureMonitorWorkspaceIntegrations"]
    assert integrations == [{"azureMonitorWorkspaceResourceId": workspace_id}]
    reader = r.named("metrics-grafana-reads-metrics").revealed
    assert reader["scope"] == workspace_id and reader["roleDefinitionId"].endswith(roles.MONITORING_DATA_READER)
    admin = r.named("metrics-grafana-admin").revealed
    assert admin["roleDefinitionId"].endswith(roles.GRAFANA_ADMIN)
    assert r.outputs[outputs.GRAFANA_URL].startswith("https://") and ".grafana.azure.com" in \
        r.outputs[outputs.GRAFANA_URL]
    command = r.outputs[outputs.IMPORT_GPU_DASHBOARD]
    assert command.startswith("az grafana dashboard import --resource-group ")
    assert f"--name {grafana.inputs['workspaceName']} --definition dashboards/gpu.json" in command
    assert (ROOT / "dashboards/gpu.json").is_file()


def test_the_query_endpoint_is_an_output_and_grafana_only_when_asked(render_shape):
    r = render_shape("spot-from-zero")
    assert r.outputs[outputs.PROMETHEUS_QUERY_ENDPOINT].endswith(".prometheus.monitor.azure.com")
    assert outputs.GRAFANA_URL not in r.outputs and outputs.IMPORT_GPU_DASHBOARD not in r.outputs
    assert outputs.PROMETHEUS_QUERY_ENDPOINT not in render_shape("dev-minimal").outputs


def test_autoscaler_logs_go_to_log_analytics_when_asked(render_shape):
    assert not render_shape("spot-from-zero").of_type("azure-native:monitor:DiagnosticSetting")
    r = render_shape("training")
    (setting,) = r.of_type("azure-native:monitor:DiagnosticSetting")
    assert setting.inputs["logs"] == [{"category": "cluster-autoscaler", "enabled": True}]
    cluster = r.named("aks-aks", MC)
    assert setting.revealed["resourceUri"] == azure_id(MC, cluster.name, cluster.inputs)
    assert setting.revealed["workspaceId"].endswith("/workspaces/" + r.cfg.naming.log_workspace())


def test_the_dashboard_queries_parse_and_name_only_kept_series():
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(expressions) >= 8
    for expression in expressions:
        names = metric_names(expression)
        assert names <= kept_series(), (expression, names - kept_series())
    titles = " ".join(p["title"] for p in dashboard["panels"]).lower()
    for view in ("per gpu", "node pool", "namespace", "pod", "memory", "llm requests waiting", "time to first token",
                 "tokens per second"):
        assert view in titles


def utilisation_expressions(renders) -> list[tuple[str, str]]:
    """(where, PromQL) for every expression that reads GPU utilisation: alerts, KEDA queries, the dashboard."""
    found = []
    for r in renders.values():
        for group in r.of_type("azure-native:alertsmanagement:PrometheusRuleGroup"):
            found += [(f"{r.stack} {rule['alert']}", rule["expression"]) for rule in group.inputs["rules"]]
        for obj in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject"):
            found += [(f"{r.stack} {obj.name}", t["metadata"]["query"]) for t in obj.inputs["spec"]["triggers"]]
    dashboard = json.loads(DASHBOARD.read_text())
    found += [(f"dashboard {p['title']}", t["expr"]) for p in dashboard["panels"] for t in p["targets"]]
    return [(where, e) for where, e in found if "DCGM_FI_DEV_GPU_UTIL" in e and not e.startswith("count ")]


def test_every_utilisation_query_reads_mig_instances_from_the_profiling_metric(renders):
    """Round-3 k8s audit #3: DCGM reports DCGM_FI_DEV_GPU_UTIL as 0 on MIG instances (NVIDIA/dcgm-exporter#216,
    #430: use DCGM_FI_PROF_GR_ENGINE_ACTIVE), so GpuIdle always fired on gpu-sharing-mig and its panels stayed
    flat. The exporter labels a MIG instance's series with GPU_I_ID (internal/pkg/render/render_metrics.go)."""
    found = utilisation_expressions(renders)
    assert {where.split()[0] for where, _ in found} >= {"gpu-sharing-mig", "dashboard"}
    for where, expression in found:
        assert re.search(r'DCGM_FI_DEV_GPU_UTIL\{GPU_I_ID=""', expression), where
        assert re.search(r'100 \* (max_over_time\()?DCGM_FI_PROF_GR_ENGINE_ACTIVE\{GPU_I_ID!=""', expression), where
        assert metric_names(expression) <= kept_series(), where


def test_the_xid_alert_fires_on_a_new_error_and_resolves():
    """Round-3 k8s audit #6: DCGM_FI_DEV_XID_ERRORS is "Value of the last XID error encountered" (the exporter's
    dcp-metrics-included.csv), so `> 0` fired on one error until the exporter restarted."""
    help_text = {c["name"]: c["help"] for c in upstream.fixture("dcgm", DCGM_EXPORTER, "dcp-metrics-included.json")}
    assert help_text["DCGM_FI_DEV_XID_ERRORS"] == "Value of the last XID error encountered."
    (rule,) = [r for r in gpu_alert_rules(30, 15) if r.name == "GpuXidError"]
    assert rule.expression == "max by (Hostname, gpu) (changes(DCGM_FI_DEV_XID_ERRORS[10m])) > 0"
    assert metric_names(rule.expression) == {"DCGM_FI_DEV_XID_ERRORS"}


def test_the_fatal_xid_alert_names_the_codes_that_need_a_reset_and_not_those_a_program_causes():
    """NVIDIA's XID catalogue: 48 double-bit ECC, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP errors need a
    GPU reset or a node restart; 13 (graphics engine exception), 31 (MMU fault) and 43 (a program stopped) are a
    program's own faults and leave the GPU usable."""
    (rule,) = [r for r in gpu_alert_rules(30, 15) if r.name == "GpuFatalXid"]
    codes = {int(c) for c in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)", rule.expression)}
    assert {48, 79, 95, 119, 120} <= codes and not codes & {13, 31, 43}
    promql_parser.parse(rule.expression)
    assert metric_names(rule.expression) == {"DCGM_FI_DEV_XID_ERRORS"}
