"""Config parsing and validation: pure, no mocks."""

import dataclasses
import re

import pytest
import yaml

import stacks
from offline.stack_files import REPO_ROOT
from program.pipeline import load_stack_config
from stackconfig import loader, reference
from stackconfig.reader import ConfigError, Section
from stackconfig.schema import DEFAULT_GPU_POOL, PROJECT, StackConfig
from tests.helpers import with_api_server_decision


def load_config(raw, project=PROJECT, stack="test"):
    """Load ``raw`` with ``cluster.openApiServer: true`` unless it decides how the API server is reached."""
    return loader.load_config(with_api_server_decision(raw), project, stack, scenarios=stacks.REGISTRY)

T4 = {"name": "t4", "vmSize": "Standard_NC4as_T4_v3"}

BAD_CONFIGS = [
    # (config namespace, the key the error names, text the message must contain)
    ({"scenario": "gpu-party"}, "aksgpu:scenario", 'invalid config aksgpu:scenario="gpu-party": allowed: function-gpu'),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NC6"}]}, "aksgpu:gpuPools[0].vmSize",
     "Standard_NC6 is NC-series (Tesla K80), retired by Azure on 2023-09-06; use Standard_NC4as_T4_v3"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NCA100ads_A100_v4"}]}, "aksgpu:gpuPools[0].vmSize",
     "did you mean"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_D4s_v5"}]}, "aksgpu:gpuPools[0].vmSize", "not a known Azure GPU size"),
    ({"gpuPools": [{**T4, "name": "gpu-pool"}]}, "aksgpu:gpuPools[0].name", "^[a-z][a-z0-9]{0,11}$"),
    ({"gpuPools": [{**T4, "name": "averyveryverylongname"}]}, "aksgpu:gpuPools[0].name", "1-12 lowercase"),
    ({"gpuPools": [{**T4, "minCount": 3, "maxCount": 2}]}, "aksgpu:gpuPools[0].minCount", "must be <= maxCount 2"),
    ({"gpuPools": [{**T4, "minCount": 1, "maxCount": 3, "count": 0}]}, "aksgpu:gpuPools[0].count",
     "between minCount 1 and maxCount 3"),
    ({"gpuPools": [{**T4, "minCount": -1}]}, "aksgpu:gpuPools[0].minCount", "must be >= 0"),
    ({"gpuPools": [{**T4, "maxCount": 0}]}, "aksgpu:gpuPools[0].maxCount", "between 1 and 1000"),
    ({"gpuPools": [{**T4, "spotMaxPrice": 0}]}, "aksgpu:gpuPools[0].spotMaxPrice", "-1 or a price > 0"),
    ({"gpuPools": [{**T4, "spotMaxPrice": 0.123456}]}, "aksgpu:gpuPools[0].spotMaxPrice", "at most 5 decimals"),
    ({"gpuPools": [{**T4, "priority": "regular", "spotMaxPrice": 0.5}]}, "aksgpu:gpuPools[0].spotMaxPrice",
     "only applies with priority spot"),
    ({"gpuPools": [{**T4, "priority": "lowpri"}]}, "aksgpu:gpuPools[0].priority", "allowed: regular, spot"),
    ({"gpuPools": [{**T4, "minCount": "1"}]}, "aksgpu:gpuPools[0].minCount", "must be an integer"),
    ({"gpuPools": [{**T4, "vmsize": "Standard_NC4as_T4_v3"}]}, "aksgpu:gpuPools[0].vmsize", "unknown key"),
    ({"gpuPools": [T4, T4]}, "aksgpu:gpuPools[1].name", "pool names must be unique"),
    ({"gpuPools": [{**T4, "name": "system"}]}, "aksgpu:gpuPools[0].name", "cluster.systemPool already uses it"),
    ({"gpuPools": [{**T4, "labels": {"kubernetes.azure.com/mode": "x"}}]},
     "aksgpu:gpuPools[0].labels.kubernetes.azure.com/mode", "outside kubernetes.azure.com/"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NV36ads_A10_v5"}]}, "aksgpu:gpuPools[0].driver",
     "needs the GRID driver that only AKS installs"),
    ({"gpuPools": [{**T4, "sharing": {"mode": "mig", "migProfile": "MIG1g"}}]}, "aksgpu:gpuPools[0].sharing.mode",
     "MIG needs a MIG-capable size (A100, H100), not T4"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NC24ads_A100_v4", "sharing": {"mode": "time-slicing",
                                                                        "migProfile": "MIG1g"}}]},
     "aksgpu:gpuPools[0].sharing.migProfile", "MIG and time-slicing do not mix on one pool"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NC24ads_A100_v4", "sharing": {"mode": "mig", "migProfile": "MIG9g"}}]},
     "aksgpu:gpuPools[0].sharing.migProfile", "allowed: MIG1g"),
    ({"gpuPools": [{**T4, "sharing": {"mode": "time-slicing", "replicas": 1}}]},
     "aksgpu:gpuPools[0].sharing.replicas", "time-slicing needs replicas >= 2"),
    ({"gpuPools": [{**T4, "sharing": {"mode": "none", "replicas": 4}}]}, "aksgpu:gpuPools[0].sharing.replicas",
     "replicas only apply to time-slicing or mps"),
    ({"cpuPools": [{"name": "cpu", "vmSize": "Standard_NC4as_T4_v3"}]}, "aksgpu:cpuPools[0].vmSize",
     "GPU sizes belong in gpuPools"),
    ({"registry": {"name": "my-registry"}}, "aksgpu:registry.name", "5-50 letters and digits"),
    ({"registry": {"private": True}}, "aksgpu:registry.sku", "needs Premium"),
    ({"storage": {"accounts": [{"role": "input", "name": "Input_Account"}]}}, "aksgpu:storage.accounts[0].name",
     "3-24 lowercase letters and digits"),
    ({"storage": {"accounts": [{"role": "input", "containers": ["In--put"]}]}},
     "aksgpu:storage.accounts[0].containers[0]", "3-63 lowercase"),
    ({"storage": {"accounts": [{"role": "input"}, {"role": "input"}]}}, "aksgpu:storage.accounts[1].role",
     "each storage account needs its own role"),
    ({"storage": {"sasExpiryDays": 0}}, "aksgpu:storage.sasExpiryDays", "between 1 and 365"),
    ({"network": {"addressSpace": "10.20.0.0/33"}}, "aksgpu:network.addressSpace", "must be a CIDR"),
    ({"network": {"addressSpace": "10.20.0.1/16"}}, "aksgpu:network.addressSpace", "must be a CIDR"),
    ({"network": {"nodeSubnet": "10.30.0.0/20"}}, "aksgpu:network.nodeSubnet", "inside network.addressSpace"),
    ({"network": {"endpointSubnet": "10.20.8.0/24"}}, "aksgpu:network.endpointSubnet", "overlaps network.nodeSubnet"),
    ({"network": {"podCidr": "10.20.128.0/17"}}, "aksgpu:network.podCidr", "must not overlap network.addressSpace"),
    ({"network": {"serviceCidr": "192.168.0.0/20", "dnsServiceIp": "192.168.0.10"}}, "aksgpu:network.serviceCidr",
     "overlaps network.podCidr"),
    ({"network": {"dnsServiceIp": "172.17.0.10"}}, "aksgpu:network.dnsServiceIp", "inside network.serviceCidr"),
    ({"cluster": {"authorizedIpRanges": ["0.0.0.0/0"]}}, "aksgpu:cluster.authorizedIpRanges[0]",
     "must not open the API server to every address"),
    ({"cluster": {"private": True, "authorizedIpRanges": ["203.0.113.7/32"]}}, "aksgpu:cluster.authorizedIpRanges",
     "must be empty when cluster.private is true"),
    ({"cluster": {"openApiServer": False}}, "aksgpu:cluster.authorizedIpRanges",
     "leaves the public API server open to every address; list your egress CIDRs"),
    ({"cluster": {"private": True, "openApiServer": True}}, "aksgpu:cluster.openApiServer",
     "contradicts cluster.private or cluster.authorizedIpRanges"),
    ({"cluster": {"loginMode": "devicecode"}}, "aksgpu:cluster.loginMode", "devicecode is interactive"),
    ({"cluster": {"systemPool": {"priority": "spot"}}}, "aksgpu:cluster.systemPool.priority",
     "the system pool must be regular"),
    ({"cluster": {"systemPool": {"minCount": 0}}}, "aksgpu:cluster.systemPool.minCount", "at least 1 node"),
    ({"cluster": {"kubernetesVersion": "latest"}}, "aksgpu:cluster.kubernetesVersion", "such as 1.33"),
    ({"cluster": {"autoscaler": {"scaleDownUnneededTime": "ten minutes"}}},
     "aksgpu:cluster.autoscaler.scaleDownUnneededTime", "AKS takes whole minutes"),
    ({"cluster": {"autoscaler": {"scaleDownUnneededTime": "300s"}}},
     "aksgpu:cluster.autoscaler.scaleDownUnneededTime", "AKS takes whole minutes, such as 10m"),
    ({"cluster": {"autoscaler": {"maxNodeProvisionTime": "1h"}}},
     "aksgpu:cluster.autoscaler.maxNodeProvisionTime", "AKS takes whole minutes"),
    ({"cluster": {"autoscaler": {"scanInterval": "1m"}}}, "aksgpu:cluster.autoscaler.scanInterval",
     "AKS takes whole seconds, such as 10s"),
    ({"cluster": {"upgradeChannel": "node-image", "nodeOsUpgradeChannel": "SecurityPatch"}},
     "aksgpu:cluster.nodeOsUpgradeChannel", "must be NodeImage while cluster.upgradeChannel is node-image"),
    ({"cluster": {"networkPolicy": "azure"}}, "aksgpu:cluster.networkPolicy", "allowed: cilium, calico"),
    ({"network": {"podCidr": "172.30.0.0/16"}}, "aksgpu:network.podCidr", "overlaps 172.30.0.0/16, which AKS reserves"),
    ({"network": {"serviceCidr": "169.254.0.0/16", "dnsServiceIp": "169.254.0.10"}}, "aksgpu:network.serviceCidr",
     "which AKS reserves"),
    ({"network": {"serviceCidr": "10.128.0.0/9", "dnsServiceIp": "10.128.0.10"}}, "aksgpu:network.serviceCidr",
     "must be smaller than a /12"),
    ({"storage": {"accounts": [{"role": "a", "containers": ["data"]}, {"role": "b", "containers": ["data"]}]}},
     "aksgpu:storage.accounts[1].containers[0]", "container names must be unique in the stack"),
    ({"storage": {"accounts": [{"role": "in", "name": "stsame01", "containers": ["input"]},
                               {"role": "out", "name": "stsame01", "containers": ["output"]}]}},
     "aksgpu:storage.accounts[1].name", "each storage account needs its own name"),
    ({"owner": ""}, "aksgpu:owner", "must not be empty"),
    ({"registry": {"sku": "Premium", "private": True}}, "aksgpu:build.mode",
     "an ACR Task run cannot push into a private registry (registry.private); use build.mode local"),
    ({"gpuPools": [{**T4, "spotMaxPrice": "nan"}]}, "aksgpu:gpuPools[0].spotMaxPrice", "must be a number"),
    ({"gpuPools": [{**T4, "spotMaxPrice": float("inf")}]}, "aksgpu:gpuPools[0].spotMaxPrice", "finite"),
    ({"gpuPools": "not a list"}, "aksgpu:gpuPools", "must be a list"),
    ({"cluster": ["private"]}, "aksgpu:cluster", "must be an object"),
    ({"cluster": {"adminGroupObjectIds": ["admins"]}}, "aksgpu:cluster.adminGroupObjectIds[0]", "GUID"),
    ({"nameRoot": "My_Root"}, "aksgpu:nameRoot", "2-20 lowercase"),
    ({"location": "East US"}, "aksgpu:location", "Azure region name"),
    ({"gpupools": []}, "aksgpu:gpupools", "unknown key; allowed here:"),
    ({"scenario": "av-resim"}, "aksgpu:storage.accounts", "needs storage accounts with roles input, output"),
    ({"scenario": "training-autoscale", "gpuPools": [{**T4, "minCount": 1}],
      "storage": {"accounts": [{"role": "ckpt"}]}, "cpuPools": [{"name": "cpu"}]},
     "aksgpu:gpuPools", "scales from 0"),
    ({"scenario": "gpu-sharing"}, "aksgpu:gpuPools", "offer 3 or more GPU shares"),
    ({"scenario": "function-gpu", "registry": {"enabled": False}}, "aksgpu:registry.enabled", "builds images"),
    ({"gpuPools": []}, "aksgpu:gpuPools", "needs at least one GPU pool"),
    ({"ttlHours": 0}, "aksgpu:ttlHours", "between 1 and 720"),
    ({"lifetime": "forever"}, "aksgpu:lifetime", "allowed: demo, long-lived"),
    ({"build": {"mode": "docker"}}, "aksgpu:build.mode", "allowed: acr, local"),
    ({"build": {"context": "."}}, "aksgpu:build.context", "unknown key; allowed here: mode"),
    ({"function": {"pool": "a100"}}, "aksgpu:function.pool", "must name a GPU pool of this stack: gpu"),
    ({"function": {"exposure": "private"}}, "aksgpu:function.exposure", "allowed: internal, public"),
    ({"function": {"allowedSourceRanges": ["0.0.0.0/0"]}}, "aksgpu:function.allowedSourceRanges[0]",
     "would open the function to the whole internet"),
    ({"function": {"exposure": "public"}}, "aksgpu:function.allowedSourceRanges",
     "must list the CIDRs that may call a public function"),
    ({"function": {"allowedSourceRanges": ["203.0.113.7/24"]}}, "aksgpu:function.allowedSourceRanges[0]",
     "must be a CIDR"),
    ({"function": {"maxContextChars": 10}}, "aksgpu:function.maxContextChars", "between 100 and 200000"),
    ({"storage": {"accounts": [{"role": "build"}]}}, "aksgpu:storage.accounts[0].role",
     "reserved for the account that holds image build contexts"),
    ({"scenario": "gpu-sharing", "gpuPools": [{**T4, "minCount": 1, "maxCount": 1,
                                               "sharing": {"mode": "time-slicing", "replicas": 4}}],
      "workloads": {"inferenceServices": 4}}, "aksgpu:workloads.inferenceServices",
     "5 pods (services + notebook) each take one GPU share, but pool 't4' offers 4"),
    ({"workloads": {"resimJobs": 0}}, "aksgpu:workloads.resimJobs", "between 1 and 1000"),
    ({"workloads": {"largeModelImage": "metaseq"}}, "aksgpu:workloads.largeModelImage", "REGISTRY/REPOSITORY:TAG"),
    ({"workloads": {"largeModelImage": "myacr.azurecr.io/metaseq:latest"}}, "aksgpu:workloads.largeModelImage",
     "a tag other than latest"),
    ({"scenario": "av-resim", "storage": {"accounts": [{"role": "input"}, {"role": "output"}]},
      "workloads": {"largeModelImage": "myacr.azurecr.io/metaseq:1.0"}}, "aksgpu:workloads.largeModelImage",
     "needs a GPU pool with 2 or more unshared GPUs per node"),
    ({"scenario": "function-gpu", "addons": {"gpuOperator": False}, "gpuPools": [{**T4, "driver": "install"}]},
     "aksgpu:addons.gpuOperator", "requests nvidia.com/gpu"),
]


