"""batch-inference's workloads on the platform and its stack outputs."""

from __future__ import annotations

from program.config.errors import validated
from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.batch_inference.settings import (
    ANSWERS,
    BATCH,
    INPUT,
    MODELS,
    OUTPUT,
    REQUESTS,
    BatchSettings,
    batch_pool,
)
from stacks.batch_inference.workloads import BatchInference, BatchInferenceArgs

RUN_NOW, UPLOAD_REQUESTS, UPLOAD_MODEL, DOWNLOAD_ANSWERS = "runNow", "uploadRequests", "uploadModel", "downloadAnswers"
"""Output names: start a run now instead of waiting for the schedule, feed it, and read what it answered."""


def deploy(cfg: StackConfig, st: BatchSettings, platform: Platform) -> Outputs:
    pool = validated(batch_pool(cfg, st), "aksgpu:gpuPools")
    platform.pull_ahead(pool, {"jobs": platform.image("jobs")})
    batch = BatchInference("batch", BatchInferenceArgs(
        pool=platform.gpu_pool(pool),
        jobs_image=platform.image("jobs"),
        workspace=platform.needed_workspace,
        volumes=platform.volumes[BATCH],
        requests=REQUESTS, models=MODELS, answers=ANSWERS,
        schedule=st.schedule, time_zone=st.time_zone,
        queue=platform.job_queue,
    ), opts=platform.opts)
    return {RUN_NOW: batch.run_now_command,
            UPLOAD_REQUESTS: platform.blob_command(INPUT, upload=True, local="./requests", container=REQUESTS),
            UPLOAD_MODEL: platform.blob_command(INPUT, upload=True, local="./checkpoints", container=MODELS),
            DOWNLOAD_ANSWERS: platform.blob_command(OUTPUT, upload=False, local="./answers", container=ANSWERS)}
