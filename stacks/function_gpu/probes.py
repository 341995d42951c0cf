"""function-gpu's acceptance: the function's status route, through its Service, says torch computes on CUDA."""

from __future__ import annotations

from program.probes import HttpAnswers
from stacks.function_gpu.workloads import NAMESPACE, SERVICE, SERVICE_PORT, STATUS_PATH

ON_CUDA = r"Torch device is set to cuda"
"""docker/function/device_status.py status_line() where torch sees a GPU (the seed's own text)."""

PROBES = (HttpAnswers("/api/status says cuda through the service", NAMESPACE, SERVICE, SERVICE_PORT, STATUS_PATH,
                      ON_CUDA),)
