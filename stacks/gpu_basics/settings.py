"""The ``training`` section of a gpu-basics stack: how long its training Job trains."""

from __future__ import annotations

from typing import ClassVar

from program.config.model import ConfigModel
from program.needs import Needs
from stacks.training_autoscale.settings import Steps


class TrainingSettings(ConfigModel):
    section: ClassVar[str] = "training"

    steps: Steps = 2000


MOVED = {"workloads.trainingSteps": "steps"}
NEEDS = Needs(images={"jobs": "docker/jobs"}, namespace="gpu-basics")
