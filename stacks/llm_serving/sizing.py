"""What an LLM needs of a GPU node: the models the llm-serving scenario knows (from each model's config.json) and
KAITO's presets, and the arithmetic that says whether one fits a VM size's GPUs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from components.gpu.sizes import GPU_SIZES, GpuSize

GIB = 2**30


@dataclass(frozen=True)
class Model:
    """What the memory check needs from a model's config.json, and whether Hugging Face gates it."""

    parameters_b: float
    layers: int
    heads: int
    """Attention heads: tensor parallelism must divide them."""
    kv_heads: int
    head_dim: int
    max_context: int
    bf16: bool = True
    """Published in bfloat16."""
    gated: bool = False

    def weights_gib(self) -> float:
        return self.parameters_b * 1e9 * 2 / GIB  # 16-bit weights

    def kv_gib(self, tokens: int) -> float:
        """KV cache of ``tokens`` tokens in 16 bits: a key and a value per layer and KV head."""
        return tokens * 2 * self.layers * self.kv_heads * self.head_dim * 2 / GIB


# From each model's config.json on Hugging Face (num_hidden_layers, num_key_value_heads, hidden_size /
# num_attention_heads, max_position_embeddings) and its model card (parameters, gating).
MODELS: dict[str, Model] = {
    "Qwen/Qwen2.5-0.5B-Instruct": Model(0.49, 24, 14, 2, 64, 32768),
    "Qwen/Qwen2.5-1.5B-Instruct": Model(1.54, 28, 12, 2, 128, 32768),
    "Qwen/Qwen2.5-3B-Instruct": Model(3.09, 36, 16, 2, 128, 32768),
    "Qwen/Qwen2.5-7B-Instruct": Model(7.62, 28, 28, 4, 128, 32768),
    "Qwen/Qwen2.5-14B-Instruct": Model(14.7, 48, 40, 8, 128, 32768),
    "Qwen/Qwen2.5-32B-Instruct": Model(32.5, 64, 40, 8, 128, 32768),
    "microsoft/Phi-3.5-mini-instruct": Model(3.82, 32, 32, 32, 96, 131072),
    "meta-llama/Llama-3.1-8B-Instruct": Model(8.03, 32, 32, 8, 128, 131072, gated=True),
}
ACTIVATION_GIB = 1.0
"""What vLLM's profiling run, CUDA graphs and sampler take beside weights and KV cache (an allowance)."""


@dataclass(frozen=True)
class Preset:
    """A KAITO 0.6.0 preset's GPU requirement (presets/workspace/models/*/model.go, SOURCES-crds.md §8)."""

    gpus: int
    total_gib: float


KAITO_PRESETS: dict[str, Preset] = {
    "phi-4-mini-instruct": Preset(1, 8), "phi-3.5-mini-instruct": Preset(1, 8),
    "phi-3-mini-4k-instruct": Preset(1, 9), "phi-3-mini-128k-instruct": Preset(1, 9), "phi-2": Preset(1, 12),
    "falcon-7b-instruct": Preset(1, 14), "mistral-7b-instruct": Preset(1, 16),
    "qwen2.5-coder-7b-instruct": Preset(1, 24), "phi-3-medium-4k-instruct": Preset(1, 28), "phi-4": Preset(1, 40),
    "qwen2.5-coder-32b-instruct": Preset(1, 70), "falcon-40b-instruct": Preset(2, 90),
}
"""KAITO 0.6.0's presets (weights from Microsoft's registry, no token), with what each needs of a node."""


def supports_bf16(size: GpuSize) -> bool:
    return size.compute_capability >= 8.0


def usable_gib(size: GpuSize, utilisation: float) -> float:
    """GPU memory vLLM may use on one node (tensor parallel over its GPUs)."""
    return size.gpus * size.gpu_memory_gib * utilisation


def memory_needed_gib(model: Model, max_model_len: int) -> float:
    """Weights, KV cache for one sequence of ``max_model_len`` tokens, and the activation allowance."""
    return model.weights_gib() + model.kv_gib(max_model_len) + ACTIVATION_GIB


def preset_fits(preset: Preset, size: GpuSize) -> bool:
    return size.gpus >= preset.gpus and size.gpus * size.gpu_memory_gib >= preset.total_gib


def size_that_fits(fits: Callable[[GpuSize], bool]) -> str:
    """The hint: the smallest catalogue size (GPU memory per node) that fits, or that none does."""
    sizes = sorted(GPU_SIZES.values(), key=lambda z: (z.gpus * z.gpu_memory_gib, z.gpus, z.memory_gib, z.name))
    size = next((z for z in sizes if fits(z)), None)
    return f"a size that fits: {size.name}" if size else "no single node of the catalogue fits"
