"""batch-inference's acceptance: given a checkpoint and a request file, a run started from the CronJob answers the
request and its answers reach blob storage."""

from __future__ import annotations

from program.config.schema import StackConfig
from program.probes import RUN, BlobsWritten, BlobUpload, Content, JobCompletes, JobFromTemplate, Probes
from stacks.batch_inference.settings import ANSWERS, INPUT, MODELS, NEEDS, OUTPUT, REQUESTS, BatchSettings
from stacks.batch_inference.workloads import TEMPLATE
from stacks.training_autoscale.probes import CHECKPOINT_PREFIX, ONE_IMAGE

NAMESPACE = NEEDS.namespace or ""
REQUEST = f"e2e-{RUN}.json"
ANSWER_SUFFIX = ".answers.json"
"""docker/jobs/batch_predict.py answer_path: ``<request>.answers.json``."""
ANSWERED = r'"answered": [1-9]'
"""In the run's summary line."""
CHECKPOINT = f"{CHECKPOINT_PREFIX}{1:08d}.pt"
"""What train.py names its checkpoint after one step."""


def probes(cfg: StackConfig, st: BatchSettings) -> Probes:
    answered = "a run answers the request"
    given = (BlobUpload(INPUT, MODELS, CHECKPOINT, Content.DIGITNET_CHECKPOINT),
             BlobUpload(INPUT, REQUESTS, REQUEST, ONE_IMAGE.encode()))
    return (JobCompletes(answered, NAMESPACE, JobFromTemplate(TEMPLATE), log_pattern=ANSWERED, given=given),
            BlobsWritten("its answers are in blob storage", OUTPUT, ANSWERS, f"{REQUEST}{ANSWER_SUFFIX}",
                         after=answered))
