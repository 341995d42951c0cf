"""The ``llm`` section of an llm-serving stack: which model, served how, on which GPU pool.

The checks here are the ones a first ``pulumi up`` would otherwise find an hour in: a model whose weights and
one full-length sequence of KV cache do not fit the pool's GPUs (vLLM refuses to start), bfloat16 on a GPU older
than compute capability 8.0 (vLLM refuses it), a gated model fetched without a token, a hub download that is not
pinned, and KAITO on a stack whose GPU nodes its provisioner would create outside Pulumi's state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from components.gpu.sizes import GpuSize
from components.monitoring.alert_rules import AlertRule
from components.vocabulary import GpuDriver, SecurityException, SharingMode
from program.config.errors import ConfigError, validated
from program.config.expiry import Lifetime
from program.config.keys import KEY_PREFIX
from program.config.model import ConfigModel, derived
from program.config.rules import unknown_gpu_pool
from program.config.schema import GpuPool, StackConfig, matching
from program.needs import Needs
from stacks.llm_serving.sizing import (
    KAITO_PRESETS,
    MODELS,
    memory_needed_gib,
    preset_fits,
    size_that_fits,
    supports_bf16,
    usable_gib,
)

SECTION = f"{KEY_PREFIX}llm."
"""Where this scenario's keys live in a stack file."""


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
    IMAGE = "image"
    """Hugging Face at the commit ``revision`` names, fetched once by ``pulumi up`` into an image in the stack's
    registry (docker/weights); a node pulls it once and containerd keeps it, so a second replica or a restarted
    pod on the node copies the weights from local disk, and the cluster never reaches Hugging Face (public models
    only)."""


class Dtype(StrEnum):
    AUTO = "auto"
    """The model's own, except bfloat16 models run in float16 on GPUs without bfloat16 (T4)."""
    HALF = "half"
    BFLOAT16 = "bfloat16"


VLLM_IMAGE = "docker.io/vllm/vllm-openai"
VLLM_VERSION = "v0.33.0"
"""vLLM's release image (SOURCES-crds.md §10). Its default build is CUDA 13 (driver R580+: the GPU operator's
595); ``-cu129`` is the CUDA 12.9 build, for AKS-installed drivers whose version AKS does not document."""


def _image(value: str) -> str:
    if not re.fullmatch(r"[\w.\-/:]+@sha256:[0-9a-f]{64}|(?:[^/]+\.[^/]+/)?[\w./-]+:[\w.-]+", value):
        raise ValueError("must be registry/repository:tag or a @sha256: digest")
    if value.endswith(":latest"):
        raise ValueError("pin a release tag or a digest, not latest")
    return value


_docker_hub_user = matching(r"[a-z0-9]{4,30}", "must be a Docker Hub user name: 4-30 lowercase letters and digits")


