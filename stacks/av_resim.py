"""Seed 003: AV re-simulation on a private cluster with private ACR and input/output blob storage."""

from __future__ import annotations

from components.workloads.resim import ResimArgs, ResimWorkloads
from program import outputs
from program.scenario import Outputs, Platform, Scenario
from program.workspace import DataAccess
from stackconfig.reader import ConfigError
from stackconfig.schema import PROJECT, GpuPoolConfig, SharingMode, StackConfig

INPUT, OUTPUT = "input", "output"
"""Storage roles: recordings to re-simulate (mounted read-only), and results."""
RESIM, LARGE_MODEL = "resim", "large-model"
"""Workloads that touch data (their ServiceAccounts and identities)."""
SUBMIT_OUTPUTS = {"gpu-test": outputs.SUBMIT_GPU_TEST, "gpu-io": outputs.SUBMIT_RESIM,
                  "large-model": outputs.SUBMIT_LARGE_MODEL}
"""Job template → the output holding its submit command."""


def multi_gpu_pool(cfg: StackConfig) -> GpuPoolConfig | None:
    """The pool of the 2-GPU job: the first whose nodes carry two or more whole GPUs."""
    return next((g for g in cfg.gpu_pools if g.size.gpus >= 2 and g.sharing.mode == SharingMode.NONE), None)


def data_access(cfg: StackConfig) -> DataAccess:
    """The shards read recordings and write results; the 2-GPU job, a user's image, the same with its own
    identity."""
    access = {RESIM: {INPUT: False, OUTPUT: True}}
    if cfg.workloads.large_model_image:
        access[LARGE_MODEL] = {INPUT: False, OUTPUT: True}
    return access


def check(cfg: StackConfig) -> None:
    if cfg.workloads.large_model_image and multi_gpu_pool(cfg) is None:
        raise ConfigError(f"{PROJECT}:workloads.largeModelImage", cfg.workloads.large_model_image,
                          "the 2-GPU job needs a GPU pool with 2 or more unshared GPUs per node, "
                          "e.g. Standard_NC48ads_A100_v4")


def deploy(cfg: StackConfig, platform: Platform) -> Outputs:
    accounts = {a.role: a for a in cfg.storage.accounts}
    big = multi_gpu_pool(cfg)
    resim = ResimWorkloads("resim", ResimArgs(
        gpu_pool=platform.gpu_pool(cfg.gpu_pools[0]),
        jobs_image=platform.image("jobs"),
        workspace=platform.workspace.workspace,
        input_container=accounts[INPUT].containers[0],
        output_container=accounts[OUTPUT].containers[0],
        resim_volumes=platform.workspace.data[RESIM],
        resim_jobs=cfg.workloads.resim_jobs,
        gpu_test_jobs=cfg.workloads.gpu_test_jobs,
        multi_gpu_pool=platform.gpu_pool(big) if big else None,
        large_model_image=cfg.workloads.large_model_image,
        large_model_volumes=platform.workspace.data.get(LARGE_MODEL),
        queue=platform.job_queue,
    ), opts=platform.opts)
    values: dict[str, object] = {SUBMIT_OUTPUTS[t]: command for t, command in resim.submit_commands.items()}
    for key, role, verb in ((outputs.UPLOAD_INPUT, INPUT, "upload-batch -d {c} -s ./recordings"),
                            (outputs.DOWNLOAD_OUTPUT, OUTPUT, "download-batch -s {c} -d ./results")):
        account = accounts[role]
        command = (f"az storage blob {verb.format(c=account.containers[0])} "
                   f"--account-name {cfg.storage_account_name(account)} --auth-mode login")
        if not cfg.cluster.grant_deployer_admin:
            needed = "Storage Blob Data " + ("Contributor" if SCENARIO.deployer_blob_access[role] else "Reader")
            command += f"  # needs {needed} on the account (cluster.grantDeployerAdmin is off)"
        if cfg.storage.private:
            command += "  # from a machine in the VNet: the account has no public endpoint"
        values[key] = command
    return values


SCENARIO = Scenario(
    name="av-resim",
    summary="AV re-simulation on a private cluster: private ACR and blob storage, a time-sliced T4 spot pool "
            "and an A100 pool, parallel GPU jobs reading and writing blobs, queued by Kueue",
    seed="003 AV re-simulation",
    images={"jobs": "docker/jobs"},
    storage_roles=(INPUT, OUTPUT),
    data_access=data_access,
    job_fan_outs=True,
    namespace="av-resim",
    deployer_blob_access={INPUT: True, OUTPUT: False},  # uploadInput writes recordings, downloadOutput reads
    check=check,
    deploy=deploy,
)
