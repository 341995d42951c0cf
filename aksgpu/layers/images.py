"""The stack's images: each folder under docker/ that a scenario runs, built into the stack's registry."""

from __future__ import annotations

from collections.abc import Mapping

from aksgpu.azure.storage import BlobStorage, BlobStorageArgs
from aksgpu.config.schema import StackConfig
from aksgpu.config.types import BuildMode, SecurityException, StorageAuth
from aksgpu.images.built import CONTEXT_CONTAINER, CONTEXT_SAS_POLICY_DAYS, ContainerImage, ImageArgs
from aksgpu.images.context import load_context
from aksgpu.layers.azure import AzureLayer

BUILD_STORAGE_ROLE = "build"
"""Storage role (and name part) of the account that holds uploaded build contexts in ``acr`` mode."""


def build_images(cfg: StackConfig, layer: AzureLayer, folders: Mapping[str, str]) -> dict[str, ContainerImage]:
    """One image per ``repository: docker/<folder>`` entry, built the way ``build.mode`` says."""
    if not folders:
        return {}
    registry = layer.registry
    if registry is None:
        raise ValueError("images need the stack's registry (scenario checks require registry.enabled)")
    context_account = context_container = None
    if cfg.build.mode == BuildMode.ACR:
        # ACR Tasks fetch the context by URL: a read-only SAS for one blob, signed with this account's key, from
        # anywhere in Azure. It holds only build contexts, so shared keys stay off on every data account.
        store = BlobStorage("build-contexts", BlobStorageArgs(
            resource_group_name=layer.network.resource_group_name, location=cfg.location,
            account_name=cfg.naming.storage_account(BUILD_STORAGE_ROLE), containers=(CONTEXT_CONTAINER,),
            tags=cfg.tags, auth=StorageAuth.SAS, sas_expiry_days=CONTEXT_SAS_POLICY_DAYS, holds_data=False,
            security_exception=SecurityException.SHARED_KEY_BUILD_CONTEXT,
        ))
        context_account, context_container = store.account_name, store.containers[CONTEXT_CONTAINER]
    return {
        repository: ContainerImage(f"image-{repository}", ImageArgs(
            context=load_context(folder), repository=repository, mode=cfg.build.mode,
            registry_name=registry.name, login_server=registry.login_server,
            resource_group_name=layer.network.resource_group_name, location=cfg.location,
            context_account=context_account, context_container=context_container,
            pull_access=layer.cluster.kubelet_pull,
        ))
        for repository, folder in folders.items()
    }