class LlmSettings(ConfigModel):
    section: ClassVar[str] = "llm"

    runtime: Runtime = Runtime.VLLM
    """`vllm`: a vLLM Deployment scaled on its queue; `kaito`: the AKS AI toolchain operator add-on serving
    `kaitoPreset` (long-lived stacks only)."""
    pool: str | None = derived("the first GPU pool")
    """GPU pool the server runs on: one replica per node, using all of the node's GPUs."""
    model: str = "Qwen/Qwen2.5-1.5B-Instruct"
    """vllm: a model of the catalogue (stacks/llm_serving/README.md), checked to fit the pool's GPUs."""
    weights: Weights = Weights.BLOB
    """vllm: where the weights come from: `blob` (you upload them; the `uploadWeights` output), `hub` (downloaded
    at every pod start at `revision`) or `image` (fetched at `revision` once, into an image in the stack's registry
    that each node keeps)."""
    revision: str | None = None
    """vllm with `weights: hub` or `image`: the model repository's commit (40 hex characters); a branch would
    move."""
    served_model_name: str | None = derived("the model's name, lower case")
    """The name clients send as `model`."""
    max_model_len: int = Field(4096, ge=256)
    """Longest prompt plus answer in tokens (256 to the model's context): KV cache for one such sequence must fit."""
    gpu_memory_utilization: float = Field(0.90, ge=0.5, le=0.95)
    """Share of each GPU's memory vLLM may use."""
    dtype: Dtype = Dtype.AUTO
    """`auto`: the model's, except float16 for bfloat16 models on GPUs without bfloat16 (T4)."""
    image: Annotated[str, AfterValidator(_image)] | None = derived(
        f"{VLLM_IMAGE}:{VLLM_VERSION}, -cu129 on AKS drivers")
    """vllm: the server image: a public tag, copied into the stack's registry at `pulumi up` (`az acr import`)
    and run by the digest recorded there, or an `@sha256:` reference run as it is."""
    docker_hub_username: Annotated[str, _docker_hub_user] | None = None
    """vllm: a Docker Hub account the image copy signs in with; `pulumi up` reads its access token from the
    `DOCKERHUB_TOKEN` environment variable (a CI secret), never from state. Unset: an anonymous copy, which shares
    Docker Hub's pull limits."""
    max_replicas: int | None = derived("the pool's maxCount", ge=1)
    """vllm: most replicas KEDA may run (one per node)."""
    waiting_per_replica: int = Field(4, ge=1, le=256)
    """vllm: queued requests per replica KEDA aims for; more waiting adds replicas, and GPU nodes for them."""
    max_queue_seconds: int = Field(30, ge=1, le=3600)
    """The alert fires when the 90th percentile of requests has waited longer than this for 10 minutes."""
    kaito_preset: str = "phi-4-mini-instruct"
    """kaito: the preset served."""


MODELS_ROLE = "models"
"""Storage role of the weights account (blob weights)."""
SERVER = "server"
"""The workload that reads the weights: its own identity and read-only volume."""


def server_pool(cfg: StackConfig, st: LlmSettings) -> GpuPool | None:
    """The GPU pool the server runs on (None: ``check`` reports the pool ``llm.pool`` names is not one)."""
    return cfg.pick_gpu_pool(st.pool)


def checked_server_pool(cfg: StackConfig, st: LlmSettings) -> GpuPool:
    """``server_pool`` once ``check`` has passed: the pool exists."""
    return validated(server_pool(cfg, st), f"{SECTION}pool")


def max_replicas(cfg: StackConfig, st: LlmSettings) -> int:
    return st.max_replicas if st.max_replicas is not None else checked_server_pool(cfg, st).max_count


def blob_weights(st: LlmSettings) -> bool:
    return st.runtime == Runtime.VLLM and st.weights == Weights.BLOB


def from_hugging_face(st: LlmSettings) -> bool:
    """Weights fetched from Hugging Face at ``revision``: by every pod (hub) or once into an image."""
    return st.weights in (Weights.HUB, Weights.IMAGE)


def check(cfg: StackConfig, st: LlmSettings) -> Iterator[ConfigError]:
    found = list(unknown_gpu_pool(cfg, f"{SECTION}pool", st.pool))
    if found:
        yield from found
        return
    pool = checked_server_pool(cfg, st)
    if pool.sharing.mode != SharingMode.NONE:
        yield ConfigError("aksgpu:gpuPools", {pool.name: pool.sharing.mode.value},
                          "an LLM server takes its GPUs' memory whole; give it a pool with sharing mode none")
    accounts = [a for a in cfg.storage.accounts if a.role == MODELS_ROLE]
    if blob_weights(st) and (len(accounts) != 1 or len(accounts[0].container_names) != 1):
        yield ConfigError("aksgpu:storage.accounts", [a.role for a in cfg.storage.accounts],
                          f"llm.weights: blob needs one storage account of role {MODELS_ROLE} with one container "
                          "(the weights); or set llm.weights: hub")
    yield from (_check_kaito(cfg, st, pool) if st.runtime == Runtime.KAITO else _check_vllm(cfg, st, pool))


