"""av-resim's workloads on the platform and its stack outputs."""

from __future__ import annotations

from program.config.schema import StackConfig
from program.outputs import Outputs
from program.scenario import Platform
from stacks.av_resim.settings import INPUT, LARGE_MODEL, OUTPUT, RESIM, ResimSettings, multi_gpu_pool
from stacks.av_resim.workloads import ResimArgs, ResimWorkloads

SUBMIT_GPU_TEST, SUBMIT_RESIM, SUBMIT_LARGE_MODEL = "submitGpuTest", "submitResim", "submitLargeModel"
UPLOAD_INPUT, DOWNLOAD_OUTPUT = "uploadInput", "downloadOutput"
"""Output names: the commands that submit each batch, and move recordings in and results out."""
SUBMIT_OUTPUTS = {"gpu-test": SUBMIT_GPU_TEST, "gpu-io": SUBMIT_RESIM, "large-model": SUBMIT_LARGE_MODEL}
"""Job template → the output holding its submit command."""


def deploy(cfg: StackConfig, st: ResimSettings, platform: Platform) -> Outputs:
    big = multi_gpu_pool(cfg)
    # The shards' and GPU tests' pool; the 2-GPU job's image is the user's, which may have no `true` to run.
    platform.pull_ahead(cfg.gpu_pools[0], {"jobs": platform.image("jobs")})
    resim = ResimWorkloads("resim", ResimArgs(
        gpu_pool=platform.gpu_pool(cfg.gpu_pools[0]),
        jobs_image=platform.image("jobs"),
        workspace=platform.needed_workspace,
        input_container=cfg.storage_account(INPUT).container_names[0],
        output_container=cfg.storage_account(OUTPUT).container_names[0],
        resim_volumes=platform.volumes[RESIM],
        resim_jobs=st.jobs,
        gpu_test_jobs=st.gpu_test_jobs,
        multi_gpu_pool=platform.gpu_pool(big) if big else None,
        large_model_image=st.large_model_image,
        large_model_volumes=platform.volumes.get(LARGE_MODEL),
        queue=platform.job_queue,
    ), opts=platform.opts)
    return {**{SUBMIT_OUTPUTS[t]: command for t, command in resim.submit_commands.items()},
            UPLOAD_INPUT: platform.blob_command(INPUT, upload=True, local="./recordings"),
            DOWNLOAD_OUTPUT: platform.blob_command(OUTPUT, upload=False, local="./results")}
