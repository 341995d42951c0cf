"""gpu-basics' workloads on the platform and its stack outputs: training-autoscale's training Job, without its
scale-out, checkpoint storage or prediction service."""

from __future__ import annotations

from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.gpu_basics.settings import TrainingSettings
from stacks.training_autoscale.deploy import TRAINING_LOGS
from stacks.training_autoscale.workloads import TrainingArgs, TrainingWorkload


def deploy(cfg: StackConfig, st: TrainingSettings, platform: Platform) -> Outputs:
    platform.pull_ahead(cfg.gpu_pools[0], {"jobs": platform.image("jobs")})
    training = TrainingWorkload("training", TrainingArgs(
        gpu_pool=platform.gpu_pool(cfg.gpu_pools[0]),
        jobs_image=platform.image("jobs"),
        workspace=platform.needed_workspace,
        steps=st.steps,
    ), opts=platform.opts)
    return {TRAINING_LOGS: training.logs_command}