def _check_vllm(cfg: StackConfig, st: LlmSettings, pool: GpuPool) -> Iterator[ConfigError]:
    model = MODELS.get(st.model)
    if model is None:
        yield ConfigError(f"{SECTION}model", st.model, f"not in the catalogue; allowed: {', '.join(MODELS)}")
        return
    if from_hugging_face(st):
        if model.gated:
            yield ConfigError(f"{SECTION}model", st.model,
                              f"is gated on Hugging Face and weights: {st.weights} downloads "
                              "without a token; download it with yours and use weights: blob")
        if not re.fullmatch(r"[0-9a-f]{40}", st.revision or ""):
            yield ConfigError(f"{SECTION}revision", st.revision, f"weights: {st.weights} needs the model repository's "
                              "commit (40 hex characters), so every pod serves the same weights")
    elif st.revision is not None:
        yield ConfigError(f"{SECTION}revision", st.revision,
                          "only for weights: hub or image; blob weights are what you "
                          "upload")
    if st.max_model_len > model.max_context:
        yield ConfigError(f"{SECTION}maxModelLen", st.max_model_len, f"must be 256-{model.max_context} for {st.model}")
    if st.dtype == Dtype.BFLOAT16 and not supports_bf16(pool.size):
        yield ConfigError(f"{SECTION}dtype", st.dtype.value, f"{pool.size.gpu_model} (compute capability "
                          f"{pool.size.compute_capability}) has no bfloat16; use half or auto")
    if st.docker_hub_username and not from_docker_hub(image_reference(st, pool)):
        yield ConfigError(f"{SECTION}dockerHubUsername", st.docker_hub_username,
                          f"signs in the copy from Docker Hub; {image_reference(st, pool)} is not copied from there")
    if not 1 <= max_replicas(cfg, st) <= pool.max_count:
        yield ConfigError(f"{SECTION}maxReplicas", st.max_replicas,
                          f"must be 1-{pool.max_count}: one replica per node of pool '{pool.name}'")
    need = memory_needed_gib(model, st.max_model_len)

    def fits(size: GpuSize) -> bool:
        return need <= usable_gib(size, st.gpu_memory_utilization) and model.heads % size.gpus == 0

    if need > usable_gib(pool.size, st.gpu_memory_utilization):
        yield ConfigError(f"{SECTION}model", st.model, f"needs {need:.1f} GiB of GPU memory at maxModelLen "
                          f"{st.max_model_len} but pool '{pool.name}' ({pool.size.name}) lets vLLM use "
                          f"{usable_gib(pool.size, st.gpu_memory_utilization):.1f}; {size_that_fits(fits)}")
    elif model.heads % pool.size.gpus:
        yield ConfigError(f"{SECTION}model", st.model,
                          f"has {model.heads} attention heads, which tensor parallelism over "
                          f"{pool.size.name}'s {pool.size.gpus} GPUs cannot split; {size_that_fits(fits)}")


def _check_kaito(cfg: StackConfig, st: LlmSettings, pool: GpuPool) -> Iterator[ConfigError]:
    # KAITO's gpu-provisioner makes a node pool of its own whenever the Workspace's label selector finds too few
    # ready nodes; Pulumi never sees that pool, so a destroy would leave it running (and billing).
    if cfg.lifetime != Lifetime.LONG_LIVED:
        yield ConfigError("aksgpu:lifetime", cfg.lifetime.value, "runtime: kaito may leave node pools its "
                          "provisioner created outside Pulumi's state, which the demo expiry cannot destroy; "
                          "use lifetime: long-lived, or runtime: vllm")
    if pool.min_count < 1 or pool.spot:
        yield ConfigError("aksgpu:gpuPools", {pool.name: f"{pool.priority.value} {pool.min_count}-{pool.max_count}"},
                          "runtime: kaito needs its pool's node up (minCount 1, priority regular): KAITO "
                          "provisions a pool of its own when it finds none")
    preset = KAITO_PRESETS.get(st.kaito_preset)
    if preset is None:
        yield ConfigError(f"{SECTION}kaitoPreset", st.kaito_preset, f"allowed: {', '.join(KAITO_PRESETS)}")
    elif not preset_fits(preset, pool.size):
        yield ConfigError(f"{SECTION}kaitoPreset", st.kaito_preset, f"needs {preset.gpus} GPU(s) and "
                          f"{preset.total_gib:g} GiB of GPU memory; pool '{pool.name}' has {pool.size.name}; "
                          f"{size_that_fits(lambda size: preset_fits(preset, size))}")
    # KAITO 0.6's workspace chart runs NVIDIA's device plugin (v0.17) on every node (kaito-project/kaito#1700), set
    # up for AKS's driver and tolerating only its pools' taints: the operator's plugin stays off (needs), so the pool
    # takes AKS's driver, and the GPU node gate, whose taint KAITO's plugin does not tolerate, stays off.
    if pool.gpu_driver != GpuDriver.INSTALL:
        yield ConfigError(f"aksgpu:gpuPools[{cfg.gpu_pools.index(pool)}].driver", pool.gpu_driver.value,
                          "runtime: kaito needs driver: install (KAITO runs its own NVIDIA device plugin, made for "
                          "AKS's driver)")
    if cfg.addons.gpu_node_gate:
        yield ConfigError("aksgpu:addons.gpuNodeGate", True, "runtime: kaito needs it false: KAITO's own device "
                          "plugin does not tolerate the gate's taint, so a held node would never show its GPUs")


