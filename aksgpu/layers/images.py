"""The stack's images: each folder under docker/ that a scenario runs, built into the stack's registry."""

from __future__ import annotations

from collections.abc import Mapping

from aksgpu.config.schema import StackConfig
from aksgpu.images.built import ContainerImage, ImageArgs
from aksgpu.images.context import load_context
from aksgpu.layers.azure import AzureLayer


def build_images(cfg: StackConfig, layer: AzureLayer, folders: Mapping[str, str]) -> dict[str, ContainerImage]:
    """One image per ``repository: docker/<folder>`` entry, built the way ``build.mode`` says."""
    if not folders:
        return {}
    registry = layer.registry
    if registry is None:
        raise ValueError("images need the stack's registry (scenario checks require registry.enabled)")
    return {
        repository: ContainerImage(f"image-{repository}", ImageArgs(
            context=load_context(folder), repository=repository, mode=cfg.build.mode,
            registry_name=registry.name, login_server=registry.login_server,
            pull_access=layer.cluster.kubelet_pull, reachable_after=layer.registry_reachable_after,
        ))
        for repository, folder in folders.items()
    }