@pytest.mark.parametrize("raw, key, text", BAD_CONFIGS, ids=[f"{k}:{t[:30]}" for _, k, t in BAD_CONFIGS])
def test_bad_config_stops_with_one_line_naming_key_and_value(raw, key, text):
    with pytest.raises(ConfigError) as e:
        load_stack_config(with_api_server_decision(raw), PROJECT, "test")
    message = str(e.value)
    assert e.value.key == key
    assert message.startswith(f"invalid config {key}=")
    assert text in message
    assert "\n" not in message


def test_config_values_arrive_as_cli_strings_and_are_decoded():
    cfg = load_config({"gpuPools": '[{"name": "t4", "minCount": 1, "maxCount": 2}]',
                       "cluster": '{"private": true}'}, PROJECT, "test")
    assert cfg.gpu_pools[0].pool.min_count == 1 and cfg.cluster.private


def test_defaults_give_a_spot_t4_pool_that_scales_to_zero_with_the_operator_owning_the_driver():
    cfg = load_config({}, PROJECT, "dev")
    (gpu,) = cfg.gpu_pools
    assert (gpu.pool.vm_size, gpu.pool.spot, gpu.pool.spot_max_price, gpu.pool.min_count) == \
        ("Standard_NC4as_T4_v3", True, -1.0, 0)
    assert gpu.driver == "none"
    assert cfg.environment == "dev" and cfg.naming.root == "dev"


