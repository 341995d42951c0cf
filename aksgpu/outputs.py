"""The platform's stack output names (every stack has them); a scenario names its own in its ``deploy.py``.
Components never name outputs."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

RESOURCE_GROUP = "resourceGroup"
CLUSTER_NAME = "clusterName"
KUBECONFIG = "kubeconfig"
OIDC_ISSUER_URL = "oidcIssuerUrl"
GPU_POOLS = "gpuPools"
CPU_POOLS = "cpuPools"
GET_CREDENTIALS = "getCredentials"
REGISTRY_LOGIN_SERVER = "registryLoginServer"
STORAGE_ACCOUNTS = "storageAccounts"
PROMETHEUS_QUERY_ENDPOINT = "prometheusQueryEndpoint"
GRAFANA_URL = "grafanaUrl"
IMPORT_GPU_DASHBOARD = "importGpuDashboard"
AUTOSCALER_LOGS = "autoscalerLogs"


def image(repository: str) -> str:
    """The output holding what pods pull for an image repository: ``functionImage``, ``jobsImage``."""
    return f"{repository}Image"


Outputs = Mapping[str, pulumi.Input[object]]
"""Stack output name → value."""
