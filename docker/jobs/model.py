"""The small convolutional classifier that training writes and prediction serves."""

from __future__ import annotations

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
