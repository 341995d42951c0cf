"""Stack output names, shared by the program, the scenarios and the tests: components never name outputs."""

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
FUNCTION_BASE_URL = "functionBaseUrl"
FUNCTION_STATUS_URL = "functionStatusUrl"
FUNCTION_PORT_FORWARD = "functionPortForward"
INFERENCE_SERVICES = "inferenceServices"
NOTEBOOK_TOKEN = "notebookToken"
NOTEBOOK_PORT_FORWARD = "notebookPortForward"
RUN_LOAD_TEST = "runLoadTest"
UPLOAD_INPUT = "uploadInput"
DOWNLOAD_OUTPUT = "downloadOutput"
SUBMIT_GPU_TEST = "submitGpuTest"
SUBMIT_RESIM = "submitResim"
SUBMIT_LARGE_MODEL = "submitLargeModel"
TRAINING_LOGS = "trainingLogs"
SUBMIT_TRAINING_RUNS = "submitTrainingRuns"
WATCH_GPU_NODES = "watchGpuNodes"
WATCH_TRAINING_RUNS = "watchTrainingRuns"
WATCH_QUEUE = "watchQueue"
AUTOSCALER_LOGS = "autoscalerLogs"
LLM_BASE_URL = "llmBaseUrl"
LLM_MODEL = "llmModel"
LLM_PORT_FORWARD = "llmPortForward"
LLM_CHAT_EXAMPLE = "llmChatExample"
RUN_LLM_LOAD_TEST = "runLlmLoadTest"
UPLOAD_WEIGHTS = "uploadWeights"
PREDICT_PORT_FORWARD = "predictPortForward"
PREDICT_EXAMPLE = "predictExample"


def image(repository: str) -> str:
    """The output holding what pods pull for an image repository: ``functionImage``, ``jobsImage``."""
    return f"{repository}Image"


FUNCTION_IMAGE = image("function")
JOBS_IMAGE = image("jobs")

Outputs = Mapping[str, pulumi.Input[object]]
"""Stack output name (one of the constants above) → value."""
