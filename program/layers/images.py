"""The stack's images: each folder under docker/ that a scenario runs, built into the stack's registry."""

from __future__ import annotations

from collections.abc import Mapping

from components.images.built import ContainerImage, ImageArgs
from components.images.context import load_context
from program.config.schema import StackConfig
from program.layers.azure import AzureLayer


def built_image(cfg: StackConfig, layer: AzureLayer, name: str, folder: str, repository: str,
                build_args: Mapping[str, str] | None = None) -> ContainerImage:
    """``folder`` (``docker/<name>``) built into the stack's registry as ``repository``, the way ``build.mode``
    says."""
    return ContainerImage(name, ImageArgs(context=load_context(folder), repository=repository, mode=cfg.build.mode,
                                          registry=layer.registry_access, build_args=dict(build_args or {})))


def build_images(cfg: StackConfig, layer: AzureLayer, folders: Mapping[str, str]) -> dict[str, ContainerImage]:
    """One image per ``repository: docker/<folder>`` entry."""
    return {repository: built_image(cfg, layer, f"image-{repository}", folder, repository)
            for repository, folder in folders.items()}
