"""Seed 003: AV re-simulation on a private cluster with private ACR and input/output blob storage."""

from __future__ import annotations

import pulumi

from components.resim_workloads import ResimArgs, ResimWorkloads
from components.settings import GpuPoolConfig
from stacks import outputs
from stacks.azure_layer import build_azure_layer
from stacks.config import PROJECT, StackConfig
from stacks.config_reader import ConfigError
from stacks.gpu_layer import build_gpu_software, build_workspace, k8s_opts
from stacks.images import build_images
from stacks.requirements import require_gpu_operator, require_gpu_pool, require_registry, require_storage_roles

NAMESPACE = "av-resim"


def multi_gpu_pool(cfg: StackConfig) -> GpuPoolConfig | None:
    """The pool of the 2-GPU job: the first whose nodes carry two or more whole GPUs."""
    return next((g for g in cfg.gpu_pools if g.size.gpus >= 2 and g.sharing.mode == "none"), None)


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    require_gpu_operator(cfg)
    require_storage_roles(cfg, "input", "output")
    if cfg.workloads.large_model_image and multi_gpu_pool(cfg) is None:
        raise ConfigError(f"{PROJECT}:workloads.largeModelImage", cfg.workloads.large_model_image,
                          "the 2-GPU job needs a GPU pool with 2 or more unshared GPUs per node, "
                          "e.g. Standard_NC48ads_A100_v4")


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    software = build_gpu_software(cfg, layer)
    workspace = build_workspace(cfg, layer, software, namespace=NAMESPACE, inputs=("input",))
    images = build_images(cfg, layer, {"jobs": "docker/jobs"})
    accounts = {a.role: a for a in cfg.storage.accounts}
    big = multi_gpu_pool(cfg)
    resim = ResimWorkloads("resim", ResimArgs(
        t4_pool=layer.gpu_pools[cfg.gpu_pools[0].pool.name],
        jobs_image=images["jobs"].image_ref,
        workspace=workspace.workspace,
        input_claim=accounts["input"].containers[0],
        output_claim=accounts["output"].containers[0],
        resim_jobs=cfg.workloads.resim_jobs,
        gpu_test_jobs=cfg.workloads.gpu_test_jobs,
        a100_pool=layer.gpu_pools[big.pool.name] if big else None,
        large_model_image=cfg.workloads.large_model_image,
    ), opts=k8s_opts(layer))
    pulumi.export(outputs.JOBS_IMAGE, images["jobs"].image_ref)
    for key, command in resim.commands.items():
        pulumi.export(key, command)
    for key, role, verb in ((outputs.UPLOAD_INPUT, "input", "upload-batch -d {c} -s ./recordings"),
                            (outputs.DOWNLOAD_OUTPUT, "output", "download-batch -s {c} -d ./results")):
        account = accounts[role]
        command = (f"az storage blob {verb.format(c=account.containers[0])} "
                   f"--account-name {account.name or cfg.naming.storage_account(role)} --auth-mode login")
        if cfg.storage.private:
            command += "  # from a machine in the VNet: the account has no public endpoint"
        pulumi.export(key, command)
