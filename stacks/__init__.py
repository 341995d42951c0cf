"""The scenarios, one folder each, and ``REGISTRY``: the one list of them, the values of ``aksgpu:scenario``.

A scenario folder holds its config section and needs (``settings.py``), its deploy and outputs (``deploy.py``), its
workload components (``workloads.py``), its docs page (``README.md``) and its tests. Adding one: its folder, one
line below, its stack file ``Pulumi.<name>.yaml`` (docs/development.md).
"""

from stacks import (
    av_resim,
    batch_inference,
    distributed_training,
    function_gpu,
    gpu_basics,
    gpu_sharing,
    llm_serving,
    training_autoscale,
)

REGISTRY = {s.name: s for s in (
    function_gpu.SCENARIO,
    gpu_sharing.SCENARIO,
    gpu_basics.SCENARIO,
    av_resim.SCENARIO,
    training_autoscale.SCENARIO,
    llm_serving.SCENARIO,
    batch_inference.SCENARIO,
    distributed_training.SCENARIO,
)}
"""Scenario name → scenario, in the order the docs list them."""
