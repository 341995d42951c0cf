"""NVIDIA device-plugin sharing config (format ``v1``) for time-slicing and MPS, one entry per GPU pool.

Format: NVIDIA/k8s-device-plugin ``api/config/v1`` (v0.20.0, the plugin the GPU operator v26.7.0 ships). A node
picks its entry through the label ``nvidia.com/device-plugin.config=<key>``; the operator reads the ConfigMap
named in ``devicePlugin.config.name``. The plugin only rereads a ConfigMap when restarted, so the name carries
a hash of the content: any change is a new name, the operator re-renders the plugin DaemonSet, pods restart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import yaml

from components.vocabulary import GpuNodes, SharingMode

NODE_CONFIG_LABEL = "nvidia.com/device-plugin.config"
CONFIGMAP_PREFIX = "device-plugin-config"
_MODE_KEYS = {SharingMode.TIME_SLICING: "timeSlicing", SharingMode.MPS: "mps"}
"""The device plugin's key for each sharing mode it implements (MIG is AKS's, through the pool)."""


def is_shared(pool: GpuNodes) -> bool:
    return pool.sharing.has_replicas


def config_key(pool: GpuNodes) -> str:
    """Data key (and node label value) for a pool: its name, which never changes (seed 003 used
    ``tesla-t4-ts2``). A key that carried the replicas would change the node label and the ConfigMap together,
    two resources updated in parallel: a restarted plugin could look for a key that is not there yet and
    crash-loop until AKS relabels the nodes. Only the ConfigMap's name changes (its content hash)."""
    return pool.pool


def plugin_config(pool: GpuNodes) -> dict[str, Any]:
    """One device-plugin config document (v1) for a shared pool."""
    mode = _MODE_KEYS[pool.sharing]
    return {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {mode: {
            # Keep the resource name nvidia.com/gpu so workloads need no change; GFD labels the product -SHARED.
            "renameByDefault": False,
            # A pod asking for 2 shares of one GPU gets no more compute; refuse it instead of pretending.
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": pool.replicas}],
        }},
    }


def configmap_data(pools: Iterable[GpuNodes]) -> dict[str, str]:
    """ConfigMap ``data``: one YAML document per shared pool, keys sorted."""
    shared = sorted((p for p in pools if is_shared(p)), key=config_key)
    return {config_key(p): yaml.safe_dump(plugin_config(p), sort_keys=True) for p in shared}


def configmap_name(data: dict[str, str]) -> str:
    digest = hashlib.sha256(yaml.safe_dump(data, sort_keys=True).encode()).hexdigest()[:10]
    return f"{CONFIGMAP_PREFIX}-{digest}"


def node_labels(pool: GpuNodes) -> dict[str, str]:
    """Labels a GPU pool's nodes need: its sharing config, and the operator's hands off an AKS-owned driver."""
    labels = {NODE_CONFIG_LABEL: config_key(pool)} if is_shared(pool) else {}
    if not pool.driver.operator_owned:
        # Exactly one driver owner per node: AKS installed driver and runtime, the operator must not.
        labels["nvidia.com/gpu.deploy.driver"] = "false"
        labels["nvidia.com/gpu.deploy.container-toolkit"] = "false"
    if pool.sharing == SharingMode.MIG:
        # AKS made the MIG instances from gpuInstanceProfile; the operator's MIG manager must not repartition.
        labels["nvidia.com/gpu.deploy.mig-manager"] = "false"
    return labels
