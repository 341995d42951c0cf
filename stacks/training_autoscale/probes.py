"""training-autoscale's acceptance: the prediction service answers from the training Job's checkpoints, the Job
finishes and its checkpoints are in blob storage; the spot drill's run comes from the run template (each run its own
checkpoint folder on the blob volume, so an evicted run resumes from it). The endpoint's probe comes first: it asks
from the end of `pulumi up`, so the run sees when the service first answered (offline/runs.py, endpoint-answering)."""

from __future__ import annotations

import json

from program.config.schema import StackConfig
from program.probes import BlobsWritten, ExistingJob, HttpAnswers, JobCompletes, JobFromTemplate, Probes, SpotDrill
from stacks.training_autoscale.settings import CHECKPOINTS, NEEDS, ScaledTrainingSettings, scaling_pool
from stacks.training_autoscale.workloads import (
    CHECKPOINT_FOLDER,
    PREDICT,
    PREDICT_PATH,
    RUN_TEMPLATE,
    SERVICE_PORT,
    TRAIN_JOB,
)

NAMESPACE = NEEDS.namespace or ""
TRAINING_DONE = r'"done": true'
"""In docker/jobs/train.py's summary line: the run took every step."""
CHECKPOINT_PREFIX = "ckpt-"
"""docker/jobs/checkpoints.py's file names: ``ckpt-<step>.pt``."""
ONE_IMAGE = json.dumps({"images": [[0.0] * 784]})
"""A /predict body of one blank image (docker/jobs/model.py parse_images)."""
PREDICTED = r'"label": \d'


def probes(cfg: StackConfig, st: ScaledTrainingSettings) -> Probes:
    trained = "the training Job finishes"
    return (
        HttpAnswers("the prediction service answers from the training Job's checkpoints", NAMESPACE, PREDICT,
                    SERVICE_PORT, PREDICT_PATH, PREDICTED, method="POST", body=ONE_IMAGE),
        JobCompletes(trained, NAMESPACE, ExistingJob(TRAIN_JOB), log_pattern=TRAINING_DONE),
        BlobsWritten("its checkpoints are in blob storage", CHECKPOINTS,
                     cfg.storage_account(CHECKPOINTS).container_names[0], f"{CHECKPOINT_FOLDER}/{CHECKPOINT_PREFIX}",
                     after=trained),
    )


def drill(cfg: StackConfig, st: ScaledTrainingSettings) -> SpotDrill | None:
    pool = scaling_pool(cfg)
    return SpotDrill(NAMESPACE, pool.name, JobFromTemplate(RUN_TEMPLATE)) if pool else None
