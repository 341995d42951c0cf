"""gpu-sharing's acceptance: every inference service answers through its Service, and while the load test runs
each service's pods show GPU work in their own DCGM series (the exporter writes a shared GPU's series once per pod
using it: components/gpu/operator.py)."""

from __future__ import annotations

import json

from program.config.schema import StackConfig
from program.probes import GpuMetricUnderLoad, HttpAnswers, JobFromTemplate, Probes
from stacks.function_gpu.workloads import ANSWER_PATH, SERVICE_PORT
from stacks.gpu_sharing.settings import InferenceSettings
from stacks.gpu_sharing.workloads import LOAD_TEST, NAMESPACE, inference_labels, service_name

QUESTION = json.dumps({"question": "What shares the GPU?",
                       "context": "Time-slicing lets several pods take turns on one GPU. The sea is blue."})
"""An /api/answer body (docker/function/answer_request.py)."""
ANSWERED = r'"score": -?\d'
"""In each answer (docker/function/reader.py)."""


def probes(cfg: StackConfig, st: InferenceSettings) -> Probes:
    services = range(1, st.services + 1)
    answers = tuple(HttpAnswers(f"{service_name(i)} answers through its Service", NAMESPACE, service_name(i),
                                SERVICE_PORT, ANSWER_PATH, ANSWERED, method="POST", body=QUESTION)
                    for i in services)
    selectors = tuple(",".join(f"{k}={v}" for k, v in inference_labels(i).items()) for i in services)
    return (*answers, GpuMetricUnderLoad("each service's GPU series is above zero under the load test", NAMESPACE,
                                         selectors, JobFromTemplate(LOAD_TEST)))
