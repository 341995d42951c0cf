"""The small convolutional classifier that training writes and prediction serves, and the request format its
images arrive in (the prediction service's /predict body, a batch job's request files)."""

from __future__ import annotations

import json
import re

import torch
from torch import nn


class DigitNet(nn.Module):
    """Two convolutions and a linear layer: about 60k parameters, 28x28 greyscale in, 10 logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(32 * 7 * 7, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images).flatten(1))


MAX_IMAGES = 64
MAX_BODY_BYTES = 2 * 1024 * 1024


class BadRequest(ValueError):
    pass


class BadCheckpoint(ValueError):
    """A checkpoint that loads but holds no usable DigitNet (another model's, another layout, or weights that are not
    finite: a training run that diverged)."""


def digitnet_from(state: object) -> DigitNet:
    """The model a checkpoint holds (``{"model": state_dict, ...}``, as train.py writes it), in eval mode, or
    ``BadCheckpoint`` saying what it holds instead. Weights holding NaN or infinity (training diverged) are refused:
    every answer would be NaN, which no JSON answer can hold, so the next older checkpoint is used instead."""
    weights = state.get("model") if isinstance(state, dict) else None
    if not isinstance(weights, dict):
        found = sorted(map(str, state))[:5] if isinstance(state, dict) else type(state).__name__
        raise BadCheckpoint(f"holds no DigitNet weights under 'model' (found {found}), not what train.py writes")
    model = DigitNet()
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as error:
        mismatch = re.search(r"size mismatch for [^:]+", str(error))
        raise BadCheckpoint(f"its weights are not DigitNet's: {mismatch[0] if mismatch else 'unreadable'}") from None
    if missing or unexpected:
        raise BadCheckpoint(f"its weights are not DigitNet's: {len(missing)} missing ({', '.join(missing[:3])}), "
                            f"{len(unexpected)} unexpected ({', '.join(unexpected[:3])})")
    broken = [name for name, tensor in model.state_dict().items() if not torch.isfinite(tensor).all()]
    if broken:
        raise BadCheckpoint(f"its weights are not finite (NaN or infinity in {', '.join(broken[:3])}): "
                            "the training run diverged")
    return model.eval()


def _not_a_number(constant: str) -> float:
    """Python's JSON reader takes NaN and Infinity, which JSON has not (RFC 8259): refused, so no answer holds them."""
    raise BadRequest(f"body holds {constant}, which is not JSON (RFC 8259 has no NaN or Infinity)")


def parse_images(body: bytes) -> torch.Tensor:
    """(N, 1, 28, 28) float tensor from a /predict body, or BadRequest naming what is wrong."""
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"body has {len(body)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        data = json.loads(body, parse_constant=_not_a_number)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"body is not valid JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list) or not data["images"]:
        raise BadRequest('body must be {"images": [image, ...]} with at least one image')
    if len(data["images"]) > MAX_IMAGES:
        raise BadRequest(f"{len(data['images'])} images; the limit is {MAX_IMAGES}")
    try:
        images = torch.tensor(data["images"], dtype=torch.float32)
    except (TypeError, ValueError) as error:
        raise BadRequest(f"images must be lists of numbers: {error}") from None
    if images.dim() == 2 and images.shape[1] == 784:
        images = images.view(-1, 28, 28)
    if images.shape[1:] != (28, 28):
        raise BadRequest(f"each image must be 784 numbers or 28x28, got shape {list(images.shape[1:])}")
    if not torch.isfinite(images).all():  # 1e999 reads as infinity
        raise BadRequest("pixel values must be finite numbers in 0..1")
    if images.min() < 0 or images.max() > 1:
        raise BadRequest("pixel values must lie in 0..1")
    return images.unsqueeze(1)
