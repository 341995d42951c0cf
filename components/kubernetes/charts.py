"""Pinned Helm charts and images: one place to bump a version (docs/development.md says why each).

The tests check our values against each pinned chart's values and CRDs, from fixtures that
``scripts/derive_fixtures.py`` derives for exactly these versions: bump a pin, then refresh the fixtures."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chart:
    chart: str
    """Chart name, or a full ``oci://`` reference."""
    version: str
    """Exact chart version (NVIDIA's carries a leading ``v``)."""
    repo: str | None = None
    """HTTP chart repository; ``None`` for OCI charts."""


NFD = Chart("oci://registry.k8s.io/nfd/charts/node-feature-discovery", "0.19.0")
GPU_OPERATOR = Chart("gpu-operator", "v26.7.0", "https://helm.ngc.nvidia.com/nvidia")
BLOB_CSI = Chart("blob-csi-driver", "1.27.9", "https://kubernetes-sigs.github.io/blob-csi-driver")
KUEUE = Chart("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2")
"""Published only as an OCI chart (the Kueue README's install command)."""
NETWORK_OPERATOR = Chart("network-operator", "26.4.1", "https://helm.ngc.nvidia.com/nvidia")
"""NVIDIA's Network Operator: InfiniBand driver and RDMA device plugin, through one NicClusterPolicy
(Azure/aks-rdma-infiniband's AKS guide)."""
JOBSET = Chart("oci://registry.k8s.io/jobset/charts/jobset", "0.12.0")
"""JobSet: a group of Jobs (one per node of a distributed run) started, restarted and finished as one."""
PINNED_CHARTS = (NFD, GPU_OPERATOR, BLOB_CSI, KUEUE, NETWORK_OPERATOR, JOBSET)

JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
"""JobSet's release images; the chart in git names a staging registry, as Kueue's does."""
DOCA_DRIVER = ("nvcr.io/nvidia/mellanox", "doca-driver", "doca3.2.0-25.10-1.2.8.0-2")
"""The InfiniBand (DOCA OFED) driver container the Network Operator builds on each IB node: repository, image and
version from Azure/aks-rdma-infiniband@700dabb configs/nicclusterpolicy/base/nic.yaml."""
RDMA_SHARED_DEVICE_PLUGIN = ("nvcr.io/nvidia/mellanox", "k8s-rdma-shared-dev-plugin", "network-operator-v25.10.0")
"""The RDMA shared device plugin, from the same guide (configs/nicclusterpolicy/rdma-shared-device-plugin)."""

KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
"""Where Kueue's release images live; the chart in git names a staging registry that its release build rewrites."""

BLOBFUSE2_VERSION = "2.5.4"
"""blobfuse2 the Blob CSI node plugin installs on hosts (the chart's default for 1.27.9, pinned here)."""
PYTHON_IMAGE = ("docker.io/library/python:3.12.12-slim-bookworm"
                "@sha256:593bd06efe90efa80dc4eee3948be7c0fde4134606dd40d8dd8dbcade98e669c")
"""The GPU node controllers' interpreter (repair, gate: standard library scripts from ConfigMaps): the tag for
people, its multi-arch index digest for the kubelet (which picks amd64)."""
CUDA_BASE_IMAGE = ("docker.io/nvidia/cuda:12.9.1-base-ubuntu24.04"
                   "@sha256:5d2e53778e2180e01676aa8bac1aada242e95230ec97e21ecfb33de4e27cd1df")
"""For nvidia-smi: the container toolkit injects the binary and driver libraries; the image only needs a libc.
The tag for people, the digest (its linux/amd64 manifest, as ``docker buildx imagetools inspect`` shows it) for
the kubelet."""
