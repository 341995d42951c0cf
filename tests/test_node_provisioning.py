"""GPU pools made by AKS node auto-provisioning (Karpenter): the objects, the cluster around them, what is refused.

Sources: learn.microsoft.com/azure/aks/node-auto-provisioning (limitations: no cluster autoscaler on the cluster,
Azure CNI overlay with Cilium), node-auto-provisioning-node-pools (capacity types, sku-name requirements, limits),
Azure/AKS#5362 (the GPU operator may own the driver: AKSNodeClass gpu.mode None), and the CRDs of
karpenter-provider-azure v1.12.2 (tests/fixtures/crds).
"""

from __future__ import annotations

import re

import pytest

from components.azure.node_pools import GPU_TAINT
from components.azure.node_provisioning import KARPENTER_VERSION, NODECLASS_CRD, NODEPOOL_CRD, NODEPOOL_LABEL
from components.kubernetes.scheduling import taint_fields
from offline.report import manifest
from program.config.errors import ConfigError
from tests import upstream
from tests.helpers import load, pod_spec, render_with

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.azure.com/v1beta1:AKSNodeClass"
NAP_T4 = {"name": "t4", "provisioning": "nap", "vmSize": "Standard_NC4as_T4_v3",
          "alternativeVmSizes": ["Standard_NC8as_T4_v3"], "minCount": 0, "maxCount": 3}
FIXED_SYSTEM = {"systemPool": {"minCount": 2, "maxCount": 2}}


def test_the_nap_stack_objects_validate_against_the_crds_of_the_karpenter_aks_runs(render_shape):
    r = render_shape("nap")
    (pool,), (node_class,) = r.of_type(NODEPOOL), r.of_type(NODECLASS)
    upstream.validate_against_crd(manifest(pool), upstream.operator_crd(
        "karpenter-provider-azure", KARPENTER_VERSION, NODEPOOL_CRD))
    upstream.validate_against_crd(manifest(node_class), upstream.operator_crd(
        "karpenter-provider-azure", KARPENTER_VERSION, NODECLASS_CRD))


def test_a_nap_pool_offers_its_sizes_spot_first_up_to_its_maximum_with_the_gpu_taint():
    r = render_with(cluster=FIXED_SYSTEM, gpuPools=[{**NAP_T4, "zones": ["1", "2"]}])
    spec = r.named("gpu-t4-nodepool").inputs["spec"]
    requirements = {q["key"]: q["values"] for q in spec["template"]["spec"]["requirements"]}
    assert requirements["karpenter.azure.com/sku-name"] == ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"]
    assert requirements["karpenter.sh/capacity-type"] == ["spot", "on-demand"]
    assert requirements["topology.kubernetes.io/zone"] == ["eastus-1", "eastus-2"]
    assert spec["limits"] == {"nodes": "3"}
    assert spec["template"]["spec"]["taints"] == [taint_fields(GPU_TAINT)]
    # Busy GPU nodes are never consolidated or expired in the middle of a run.
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["template"]["spec"]["expireAfter"] == "Never"


def test_a_new_node_image_never_drains_a_busy_nap_gpu_node():
    """Round-4 Azure audit #2: NAP marks nodes drifted on each node image (forced past 90 days, whatever the window)
    and replaces them honouring node disruption budgets and PodDisruptionBudgets only (learn.microsoft.com/azure/
    aks/node-auto-provisioning-upgrade-image); left undefined, the budgets default to one of ``nodes: 10%`` for
    every reason, drift included (karpenter-provider-azure v1.12.2 pkg/apis/crds/karpenter.sh_nodepools.yaml)."""
    budgets_schema = upstream.operator_crd("karpenter-provider-azure", KARPENTER_VERSION, NODEPOOL_CRD)[
        "versions"]["v1"]["properties"]["spec"]["properties"]["disruption"]["properties"]["budgets"]
    assert budgets_schema["default"] == [{"nodes": "10%"}]  # why the pool must say it
    assert "Drifted" in budgets_schema["items"]["properties"]["reasons"]["items"]["enum"]
    r = render_with(cluster=FIXED_SYSTEM, gpuPools=[NAP_T4])
    budgets = r.named("gpu-t4-nodepool").inputs["spec"]["disruption"]["budgets"]
    assert {"nodes": "0", "reasons": ["Drifted"]} in budgets
    # No other budget may allow drift: Karpenter takes the most restrictive active budget per reason.
    assert all(b["nodes"] == "0" for b in budgets if "Drifted" in b.get("reasons", ["Drifted"]))


