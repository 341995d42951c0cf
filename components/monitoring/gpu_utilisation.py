"""How busy a GPU is, in PromQL over the DCGM exporter's series, whatever the GPU is: the one expression the
alerts, KEDA's queries and the dashboard share.

A whole or shared GPU reports ``DCGM_FI_DEV_GPU_UTIL`` (0-100). A MIG instance reports it as 0 whatever its load
(NVIDIA/dcgm-exporter#216, #430: "not supported for MIG configurations ... use DCGM_FI_PROF_GR_ENGINE_ACTIVE"), so
there the share of time its graphics/compute engine was busy stands in, scaled to 0-100. The exporter labels a
MIG instance's series with ``GPU_I_ID`` (and ``GPU_I_PROFILE``) and a whole GPU's without it, so the two halves
never both count one GPU.
"""

from __future__ import annotations

WHOLE_GPU = "DCGM_FI_DEV_GPU_UTIL"
MIG_INSTANCE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


def gpu_utilisation(matchers: str = "", over: str | None = None) -> str:
    """GPU utilisation (0-100) of the series matching ``matchers`` (PromQL label matchers, comma-separated);
    with ``over`` (a range such as ``5m``), each series' maximum over it."""
    extra = f", {matchers}" if matchers else ""
    whole = f'{WHOLE_GPU}{{GPU_I_ID=""{extra}}}'
    mig = f'{MIG_INSTANCE}{{GPU_I_ID!=""{extra}}}'
    if over is not None:
        whole, mig = f"max_over_time({whole}[{over}])", f"max_over_time({mig}[{over}])"
    return f"({whole} or 100 * {mig})"
