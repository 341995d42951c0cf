"""Time-slicing / MPS device-plugin config, its node labels, and restart-on-change by content naming."""

import pytest
import yaml

from components.gpu import sharing as gpu_sharing
from components.gpu.sizes import lookup_gpu_size
from components.vocabulary import GpuDriver, GpuNodes, SharingMode
from tests import upstream
from tests.helpers import device_plugin_configs, render_with


def pool(name="t4", mode="time-slicing", replicas=4, size="Standard_NC4as_T4_v3", driver="none"):
    return GpuNodes(name, lookup_gpu_size(size), GpuDriver(driver), SharingMode(mode), replicas)


@pytest.mark.parametrize("mode", ["time-slicing", "mps"])
def test_generated_plugin_config_follows_the_device_plugin_v1_format(mode):
    doc = gpu_sharing.plugin_config(pool(mode=mode, replicas=3))
    assert upstream.device_plugin_config_errors(doc) == []
    key = {"time-slicing": "timeSlicing", "mps": "mps"}[mode]
    assert doc["sharing"][key]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 3}]


def test_format_checker_rejects_what_the_plugin_would_silently_ignore_or_refuse():
    bad = {"version": "v1", "sharing": {"timeSlicing": {"resource": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}
    errors = upstream.device_plugin_config_errors(bad)
    assert any("unknown keys" in e for e in errors) and any("empty" in e for e in errors)


def test_the_config_key_and_node_label_stay_the_pool_name_when_replicas_change():
    assert gpu_sharing.config_key(pool(name="nc4ast4", replicas=2)) == "nc4ast4"
    assert gpu_sharing.node_labels(pool(replicas=2)) == gpu_sharing.node_labels(pool(replicas=3))
    assert gpu_sharing.configmap_name(gpu_sharing.configmap_data([pool(replicas=2)])) != \
        gpu_sharing.configmap_name(gpu_sharing.configmap_data([pool(replicas=3)]))


def test_changing_replicas_changes_the_configmap_name_so_the_plugin_restarts():
    a = gpu_sharing.configmap_name(gpu_sharing.configmap_data([pool(replicas=2)]))
    b = gpu_sharing.configmap_name(gpu_sharing.configmap_data([pool(replicas=3)]))
    same = gpu_sharing.configmap_name(gpu_sharing.configmap_data([pool(replicas=2)]))
    assert a != b and a == same


def test_unshared_pools_get_no_entry_and_no_label():
    assert gpu_sharing.configmap_data([pool(mode="none", replicas=1)]) == {}
    assert gpu_sharing.NODE_CONFIG_LABEL not in gpu_sharing.node_labels(pool(mode="none", replicas=1))


def test_shared_pool_nodes_select_their_entry_and_the_operator_reads_the_configmap(render_shape):
    r = render_shape("private-two-pools")
    (cm,) = device_plugin_configs(r)
    assert cm.inputs["metadata"]["namespace"] == "gpu-operator" and cm.inputs["immutable"] is True
    assert set(cm.inputs["data"]) == {"nc4ast4"}
    assert upstream.device_plugin_config_errors(yaml.safe_load(cm.inputs["data"]["nc4ast4"])) == []
    labels = r.named("gpu-nc4ast4-pool").inputs["nodeLabels"]
    assert labels[gpu_sharing.NODE_CONFIG_LABEL] == "nc4ast4"
    assert gpu_sharing.NODE_CONFIG_LABEL not in (r.named("gpu-nc48a100-pool").inputs.get("nodeLabels") or {})
    config = r.named("gpu-operator-release").inputs["values"]["devicePlugin"]["config"]
    assert config == {"name": cm.inputs["metadata"]["name"], "default": ""}
    assert "gpu-operator-sharing-config" in r.named("gpu-operator-release").depends_on


def test_stacks_without_sharing_leave_the_device_plugin_config_alone(render_shape):
    r = render_shape("training")
    assert not device_plugin_configs(r)
    assert "devicePlugin" not in r.named("gpu-operator-release").inputs["values"]


@pytest.mark.parametrize("mode, virtual", [("time-slicing", True), ("mps", True), ("none", False)])
def test_a_shared_gpus_metrics_are_written_once_per_pod_using_it(mode, virtual):
    """Round-3 k8s audit #2: without KUBERNETES_VIRTUAL_GPUS the DCGM exporter keeps one pod per GPU in its map
    (dcgm-exporter internal/pkg/transformation/kubernetes.go:886-909; flag pkg/cmd/app.go:299-304, default false;
    gpu-operator v26.7.0 never sets it), so every other sharer's per-pod KEDA query was empty and read as 0."""
    from components.gpu.operator import operator_values
    values = operator_values([pool(mode=mode, replicas=4 if mode != "none" else 1)], [], False, None)
    exporter = values.get("dcgmExporter", {})
    assert ({"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"} in exporter.get("env", [])) is virtual
    # It then attributes a shared GPU by each process's pod: the host's PIDs (hostPID), and the pods' UIDs, which
    # it reads only with pod-UID enrichment (internal/pkg/transformation/kubernetes.go: PodInfo.UID is set only if
    # KubernetesEnablePodUID; the operator grants the pod read access only then, controllers/object_controls.go).
    assert (exporter.get("hostPID"), exporter.get("enablePodUID")) == ((True, True) if virtual else (None, None))
    assert upstream.unknown_value_paths(values, upstream.chart_values("gpu-operator")) == []


def test_mig_pools_are_partitioned_by_aks_and_counted_per_instance(tmp_path):
    r = render_with(gpuPools=[{"name": "a100", "vmSize": "Standard_NC48ads_A100_v4", "driver": "install",
                                        "sharing": {"mode": "mig", "migProfile": "MIG3g"}}])
    p = r.named("gpu-a100-pool").inputs
    assert p["gpuInstanceProfile"] == "MIG3g"
    assert p["nodeLabels"]["nvidia.com/gpu.deploy.mig-manager"] == "false"
    assert r.named("gpu-operator-release").inputs["values"]["mig"] == {"strategy": "single"}
    assert r.cfg.gpu_pools[0].schedulable_gpus_per_node == 4  # 2 GPUs x 2 MIG3g instances


def test_chart_key_check_catches_a_misspelt_key():
    assert upstream.unknown_value_paths({"devicePlugin": {"confg": {"name": "x"}}},
                                        upstream.chart_values("gpu-operator")) == ["devicePlugin.confg"]
