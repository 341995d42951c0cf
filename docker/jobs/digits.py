"""MNIST-style data: real MNIST when it can be downloaded, else synthetic digits, batched by step.

A batch is a pure function of (seed, step), so a run resumed at step N sees exactly the batches an
uninterrupted run would have seen, without saving any data-loader state.
"""

from __future__ import annotations

import gzip
import struct
import urllib.request
from pathlib import Path

import torch

MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist"
MNIST_FILES = {"images": "train-images-idx3-ubyte.gz", "labels": "train-labels-idx1-ubyte.gz"}
SYNTHETIC_SIZE = 8192


def _idx(data: bytes) -> torch.Tensor:
    """Parse an IDX file (MNIST's format): magic, dimensions, then unsigned bytes."""
    _, dtype, dims = struct.unpack(">HBB", data[:4])
    if dtype != 0x08:
        raise ValueError(f"unexpected IDX element type {dtype:#x}")
    shape = struct.unpack(f">{dims}I", data[4 : 4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims :]), dtype=torch.uint8).reshape(shape)


def download_mnist(cache: Path, timeout: float = 20.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Training images (N, 1, 28, 28) in [0, 1] and labels (N,), cached on the volume."""
    parts = {}
    for key, name in MNIST_FILES.items():
        target = cache / name
        if not target.exists():
            cache.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(f"{MNIST_MIRROR}/{name}", timeout=timeout) as response:
                data = response.read()
            tmp = target.with_suffix(".part")
            tmp.write_bytes(data)
            tmp.replace(target)
        parts[key] = _idx(gzip.decompress(target.read_bytes()))
    images = parts["images"].float().div(255).unsqueeze(1)
    return images, parts["labels"].long()


def synthetic_digits(seed: int, size: int = SYNTHETIC_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """Ten fixed random 28x28 templates plus noise: learnable like MNIST, generated offline."""
    generator = torch.Generator().manual_seed(seed)
    templates = (torch.rand(10, 1, 28, 28, generator=generator) > 0.7).float()
    labels = torch.randint(0, 10, (size,), generator=generator)
    noise = torch.rand(size, 1, 28, 28, generator=generator) * 0.6
    return (templates[labels] * 0.7 + noise).clamp(0, 1), labels


def load_dataset(source: str, cache: Path, seed: int) -> tuple[str, torch.Tensor, torch.Tensor]:
    """(name, images, labels): ``mnist``, ``synthetic``, or ``auto`` = MNIST if reachable, else synthetic."""
    if source in ("auto", "mnist"):
        try:
            return ("mnist", *download_mnist(cache))
        except OSError as error:
            if source == "mnist":
                raise
            print(f"MNIST not reachable ({error}); training on synthetic digits", flush=True)
    return ("synthetic", *synthetic_digits(seed))


def batch_for_step(images: torch.Tensor, labels: torch.Tensor, seed: int, step: int,
                   batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    index = torch.randint(0, len(labels), (batch_size,), generator=generator)
    return images[index], labels[index]
