"""The ``llm`` section of an llm-serving stack: which model, served how, on which GPU pool.

The checks here are the ones a first ``pulumi up`` would otherwise find an hour in: a model whose weights and
one full-length sequence of KV cache do not fit the pool's GPUs (vLLM refuses to start), bfloat16 on a GPU older
than compute capability 8.0 (vLLM refuses it), a gated model fetched without a token, a hub download that is not
pinned, and KAITO on a stack whose GPU nodes its provisioner would create outside Pulumi's state.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import StrEnum

from stackconfig.expiry import Lifetime
from stackconfig.gpu_sizes import GPU_SIZES, GpuSize
from stackconfig.reader import ConfigError, Section
from stackconfig.schema import PROJECT, GpuDriver, GpuPoolConfig, SharingMode, StackConfig, default_text

SECTION = "llm"
GIB = 2**30


class Runtime(StrEnum):
    VLLM = "vllm"
    """A vLLM Deployment this program writes: scaled by KEDA on its queue, weights from blob or a pinned hub
    revision."""
    KAITO = "kaito"
    """The AKS AI toolchain operator add-on (KAITO 0.6.0) serving one of its presets: no queue-based scaling at
    that version, and its provisioner may create node pools Pulumi does not know."""


class Weights(StrEnum):
    BLOB = "blob"
    """A blob container you upload the weights to (the ``uploadWeights`` output), mounted read-only with the
    server's own identity."""
    HUB = "hub"
    """Hugging Face at the commit ``revision`` names, downloaded when a pod starts (public models only)."""


class Dtype(StrEnum):
    AUTO = "auto"
    """The model's own, except bfloat16 models run in float16 on GPUs without bfloat16 (T4)."""
    HALF = "half"
    BFLOAT16 = "bfloat16"


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
    licence: str = "apache-2.0"

    def weights_gib(self) -> float:
        return self.parameters_b * 1e9 * 2 / GIB  # 16-bit weights

    def kv_gib(self, tokens: int) -> float:
        """KV cache of ``tokens`` tokens in 16 bits: a key and a value per layer and KV head."""
        return tokens * 2 * self.layers * self.kv_heads * self.head_dim * 2 / GIB