def dtype_flag(st: LlmSettings, pool: GpuPool) -> str:
    """What ``--dtype`` gets: bfloat16 models in float16 where the GPU has no bfloat16."""
    if st.dtype != Dtype.AUTO:
        return st.dtype.value
    return "half" if MODELS[st.model].bf16 and not supports_bf16(pool.size) else "auto"


def from_docker_hub(reference: str) -> bool:
    """A tag the deploy copies from Docker Hub (a digest is run as it is, never copied)."""
    host = reference.split("/", 1)[0]
    return "@sha256:" not in reference and (host == "docker.io" or "." not in host)


def image_reference(st: LlmSettings, pool: GpuPool) -> str:
    """The configured image, or vLLM's release for the pool's driver (CUDA 12.9 build on AKS-installed ones)."""
    if st.image:
        return st.image
    suffix = "-cu129" if pool.gpu_driver == GpuDriver.INSTALL else ""
    return f"{VLLM_IMAGE}:{VLLM_VERSION}{suffix}"


def served_name(st: LlmSettings) -> str:
    return st.served_model_name or st.model.rsplit("/", 1)[-1].lower()


def weights_folder(st: LlmSettings) -> str:
    """Where blob weights sit in the container: the model id with ``/`` as ``--`` (one folder per model)."""
    return st.model.replace("/", "--")


def weights_disk_gib(st: LlmSettings) -> int:
    """Disk for the weights in the pod (a hub download or the image's copy): the weights plus a fifth for tokenizer
    files and partial downloads."""
    return math.ceil(MODELS[st.model].weights_gib() * 1.2) + 1


def alert_rules(st: LlmSettings) -> list[AlertRule]:
    limit = st.max_queue_seconds
    return [AlertRule(
        "LlmRequestsWaiting",
        "histogram_quantile(0.9, sum by (le, namespace) (rate(vllm:request_queue_time_seconds_bucket[5m]))) "
        f"> {limit}",
        10, 2,
        f"LLM requests wait more than {limit} s before the server starts them (90th percentile): the replicas "
        "are saturated and cannot grow (the pool's maxCount, GPU quota or spot capacity), or a replica is stuck.")]


KAITO_WORKSPACE_CRD = "workspaces.kaito.sh"
"""Installed by the AI toolchain operator add-on; the first Kubernetes call waits until the cluster serves it."""


def needs(cfg: StackConfig, st: LlmSettings) -> Needs:
    kaito = st.runtime == Runtime.KAITO
    pool = server_pool(cfg, st)
    return Needs(
        autoscaled=not kaito and pool is not None and max_replicas(cfg, st) > 1,
        images={"jobs": "docker/jobs"}, namespace="llm-serving",
        data_access={SERVER: {MODELS_ROLE: False}} if blob_weights(st) else {},
        deployer_blob_access={MODELS_ROLE: True},  # uploadWeights writes the weights
        alert_rules=alert_rules(st),
        ai_toolchain_operator=kaito, add_on_kinds=(KAITO_WORKSPACE_CRD,) if kaito else (),
        # KAITO 0.6.0 writes its inference pods without a security context: restricted admission would refuse them.
        namespace_exception=SecurityException.BASELINE_OPERATOR_PODS if kaito else None)
