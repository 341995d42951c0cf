"""The ``function`` section of a function-gpu stack: which pool the function runs on, who may call it, how it
scales. Plain Python (pydantic), read and checked with the rest of the config."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from program.config.errors import ConfigError
from program.config.model import ConfigModel, derived
from program.config.rules import unknown_gpu_pool
from program.config.schema import GpuPool, StackConfig
from program.needs import Needs


class Exposure(StrEnum):
    INTERNAL = "internal"
    PUBLIC = "public"


def _source_range(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("must be a CIDR such as 203.0.113.0/24") from None
    if network.prefixlen == 0:
        raise ValueError("would open the function to the whole internet; name the ranges that may call it")
    return value


MaxContextChars = Annotated[int, Field(ge=100, le=200_000,
                                       description="Longest context `/api/answer` accepts (longer gets a 400).")]
TargetUtilisation = Annotated[int, Field(ge=10, le=100, description=(
    "With KEDA: each replica's GPU utilisation (%) to aim for; above it, more replicas and GPU nodes."))]


class FunctionSettings(ConfigModel):
    section: ClassVar[str] = "function"

    pool: str | None = derived("the first GPU pool")
    """GPU pool the function's Deployment runs on (one GPU per replica)."""
    exposure: Exposure = Exposure.INTERNAL
    """`internal`: a LoadBalancer IP in the VNet only (reach it from the VNet or with `kubectl port-forward`);
    `public`: a public IP as in seed 000, open only to `allowedSourceRanges`."""
    allowed_source_ranges: tuple[Annotated[str, AfterValidator(_source_range)], ...] = Field(
        (), json_schema_extra={"defaultText": "internal: network.addressSpace; public: none, so required"})
    """CIDRs that may reach the LoadBalancer (`loadBalancerSourceRanges`). Add peered or VPN ranges for an internal
    function called from outside its VNet."""
    max_context_chars: MaxContextChars = 20_000
    target_gpu_utilisation: TargetUtilisation = 60


def function_pool(cfg: StackConfig, st: FunctionSettings) -> GpuPool | None:
    """The GPU pool the function runs on (None: ``check`` reports the pool ``function.pool`` names is not one)."""
    return cfg.pick_gpu_pool(st.pool)


def source_ranges(cfg: StackConfig, st: FunctionSettings) -> tuple[str, ...]:
    """Who may reach the LoadBalancer: the configured ranges, or (internal) the VNet, explicitly, so no
    LoadBalancer is ever declared without its sources."""
    return st.allowed_source_ranges or (cfg.network.address_space,)


def check(cfg: StackConfig, st: FunctionSettings) -> Iterator[ConfigError]:
    yield from unknown_gpu_pool(cfg, "aksgpu:function.pool", st.pool)
    if st.exposure == Exposure.PUBLIC and not st.allowed_source_ranges:
        yield ConfigError("aksgpu:function.allowedSourceRanges", [],
                          "must list the CIDRs that may call a public function (exposure: public); or use "
                          "exposure: internal and kubectl port-forward")


def needs(cfg: StackConfig, st: FunctionSettings) -> Needs:
    pool = function_pool(cfg, st)
    low, high = pool.replica_bounds() if pool else (1, 1)
    return Needs(images={"function": "docker/function"}, autoscaled=high > low)