# From each model's config.json on Hugging Face (num_hidden_layers, num_key_value_heads, hidden_size /
# num_attention_heads, max_position_embeddings) and its model card (parameters, licence, gating).
MODELS: dict[str, Model] = {
    "Qwen/Qwen2.5-0.5B-Instruct": Model(0.49, 24, 14, 2, 64, 32768),
    "Qwen/Qwen2.5-1.5B-Instruct": Model(1.54, 28, 12, 2, 128, 32768),
    "Qwen/Qwen2.5-3B-Instruct": Model(3.09, 36, 16, 2, 128, 32768, licence="qwen-research"),
    "Qwen/Qwen2.5-7B-Instruct": Model(7.62, 28, 28, 4, 128, 32768),
    "Qwen/Qwen2.5-14B-Instruct": Model(14.7, 48, 40, 8, 128, 32768),
    "Qwen/Qwen2.5-32B-Instruct": Model(32.5, 64, 40, 8, 128, 32768),
    "microsoft/Phi-3.5-mini-instruct": Model(3.82, 32, 32, 32, 96, 131072, licence="mit"),
    "meta-llama/Llama-3.1-8B-Instruct": Model(8.03, 32, 32, 8, 128, 131072, gated=True, licence="llama3.1"),
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
"""Presets whose weights are in their image (no token), with their KAITO 0.6.0 requirement."""

VLLM_IMAGE = "docker.io/vllm/vllm-openai"
VLLM_VERSION = "v0.33.0"
"""vLLM's release image (SOURCES-crds.md §10). Its default build is CUDA 13 (driver R580+: the GPU operator's
595); ``-cu129`` is the CUDA 12.9 build, for AKS-installed drivers whose version AKS does not document."""


@dataclass(frozen=True)
class Settings:
    runtime: Runtime = Runtime.VLLM
    """``vllm``: a vLLM Deployment scaled on its queue; ``kaito``: the AKS AI toolchain operator add-on serving
    ``kaitoPreset`` (long-lived stacks only)."""
    pool: str | None = field(default=None, metadata=default_text("the first GPU pool"))
    """GPU pool the server runs on: one replica per node, using all of the node's GPUs."""
    model: str = "Qwen/Qwen2.5-1.5B-Instruct"
    """vllm: a model of the catalogue (docs/scenarios/llm-serving.md), checked to fit the pool's GPUs."""
    weights: Weights = Weights.BLOB
    """vllm: where the weights come from: ``blob`` (you upload them; the ``uploadWeights`` output) or ``hub``
    (downloaded at pod start at ``revision``)."""
    revision: str | None = None
    """vllm with ``weights: hub``: the model repository's commit (40 hex characters); a branch would move."""
    served_model_name: str | None = field(default=None, metadata=default_text("the model's name, lower case"))
    """The name clients send as ``model``."""
    max_model_len: int = 4096
    """Longest prompt plus answer in tokens (256 to the model's context): KV cache for one such sequence must fit."""
    gpu_memory_utilization: float = 0.90
    """Share of each GPU's memory vLLM may use (0.5-0.95)."""
    dtype: Dtype = Dtype.AUTO
    """``auto``: the model's, except float16 for bfloat16 models on GPUs without bfloat16 (T4)."""
    image: str | None = field(default=None, metadata=default_text(f"{VLLM_IMAGE}:{VLLM_VERSION}, -cu129 on AKS "
                                                                   "drivers"))
    """vllm: the server image: a public tag, copied into the stack's registry at ``pulumi up`` (``az acr import``)
    and run by the digest recorded there, or an ``@sha256:`` reference run as it is."""
    max_replicas: int | None = field(default=None, metadata=default_text("the pool's maxCount"))
    """vllm: most replicas KEDA may run (one per node)."""
    waiting_per_replica: int = 4
    """vllm: queued requests per replica KEDA aims for; more waiting adds replicas, and GPU nodes for them."""
    max_queue_seconds: int = 30
    """The alert fires when the 90th percentile of requests has waited longer than this for 10 minutes."""
    kaito_preset: str = "phi-4-mini-instruct"
    """kaito: the preset served (its weights are in its image)."""


def read(s: Section, cfg: StackConfig) -> Settings:
    d = Settings()
    runtime = s.choice("runtime", Runtime, d.runtime)
    pool_name = s.optional_str("pool")
    names = [g.name for g in cfg.gpu_pools]
    if pool_name is not None and pool_name not in names:
        raise ConfigError(s.key("pool"), pool_name, f"not a GPU pool of this stack; allowed: {', '.join(names)}")
    if not cfg.gpu_pools:
        raise ConfigError(f"{PROJECT}:gpuPools", [], "llm-serving needs a GPU pool")
    pool = cfg.gpu_pool(pool_name) if pool_name else cfg.gpu_pools[0]
    if pool.sharing.mode != SharingMode.NONE:
        raise ConfigError(f"{PROJECT}:gpuPools", {pool.name: pool.sharing.mode.value},
                          "an LLM server takes its GPUs' memory whole; give it a pool with sharing mode none")
    settings = Settings(
        runtime=runtime, pool=pool.name,
        model=s.get("model", str, d.model),
        weights=s.choice("weights", Weights, d.weights),
        revision=s.optional_str("revision"),
        served_model_name=s.optional_str("servedModelName"),
        max_model_len=s.get("maxModelLen", int, d.max_model_len),
        gpu_memory_utilization=s.get("gpuMemoryUtilization", float, d.gpu_memory_utilization),
        dtype=s.choice("dtype", Dtype, d.dtype),
        image=s.optional_str("image"),
        max_replicas=s.get("maxReplicas", int, pool.pool.max_count),
        waiting_per_replica=s.get("waitingPerReplica", int, d.waiting_per_replica),
        max_queue_seconds=s.get("maxQueueSeconds", int, d.max_queue_seconds),
        kaito_preset=s.get("kaitoPreset", str, d.kaito_preset),
    )
    s.done()
    if runtime == Runtime.KAITO:
        _check_kaito(s, cfg, settings, pool)
    else:
        _check_vllm(s, settings, pool)
    return settings


def _check_vllm(s: Section, st: Settings, pool: GpuPoolConfig) -> None:
    model = MODELS.get(st.model)
    if model is None:
        raise ConfigError(s.key("model"), st.model, f"not in the catalogue; allowed: {', '.join(MODELS)}")
    if st.weights == Weights.HUB:
        if model.gated:
            raise ConfigError(s.key("model"), st.model, "is gated on Hugging Face and the hub download takes no "
                              "token; download it with yours and use weights: blob")
        if not re.fullmatch(r"[0-9a-f]{40}", st.revision or ""):
            raise ConfigError(s.key("revision"), st.revision, "weights: hub needs the model repository's commit "
                              "(40 hex characters), so every pod serves the same weights")
    elif st.revision is not None:
        raise ConfigError(s.key("revision"), st.revision, "only for weights: hub; blob weights are what you upload")
    if not 256 <= st.max_model_len <= model.max_context:
        raise ConfigError(s.key("maxModelLen"), st.max_model_len, f"must be 256-{model.max_context} for {st.model}")
    if not 0.5 <= st.gpu_memory_utilization <= 0.95:
        raise ConfigError(s.key("gpuMemoryUtilization"), st.gpu_memory_utilization, "must be between 0.5 and 0.95")
    if st.dtype == Dtype.BFLOAT16 and not supports_bf16(pool.size):
        raise ConfigError(s.key("dtype"), st.dtype.value, f"{pool.size.gpu_model} (compute capability "
                          f"{pool.size.compute_capability}) has no bfloat16; use half or auto")
    if st.image is not None and not re.fullmatch(r"[\w.\-/:]+@sha256:[0-9a-f]{64}|(?:[^/]+\.[^/]+/)?[\w./-]+:[\w.-]+",
                                                 st.image):
        raise ConfigError(s.key("image"), st.image, "must be registry/repository:tag or a @sha256: digest")
    if st.image is not None and st.image.endswith(":latest"):
        raise ConfigError(s.key("image"), st.image, "pin a release tag or a digest, not latest")
    if not 1 <= st.max_replicas <= pool.pool.max_count:
        raise ConfigError(s.key("maxReplicas"), st.max_replicas,
                          f"must be 1-{pool.pool.max_count}: one replica per node of pool '{pool.name}'")
    if not 1 <= st.waiting_per_replica <= 256:
        raise ConfigError(s.key("waitingPerReplica"), st.waiting_per_replica, "must be 1-256")
    if not 1 <= st.max_queue_seconds <= 3600:
        raise ConfigError(s.key("maxQueueSeconds"), st.max_queue_seconds, "must be 1-3600")
    need = memory_needed_gib(model, st.max_model_len)

    def fits(size: GpuSize) -> bool:
        return need <= usable_gib(size, st.gpu_memory_utilization) and model.heads % size.gpus == 0

    if need > usable_gib(pool.size, st.gpu_memory_utilization):
        raise ConfigError(s.key("model"), st.model, f"needs {need:.1f} GiB of GPU memory at maxModelLen "
                          f"{st.max_model_len} but pool '{pool.name}' ({pool.size.name}) lets vLLM use "
                          f"{usable_gib(pool.size, st.gpu_memory_utilization):.1f}; {_size_that_fits(fits)}")
    if model.heads % pool.size.gpus:
        raise ConfigError(s.key("model"), st.model, f"has {model.heads} attention heads, which tensor parallelism "
                          f"over {pool.size.name}'s {pool.size.gpus} GPUs cannot split; {_size_that_fits(fits)}")


def _check_kaito(s: Section, cfg: StackConfig, st: Settings, pool: GpuPoolConfig) -> None:
    # KAITO's gpu-provisioner makes a node pool of its own whenever the Workspace's label selector finds too few
    # ready nodes; Pulumi never sees that pool, so a destroy would leave it running (and billing).
    if cfg.lifetime != Lifetime.LONG_LIVED:
        raise ConfigError(f"{PROJECT}:lifetime", cfg.lifetime.value, "runtime: kaito may leave node pools its "
                          "provisioner created outside Pulumi's state, which the demo expiry cannot destroy; "
                          "use lifetime: long-lived, or runtime: vllm")
    if pool.pool.min_count < 1 or pool.pool.spot:
        raise ConfigError(f"{PROJECT}:gpuPools", {pool.name: f"{pool.pool.priority.value} {pool.pool.min_count}-"
                                                              f"{pool.pool.max_count}"},
                          "runtime: kaito needs its pool's node up (minCount 1, priority regular): KAITO "
                          "provisions a pool of its own when it finds none")
    preset = KAITO_PRESETS.get(st.kaito_preset)
    if preset is None:
        raise ConfigError(s.key("kaitoPreset"), st.kaito_preset, f"allowed: {', '.join(KAITO_PRESETS)}")
    if not preset_fits(preset, pool.size):
        raise ConfigError(s.key("kaitoPreset"), st.kaito_preset, f"needs {preset.gpus} GPU(s) and "
                          f"{preset.total_gib:g} GiB of GPU memory; pool '{pool.name}' has {pool.size.name}; "
                          f"{_size_that_fits(lambda size: preset_fits(preset, size))}")


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


def _size_that_fits(fits) -> str:
    """The hint: the smallest catalogue size (GPU memory per node) that fits, or that none does."""
    sizes = sorted(GPU_SIZES.values(), key=lambda z: (z.gpus * z.gpu_memory_gib, z.gpus, z.name))
    size = next((z for z in sizes if fits(z)), None)
    return f"a size that fits: {size.name}" if size else "no single node of the catalogue fits"


def dtype_flag(st: Settings, pool: GpuPoolConfig) -> str:
    """What ``--dtype`` gets: bfloat16 models in float16 where the GPU has no bfloat16."""
    if st.dtype != Dtype.AUTO:
        return st.dtype.value
    return "half" if MODELS[st.model].bf16 and not supports_bf16(pool.size) else "auto"


def image_reference(st: Settings, pool: GpuPoolConfig) -> str:
    """The configured image, or vLLM's release for the pool's driver (CUDA 12.9 build on AKS-installed ones)."""
    if st.image:
        return st.image
    suffix = "-cu129" if pool.driver == GpuDriver.INSTALL else ""
    return f"{VLLM_IMAGE}:{VLLM_VERSION}{suffix}"


def served_name(st: Settings) -> str:
    return st.served_model_name or st.model.rsplit("/", 1)[-1].lower()


def weights_folder(st: Settings) -> str:
    """Where blob weights sit in the container: the model id with ``/`` as ``--`` (one folder per model)."""
    return st.model.replace("/", "--")


def weights_disk_gib(st: Settings) -> int:
    """Scratch for a hub download: the weights plus a fifth for tokenizer files and partial downloads."""
    return math.ceil(MODELS[st.model].weights_gib() * 1.2) + 1


def of(cfg: StackConfig) -> Settings:
    """An llm-serving stack's settings (the loader has read them)."""
    assert isinstance(cfg.settings, Settings), cfg.scenario
    return cfg.settings