def test_tags_name_scenario_environment_and_owner():
    cfg = load_config({"scenario": "gpu-basics", "owner": "ml-team", "environment": "staging"}, PROJECT, "x")
    assert {"scenario": "gpu-basics", "environment": "staging", "owner": "ml-team"}.items() <= cfg.tags.items()


def test_schedulable_gpus_multiply_gpus_by_sharing_replicas():
    cfg = load_config({"gpuPools": [{"name": "a", "vmSize": "Standard_NC64as_T4_v3",
                                     "sharing": {"mode": "time-slicing", "replicas": 3}},
                                    {"name": "b", "vmSize": "Standard_NC48ads_A100_v4"}]}, PROJECT, "x")
    assert [g.schedulable_gpus_per_node for g in cfg.gpu_pools] == [12, 2]


def test_every_pulumi_yaml_default_is_the_schemas_default():
    declared = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())["config"]
    documented = {k.key: k for k in reference.reference()}
    schema_fields = {reference.config_key(f): f for f in dataclasses.fields(StackConfig)}
    assert declared
    for key, spec in declared.items():
        assert spec.get("description"), key
        assert key in documented and not documented[key].section, key
        assert spec["default"] == schema_fields[key].default, key


def test_the_default_gpu_pool_is_what_an_empty_entry_parses_to():
    assert load_config({}).gpu_pools == StackConfig(project=PROJECT, stack="test").gpu_pools == (DEFAULT_GPU_POOL,)
    assert load_config({"gpuPools": [{}]}).gpu_pools == (DEFAULT_GPU_POOL,)


