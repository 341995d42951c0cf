"""One module per seed scenario, each with ``check(cfg)`` (whole-config rules) and ``build(cfg)``."""

from __future__ import annotations

from types import ModuleType

from stacks import av_resim, function_gpu, gpu_basics, gpu_sharing, training_autoscale

SCENARIOS: dict[str, ModuleType] = {
    "function-gpu": function_gpu,
    "gpu-sharing": gpu_sharing,
    "gpu-basics": gpu_basics,
    "av-resim": av_resim,
    "training-autoscale": training_autoscale,
}
