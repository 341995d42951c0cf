"""The platform's stack output names (every stack has them); a scenario names its own in its ``deploy.py``.
Components never name outputs.

An output that is a command is one shell command line, run as ``eval "$(pulumi stack output NAME)"``: no ``#``
comments (they would end the line), so what a reader needs to know is printed by the command itself.
"""

from __future__ import annotations

import shlex
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


def explained_failure(command: str, why: str) -> str:
    """``command``, printing ``why`` to stderr when it fails (and still failing)."""
    return f"{command} || {{ echo {shlex.quote(why)} >&2; false; }}"


def image(repository: str) -> str:
    """The output holding what pods pull for an image repository: ``functionImage``, ``jobsImage``."""
    return f"{repository}Image"


Outputs = Mapping[str, pulumi.Input[object]]
"""Stack output name → value."""