def _every_key_set() -> dict:
    """A config that sets every section and one entry of every list (each value valid)."""
    return {
        "network": {}, "cluster": {"systemPool": {}, "autoscaler": {}}, "registry": {}, "addons": {}, "build": {},
        "function": {}, "workloads": {},
        "gpuPools": [{"sharing": {}}], "cpuPools": [{}], "storage": {"accounts": [{}]},
    }


def _keys_read(monkeypatch) -> set[str]:
    """Every key path the loader reads from now on (``gpuPools[].name``), filled as it reads."""
    read: set[str] = set()
    original_get, original_section = Section.get, Section.section

    def path(section, name):
        key = section.key(name).split(":", 1)[1]
        return re.sub(r"\[\d+\]", "[]", key)

    def get(self, name, *args, **kwargs):
        read.add(path(self, name))
        return original_get(self, name, *args, **kwargs)

    def section(self, name):
        read.add(path(self, name))
        return original_section(self, name)

    monkeypatch.setattr(Section, "get", get)
    monkeypatch.setattr(Section, "section", section)
    return read


def test_the_reference_documents_exactly_the_keys_the_loader_reads(monkeypatch):
    read = _keys_read(monkeypatch)
    load_config(_every_key_set())
    assert read == {k.key for k in reference.reference()}


def test_each_scenario_section_is_documented_key_for_key(monkeypatch):
    sections = reference.scenario_sections()
    assert set(sections) == {"llm-serving"}
    read = _keys_read(monkeypatch)
    load_config({"scenario": "llm-serving", "storage": {"accounts": [{"role": "models"}]}, "llm": {}})
    assert {k for k in read if k == "llm" or k.startswith("llm.")} == {k.key for k in sections["llm-serving"]}
