"""The distributed-training scenario: InfiniBand through the Network Operator, JobSet runs admitted whole by Kueue,
the all-reduce check judged against a sourced figure, and what cannot work refused."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from components.autoscaling.kueue import ALL_OR_NOTHING
from components.gpu.network_operator import MELLANOX_PRESENT_LABEL, RDMA_RESOURCE
from components.kubernetes import charts
from components.training.jobset import JOB_INDEX_LABEL, JOBSET_NAME_LABEL, rendezvous_host
from offline.report import manifest
from program.config.errors import ConfigError
from stacks.distributed_training.deploy import ALLREDUCE_RESULT, SUBMIT_ALLREDUCE, SUBMIT_TRAINING
from tests import upstream
from tests.helpers import jobset_pods, jobset_templates, load, stack_config_of

STACK = "distributed-training"
NIC_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"


def chart_crd(chart: charts.Chart, name: str) -> dict:
    return upstream.fixture("charts", chart.chart.rsplit("/", 1)[-1], chart.version, "crds.json")[name]


def test_every_run_is_a_jobset_the_pinned_crd_accepts_queued_whole_on_the_ib_pool(render_of):
    r = render_of(STACK)
    runs = jobset_templates(r)
    assert set(runs) == {"train", "nccl-allreduce"}
    for name, jobset in runs.items():
        upstream.validate_against_crd(jobset, chart_crd(charts.JOBSET, "jobsets.jobset.x-k8s.io"))
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-jobs"
        (replicated,) = jobset["spec"]["replicatedJobs"]
        assert replicated["replicas"] == 2 and replicated["template"]["spec"]["backoffLimit"] == 0
        assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": name}
        (pod,) = jobset_pods(jobset)
        (worker,) = pod["spec"]["containers"]
        assert pod["spec"]["nodeSelector"] == {"kubernetes.azure.com/agentpool": "ndh100"}
        assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert worker["resources"]["limits"][RDMA_RESOURCE] == "1"
        env = {e["name"]: e.get("value") for e in worker["env"]}
        assert env["NCCL_IB_DISABLE"] == "0" and env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
        # Restricted: the devices come from the device plugin, no capability is added.
        assert worker["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        command = worker["command"]
        assert command[:3] == ["torchrun", "--nnodes=2", "--nproc-per-node=8"]
        assert f"--rdzv-endpoint={rendezvous_host(name, 'node')}:29500" in command
    assert runs["train"]["spec"]["failurePolicy"] == {"maxRestarts": 3}


def test_the_training_run_checkpoints_to_blob_with_its_own_identity(render_of):
    (pod,) = jobset_pods(jobset_templates(render_of(STACK))["train"])
    assert pod["spec"]["serviceAccountName"] == "train"
    claim = next(v for v in pod["spec"]["volumes"] if v["name"] == "checkpoints")["persistentVolumeClaim"]
    assert claim["claimName"].startswith("checkpoints-train-")
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--checkpoints") + 1] == "/mnt/checkpoints/train"
    assert command[command.index("--batch-size") + 1] == "4096"


def test_the_allreduce_check_is_judged_against_microsofts_figure_for_the_size(render_of):
    r = render_of(STACK)
    (pod,) = jobset_pods(jobset_templates(r)["nccl-allreduce"])
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--expect-busbw") + 1] == "180.0"
    assert command[command.index("--max-bytes") + 1] == str(8 << 30)
    result = r.outputs[ALLREDUCE_RESULT]
    assert f"{JOBSET_NAME_LABEL}=nccl-allreduce,{JOB_INDEX_LABEL}=0" in result


def test_outputs_submit_each_run_from_its_template(render_of, tmp_path):
    r = render_of(STACK)
    for output, name in ((SUBMIT_ALLREDUCE, "nccl-allreduce"), (SUBMIT_TRAINING, "train")):
        command = r.outputs[output]
        assert command.startswith(f"kubectl -n distributed delete jobset {name} --ignore-not-found")
        assert f"get configmap {name}-jobset -o jsonpath='{{.data.jobset\\.yaml}}' | kubectl create -f -" in command
    # The jsonpath the command uses reads the manifest back (kubectl's dotted-key escape).
    (config_map,) = [c for c in r.of_type("kubernetes:core/v1:ConfigMap")
                     if c.revealed["metadata"]["name"] == "train-jobset"]
    assert yaml.safe_load(config_map.revealed["data"]["jobset.yaml"])["kind"] == "JobSet"


def test_the_network_operator_serves_rdma_on_infiniband_nodes_only(render_of):
    r = render_of(STACK)
    (policy,) = r.of_type(NIC_POLICY)
    spec = policy.revealed["spec"]
    upstream.validate_against_crd(manifest(policy), chart_crd(charts.NETWORK_OPERATOR,
                                                              "nicclusterpolicies.mellanox.com"))
    term = spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": MELLANOX_PRESENT_LABEL, "operator": "In", "values": ["true"]}]
    plugin = json.loads(spec["rdmaSharedDevicePlugin"]["config"])["configList"][0]
    assert (plugin["resourceName"], plugin["selectors"]["vendors"]) == ("shared_ib", ["15b3"])
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]
    rule = r.named("network-operator-mellanox-rule").revealed["spec"]["rules"][0]
    assert rule["labels"] == {MELLANOX_PRESENT_LABEL: "true"}
    # The cluster's NFD labels the nodes; the chart's own NFD stays off (two are not supported).
    release = r.named("network-operator-release").revealed
    assert release["values"]["nfd"] == {"enabled": False, "deployNodeFeatureRules": False}
    assert (release["chart"], release["version"]) == ("network-operator", charts.NETWORK_OPERATOR.version)
    assert "nfd-release" in r.upstream("network-operator-mellanox-rule")


def test_the_network_operators_values_exist_in_its_pinned_chart(render_of):
    values = render_of(STACK).named("network-operator-release").revealed["values"]
    defaults = upstream.fixture("charts", "network-operator", charts.NETWORK_OPERATOR.version, "values.json")
    assert upstream.unknown_value_paths(values, defaults) == []


def test_gpudirect_rdma_is_the_gpu_operators_driver(render_of):
    values = render_of(STACK).named("gpu-operator-release").revealed["values"]
    assert values["driver"] == {"enabled": True, "usePrecompiled": True, "version": "580",
                                "rdma": {"enabled": True, "useHostMofed": False}}
    defaults = upstream.fixture("charts", "gpu-operator", charts.GPU_OPERATOR.version, "values.json")
    assert upstream.unknown_value_paths(values, defaults) == []


def test_kueue_admits_jobsets_whole_and_counts_rdma_devices(render_of):
    r = render_of(STACK)
    config = yaml.safe_load(r.named("kueue-release").revealed["values"]["managerConfig"][
        "controllerManagerConfigYaml"])
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]
    assert config["waitForPodsReady"] == ALL_OR_NOTHING and ALL_OR_NOTHING["blockAdmission"] is True
    queue = r.named("kueue-cluster-queue").revealed["spec"]["resourceGroups"][0]
    assert RDMA_RESOURCE in queue["coveredResources"]
    quota = {q["name"]: q["nominalQuota"] for q in queue["flavors"][0]["resources"]}
    assert quota["nvidia.com/gpu"] == "16" and quota[RDMA_RESOURCE] == "126"
    # Kueue starts after JobSet's CRD exists: it turns on only the integrations whose CRDs it finds.
    assert "jobset-release" in r.upstream("kueue-release")


def test_the_pods_of_a_run_reach_each_other_on_any_tcp_port(render_of):
    policy = render_of(STACK).named("distributed-allow-peers").revealed["spec"]
    peers = [{"podSelector": {"matchLabels": policy["podSelector"]["matchLabels"]}}]
    assert policy["ingress"] == [{"from": peers, "ports": [{"protocol": "TCP"}]}]
    assert policy["egress"] == [{"to": peers, "ports": [{"protocol": "TCP"}]}]


def test_a_pool_without_infiniband_runs_over_the_pod_network_without_rdma():
    from tests.helpers import render_with
    config = stack_config_of(STACK)
    r = render_with(STACK, **{**config, "addons": {}, "gpuPools": [
        {"name": "a100", "vmSize": "Standard_NC48ads_A100_v4", "priority": "regular", "minCount": 0,
         "maxCount": 2}], "distributed": {"nodes": 1, "batchSize": 4096}})
    (pod,) = jobset_pods(jobset_templates(r)["train"])
    worker = pod["spec"]["containers"][0]
    assert RDMA_RESOURCE not in worker["resources"]["limits"]
    assert {e["name"]: e["value"] for e in worker["env"]}["NCCL_IB_DISABLE"] == "1"
    assert worker["command"][:3] == ["torchrun", "--nnodes=1", "--nproc-per-node=2"]  # seed 003's 2-GPU job
    assert not r.of_type(NIC_POLICY)


REFUSED = [
    ({"distributed": {"nodes": 3}}, r'distributed\.nodes=3: pool .ndh100. has at most 2 nodes'),
    ({"distributed": {"gpusPerNode": 16}}, r'distributed\.gpusPerNode=16: Standard_ND96isr_H100_v5 has 8 GPU'),
    ({"distributed": {"batchSize": 1000}}, r'distributed\.batchSize=1000: must split evenly over 16 processes'),
    ({"addons": {}}, r'addons\.networkOperator=false: .* only with the Network Operator'),
    ({"gpuPools": [{"name": "ndh100", "vmSize": "Standard_ND96isr_H100_v5", "priority": "regular", "minCount": 0,
                    "maxCount": 2, "zones": ["1", "2"]}]}, r'gpuPools\[0\]\.zones=.*one zone'),
    ({"gpuPools": [{"name": "ndh100", "vmSize": "Standard_ND96isr_H100_v5", "priority": "regular", "minCount": 0,
                    "maxCount": 2, "driver": "install"}]},
     r'gpuPools\[0\]\.driver="install": .*use driver precompiled or none'),
    ({"addons": {"networkOperator": True, "nfd": False}}, r'addons\.networkOperator=true: needs addons\.nfd'),
]


@pytest.mark.parametrize("change, says", REFUSED, ids=[s[:30] for _, s in REFUSED])
def test_what_cannot_work_is_refused_in_one_line(change, says):
    with pytest.raises(ConfigError) as e:
        load({**stack_config_of(STACK), **change})
    assert any(re.search(says, str(p)) for p in e.value.problems), str(e.value)


def test_the_network_operator_alone_is_refused_without_an_infiniband_pool():
    with pytest.raises(ConfigError, match="no GPU pool has InfiniBand"):
        load({"scenario": "gpu-basics", "gpuPools": [{"name": "t4", "vmSize": "Standard_NC4as_T4_v3"}],
              "addons": {"networkOperator": True}})

