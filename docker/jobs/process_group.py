"""The processes of one training run: one under a plain `python`, N under `torchrun` (N GPUs, N nodes).

torchrun (or the engine's pod spec) sets RANK, WORLD_SIZE and LOCAL_RANK; without them the run is a
group of one and nothing here talks to another process. GPUs use NCCL, the CPU gloo: the same
code runs in CI with two CPU processes and on InfiniBand nodes with sixteen GPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    device: torch.device

    @property
    def is_leader(self) -> bool:
        """Rank 0: the one process that writes checkpoints and prints the summary."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def broadcast(self, value: object) -> object:
        """The leader's ``value`` on every rank (a step number, a dataset name)."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def mean(self, value: float) -> float:
        """The mean of a per-rank number over all ranks (each rank's loss on its shard)."""
        if not self.distributed:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.item() / self.size

    def shard(self, tensor: torch.Tensor) -> torch.Tensor:
        """This rank's equal slice of a global batch, so that N ranks together see what one would."""
        if len(tensor) % self.size:
            raise ValueError(f"a batch of {len(tensor)} does not split evenly over {self.size} processes")
        return tensor.tensor_split(self.size)[self.rank]

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def join(device: str = "auto") -> World:
    """This process's place in the run; starts the process group where torchrun launched several."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"LOCAL_RANK {local_rank} has no GPU: this node shows {torch.cuda.device_count()}; "
                             "start at most one process per GPU (torchrun --nproc-per-node)")
        place = torch.device("cuda", local_rank)
        torch.cuda.set_device(place)
    else:
        place = torch.device(device if device not in ("auto", "cuda") else "cpu")
    if size > 1 and not dist.is_initialized():
        # The rendezvous (MASTER_ADDR/PORT) is torchrun's; the backend follows the device.
        dist.init_process_group(backend="nccl" if place.type == "cuda" else "gloo",
                                device_id=place if place.type == "cuda" else None)
    return World(rank=rank, size=size, device=place)