def test_a_regular_nap_pool_never_buys_spot():
    r = render_with(cluster=FIXED_SYSTEM, gpuPools=[{**NAP_T4, "priority": "regular"}])
    requirements = {q["key"]: q["values"] for q in r.named("gpu-t4-nodepool").inputs["spec"]["template"]["spec"][
        "requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]


def test_who_installs_the_driver_follows_the_pools_driver_setting():
    operator = render_with(cluster=FIXED_SYSTEM, gpuPools=[{**NAP_T4, "driver": "precompiled"}]).named(
        "gpu-t4-nodeclass").inputs["spec"]
    aks = render_with(cluster=FIXED_SYSTEM, gpuPools=[{**NAP_T4, "driver": "install"}])
    # NVIDIA builds precompiled drivers for Ubuntu's Azure kernels, as on agent pools.
    assert (operator["gpu"], operator["imageFamily"]) == ({"mode": "None"}, "Ubuntu")
    assert aks.named("gpu-t4-nodeclass").inputs["spec"]["imageFamily"] == "Ubuntu"
    assert aks.named("gpu-t4-nodeclass").inputs["spec"]["gpu"] == {"mode": "Driver"}
    labels = aks.named("gpu-t4-nodepool").inputs["spec"]["template"]["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.driver"] == "false"


def test_a_nap_cluster_turns_node_provisioning_on_and_no_pool_autoscales(render_shape):
    r = render_shape("nap")
    cluster = r.named("aks-aks").inputs
    assert cluster["nodeProvisioningProfile"] == {"mode": "Auto", "defaultNodePools": "Auto"}
    assert "autoScalerProfile" not in cluster
    (system,) = cluster["agentPoolProfiles"]
    assert system["enableAutoScaling"] is False and system["count"] == 2
    assert "minCount" not in system and "maxCount" not in system
    assert not r.of_type("azure-native:containerservice:AgentPool")
    assert cluster["networkProfile"]["networkDataplane"] == "cilium"


def test_gpu_pods_select_the_nap_pool_by_its_nodepool_label(render_shape):
    r = render_shape("nap")
    job = r.named("gpu-smoke-test-t4")
    spec = pod_spec(job.inputs)
    assert spec["nodeSelector"] == {NODEPOOL_LABEL: "t4"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]


REFUSED = [
    ({"gpuPools": [{**NAP_T4, "minCount": 1}]}, r"gpuPools\[0\]\.minCount=1: pool 't4': NAP creates nodes"),
    ({"gpuPools": [{**NAP_T4, "alternativeVmSizes": ["Standard_NV36ads_A10_v5"]}]},
     r"alternativeVmSizes=\"Standard_NV36ads_A10_v5\": pool 't4': has 1 × A10"),
    ({"gpuPools": [{**NAP_T4, "spotMaxPrice": 0.2}]}, r"spotMaxPrice=0\.2: pool 't4': NAP buys spot"),
    ({"gpuPools": [{**NAP_T4, "vmSize": "Standard_NC24ads_A100_v4", "alternativeVmSizes": [],
                    "sharing": {"mode": "mig", "migProfile": "MIG1g"}}]}, r'sharing\.mode="mig": .*agent pools only'),
    ({"gpuPools": [{"name": "t4", "vmSize": "Standard_NC4as_T4_v3", "alternativeVmSizes": ["Standard_NC8as_T4_v3"]}]},
     r"alternativeVmSizes=.*only a provisioning nap pool picks among sizes"),
    ({"cluster": {"networkPolicy": "calico", **FIXED_SYSTEM}, "gpuPools": [NAP_T4]},
     r"cluster\.networkPolicy=\"calico\": node auto-provisioning runs on Azure CNI overlay with the Cilium dataplane"),
    ({"cluster": {}, "gpuPools": [NAP_T4]},
     r"cluster\.systemPool\.maxCount=\d+: pool 'system': with node auto-provisioning no pool may autoscale"),
    ({"cluster": FIXED_SYSTEM, "gpuPools": [NAP_T4, {"name": "a10", "vmSize": "Standard_NV36ads_A10_v5",
                                                      "minCount": 0, "maxCount": 1}]},
     r"gpuPools\[1\]\.maxCount=1: pool 'a10': with node auto-provisioning no pool may autoscale"),
]


@pytest.mark.parametrize("config, says", REFUSED, ids=[s[:40] for _, s in REFUSED])
def test_what_aks_or_nap_refuses_is_one_line_naming_the_key(config, says):
    raw = {"scenario": "gpu-basics", "owner": "t", **config}
    raw.setdefault("cluster", FIXED_SYSTEM)
    with pytest.raises(ConfigError) as e:
        load(raw)
    assert any(re.search(says, str(p)) for p in e.value.problems), str(e.value)


def test_the_summary_lists_a_nap_gpu_pool_and_the_fixed_system_pool_by_its_count(render_shape):
    """Newcomer #10: summary.md of the NAP stack showed only `system | ... | None–None` (the NAP pool has no
    AgentPool; the system pool does not autoscale, so it has a count, not a min and max)."""
    from offline.report import node_pool_rows
    rows = {r["name"]: r for r in node_pool_rows(render_shape("nap"))}
    assert (rows["system"]["min"], rows["system"]["max"]) == (2, 2)
    t4 = rows["t4"]
    assert t4["mode"] == "NAP" and t4["vmSize"].startswith("Standard_NC4as_T4_v3, ") and t4["gpu"] == "T4 × 1"
    assert (t4["min"], t4["max"], t4["spot"]) == (0, 2, True) and t4["taints"] == ["sku=gpu:NoSchedule"]
    assert t4["driver"] == "GPU operator"
