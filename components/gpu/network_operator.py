"""NVIDIA's Network Operator for InfiniBand GPU pools, as Microsoft's AKS guide sets it up (Azure/aks-rdma-infiniband
@700dabb: configs/values/network-operator, configs/nicclusterpolicy/base and rdma-shared-device-plugin,
tests/setup-infra/network-operator-nfd.yaml).

Three objects: the chart (the operator only: the cluster's own NFD release labels the nodes, a second NFD is not
supported), a NodeFeatureRule that labels nodes with Mellanox InfiniBand functions, and one NicClusterPolicy on
those nodes: the DOCA OFED driver container and the RDMA shared device plugin, which offers each node's
InfiniBand devices to pods as ``rdma/shared_ib``. GPUDirect RDMA (the GPU reading the NIC's memory directly) is
then the GPU operator's ``driver.rdma`` (operator.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import apiextensions

from components.kubernetes import charts, helm
from components.kubernetes.security import PRIVILEGED_NAMESPACE_LABELS, namespace

MELLANOX_PRESENT_LABEL = "feature.node.kubernetes.io/pci-15b3.present"
"""The label the NicClusterPolicy places its driver and device plugin by."""
MELLANOX_VENDOR = "15b3"
INFINIBAND_FUNCTIONS = ("101c", "101e")
"""PCI device ids of the InfiniBand virtual functions ND-series VMs expose (ConnectX-6 and ConnectX-7), from the
guide's NodeFeatureRule."""
RDMA_RESOURCE_NAME = "shared_ib"
RDMA_RESOURCE = f"rdma/{RDMA_RESOURCE_NAME}"
"""What a pod asks for to reach the node's InfiniBand devices (one per pod; the devices are shared)."""
RDMA_HCA_MAX = 63
"""Pods that may share a node's devices at once (the guide's rdmaHcaMax)."""
NAMESPACE = "network-operator"


def mellanox_rule(name: str) -> dict[str, Any]:
    """NodeFeatureRule spec: a Mellanox InfiniBand function → ``pci-15b3.present=true``."""
    return {"rules": [{
        "name": name,
        "labels": {MELLANOX_PRESENT_LABEL: "true"},
        "matchFeatures": [{"feature": "pci.device", "matchExpressions": {
            "vendor": {"op": "In", "value": [MELLANOX_VENDOR]},
            "device": {"op": "In", "value": list(INFINIBAND_FUNCTIONS)}}}],
    }]}


def nic_cluster_policy_spec(gpu_tolerations: list[dict[str, str]]) -> dict[str, Any]:
    repository, image, version = charts.DOCA_DRIVER
    plugin_repository, plugin_image, plugin_version = charts.RDMA_SHARED_DEVICE_PLUGIN
    plugin_config = {"configList": [{
        "resourceName": RDMA_RESOURCE_NAME, "rdmaHcaMax": RDMA_HCA_MAX,
        "selectors": {"vendors": [MELLANOX_VENDOR], "linkTypes": ["infiniband"]}}]}
    return {
        # Only nodes with InfiniBand functions: the driver container would fail everywhere else.
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": MELLANOX_PRESENT_LABEL, "operator": "In", "values": ["true"]}]}]}},
        # The GPU pools' taints: the IB nodes are GPU nodes.
        "tolerations": gpu_tolerations,
        "ofedDriver": {
            "repository": repository, "image": image, "version": version,
            # The guide's workaround for a race where the kernel module fails to load (Mellanox/doca-driver-build#52).
            "env": [{"name": "OFED_BLACKLIST_MODULES_FILE",
                     "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"}],
            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                              "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300}},
            "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
            "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
            "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
        },
        "rdmaSharedDevicePlugin": {"repository": plugin_repository, "image": plugin_image, "version": plugin_version,
                                   "config": json.dumps(plugin_config, indent=2)},
    }


def network_operator_values() -> dict[str, Any]:
    """The operator alone: the cluster's NFD release labels nodes (two NFDs are not supported), and this program
    writes the one NodeFeatureRule the policy needs."""
    return {"nfd": {"enabled": False, "deployNodeFeatureRules": False}}


@dataclass(frozen=True)
class NetworkOperatorArgs:
    gpu_tolerations: list[dict[str, str]]
    """Tolerations of the GPU pools' taints, for the driver and device plugin pods."""
    nfd_release: pulumi.Resource
    """The NFD release whose CRDs the NodeFeatureRule needs (an edge Pulumi cannot see)."""


class NetworkOperator(pulumi.ComponentResource):
    release: pulumi.CustomResource
    policy: pulumi.Resource
    """The NicClusterPolicy: driver and RDMA device plugin on InfiniBand nodes."""

    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:gpu:NetworkOperator", name, None, opts)  # frozen: components/__init__.py
        # Privileged: the driver container loads kernel modules, the device plugin reads host devices.
        ns = namespace(f"{name}-ns", NAMESPACE, PRIVILEGED_NAMESPACE_LABELS, self)
        # The chart upgrades its CRDs in a pre-upgrade hook (upgradeCRDs), like the GPU operator's.
        self.release = helm.release(f"{name}-release", "network-operator", charts.NETWORK_OPERATOR,
                                    ns.metadata["name"], network_operator_values(), self, upgrades_own_crds=True)
        apiextensions.CustomResource(
            f"{name}-mellanox-rule", api_version="nfd.k8s-sigs.io/v1alpha1", kind="NodeFeatureRule",
            metadata={"name": "mellanox-infiniband"}, spec=mellanox_rule("mellanox-infiniband"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.nfd_release]))
        # Cluster-scoped; its CRD comes with the chart.
        self.policy = apiextensions.CustomResource(
            f"{name}-nic-cluster-policy", api_version="mellanox.com/v1alpha1", kind="NicClusterPolicy",
            metadata={"name": "nic-cluster-policy"}, spec=nic_cluster_policy_spec(args.gpu_tolerations),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]))
        self.register_outputs({"release": self.release.id})
