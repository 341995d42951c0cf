"""distributed-training's acceptance: the NCCL all-reduce check across the run's nodes passes the size's published
thresholds (or, for a size without any, reports its figures)."""

from __future__ import annotations

from components.training.jobset import MANIFEST_KEY, manifest_config_map
from program.config.schema import StackConfig
from program.probes import AllReduceVerdict, JobSetFromTemplate, Probes
from stacks.distributed_training.settings import DistributedSettings, nccl_baseline, needs
from stacks.distributed_training.workloads import ALLREDUCE_RUN, leader


def probes(cfg: StackConfig, st: DistributedSettings) -> Probes:
    baseline = nccl_baseline(cfg, st)
    return (AllReduceVerdict(
        f"the NCCL all-reduce across {st.nodes} nodes passes the size's threshold", needs(cfg, st).namespace or "",
        JobSetFromTemplate(ALLREDUCE_RUN, manifest_config_map(ALLREDUCE_RUN), MANIFEST_KEY), leader(ALLREDUCE_RUN),
        warn_below=baseline.warn_below if baseline else None,
        faulty_below=baseline.faulty_below if baseline else None),)
