"""The config core: one declaration per key, strict values, every problem of a stack file at once (one line
each, naming the key, the value and what is allowed), keys that moved saying where, and the stack files' JSON
Schema agreeing with the loader. Pure: no Pulumi program runs here."""

import json

import jsonschema
import pytest
import yaml

from offline.docs import STACK_FILE_SCHEMA
from offline.stack_files import REPO_ROOT, stack_files
from program.config.errors import ConfigError, validated
from program.config.keys import PROJECT
from program.config.schema import GPU_POOL_DEFAULTS, GpuPool, StackConfig
from tests.helpers import load

T4 = {"name": "t4", "vmSize": "Standard_NC4as_T4_v3"}

BAD_CONFIGS = [
    # (config namespace, the key the error names, text the message must contain)
    ({"scenario": "gpu-party"}, "aksgpu:scenario", 'invalid config aksgpu:scenario="gpu-party": allowed: function-gpu'),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NC6"}]}, "aksgpu:gpuPools[0].vmSize",
     "Standard_NC6 is NC-series (Tesla K80), retired by Azure on 2023-09-06; use Standard_NC4as_T4_v3"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NCA100ads_A100_v4"}]}, "aksgpu:gpuPools[0].vmSize",
     "did you mean"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_D4s_v5"}]}, "aksgpu:gpuPools[0].vmSize", "not a GPU size"),
    ({"gpuPools": [{**T4, "name": "gpu-pool"}]}, "aksgpu:gpuPools[0].name", "^[a-z][a-z0-9]{0,11}$"),
    ({"gpuPools": [{**T4, "name": "averyveryverylongname"}]}, "aksgpu:gpuPools[0].name", "1-12 lowercase"),
    ({"gpuPools": [{**T4, "minCount": 3, "maxCount": 2}]}, "aksgpu:gpuPools[0].minCount", "must be <= maxCount 2"),
    ({"gpuPools": [{**T4, "minCount": 1, "maxCount": 3, "count": 0}]}, "aksgpu:gpuPools[0].count",
     "between minCount 1 and maxCount 3"),
    ({"gpuPools": [{**T4, "minCount": -1}]}, "aksgpu:gpuPools[0].minCount", "must be >= 0"),
    ({"gpuPools": [{**T4, "maxCount": 0}]}, "aksgpu:gpuPools[0].maxCount", "must be between 1 and 1000"),
    ({"gpuPools": [{**T4, "spotMaxPrice": 0}]}, "aksgpu:gpuPools[0].spotMaxPrice", "-1 or a price > 0"),
    ({"gpuPools": [{**T4, "spotMaxPrice": 0.123456}]}, "aksgpu:gpuPools[0].spotMaxPrice", "at most 5 decimals"),
    ({"gpuPools": [{**T4, "priority": "regular", "spotMaxPrice": 0.5}]}, "aksgpu:gpuPools[0].spotMaxPrice",
     "only applies with priority spot"),
    ({"gpuPools": [{**T4, "priority": "lowpri"}]}, "aksgpu:gpuPools[0].priority", "allowed: regular, spot"),
    ({"gpuPools": [{**T4, "minCount": "1"}]}, "aksgpu:gpuPools[0].minCount", "must be an integer"),
    ({"gpuPools": [{**T4, "vmsize": "Standard_NC4as_T4_v3"}]}, "aksgpu:gpuPools[0].vmsize",
     "unknown key; did you mean vmSize?"),
    ({"gpuPools": [T4, T4]}, "aksgpu:gpuPools[1].name", "pool names must be unique"),
    ({"gpuPools": [{**T4, "name": "system"}]}, "aksgpu:gpuPools[0].name", "cluster.systemPool already uses it"),
    ({"gpuPools": [{**T4, "labels": {"kubernetes.azure.com/mode": "x"}}]},
     "aksgpu:gpuPools[0].labels.kubernetes.azure.com/mode", "outside kubernetes.azure.com/"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NV36ads_A10_v5", "driver": "precompiled"}]},
     "aksgpu:gpuPools[0].driver", "needs the GRID driver that only AKS installs"),
    ({"cluster": {"kubernetesVersion": "1.34"}}, "aksgpu:cluster.kubernetesVersion",
     "run Ubuntu 24.04, which AKS's Ubuntu is on Kubernetes 1.35 to 1.38"),
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
    ({"registry": {"sku": "Premium", "private": True}, "build": {"mode": "acr"}}, "aksgpu:build.mode",
     "an ACR Task run cannot push into a private registry (registry.private); use build.mode local"),
    ({"gpuPools": [{**T4, "spotMaxPrice": "nan"}]}, "aksgpu:gpuPools[0].spotMaxPrice", "must be a number"),
    ({"gpuPools": [{**T4, "spotMaxPrice": float("inf")}]}, "aksgpu:gpuPools[0].spotMaxPrice", "finite"),
    ({"gpuPools": "not a list"}, "aksgpu:gpuPools", "must be a list"),
    ({"cluster": ["private"]}, "aksgpu:cluster", "must be an object"),
    ({"cluster": {"adminGroupObjectIds": ["admins"]}}, "aksgpu:cluster.adminGroupObjectIds[0]", "GUID"),
    ({"nameRoot": "My_Root"}, "aksgpu:nameRoot", "2-20 lowercase"),
    # Issue 35 audit NIT: display names, as the portal shows them (List Locations' displayName).
    ({"location": "East US"}, "aksgpu:location", "'East US' is the display name of eastus; did you mean eastus?"),
    ({"location": "east us 2"}, "aksgpu:location", "'east us 2' is the display name of eastus2; did you mean eastus2?"),
    ({"location": "EastUS"}, "aksgpu:location", "not an Azure region name; did you mean eastus?"),
    ({"gpupools": []}, "aksgpu:gpupools", "unknown key; did you mean gpuPools? allowed here:"),
    ({"gpuPools": [{**T4, "provisioning": "nap", "count": 1}], "cluster": {"systemPool": {"maxCount": 2}}},
     "aksgpu:gpuPools[0].count", "NAP starts no nodes of its own"),  # refused like its sibling minCount
    ({"scenario": "av-resim"}, "aksgpu:storage.accounts", "needs storage accounts with roles input, output"),
    ({"scenario": "training-autoscale", "gpuPools": [{**T4, "minCount": 1}],
      "storage": {"accounts": [{"role": "ckpt"}]}, "cpuPools": [{"name": "cpu"}]},
     "aksgpu:gpuPools", "scales from 0"),
    ({"scenario": "gpu-sharing"}, "aksgpu:gpuPools", "offer 3 or more GPU shares"),
    ({"scenario": "function-gpu", "registry": {"enabled": False}}, "aksgpu:registry.enabled", "builds images"),
    ({"gpuPools": []}, "aksgpu:gpuPools", "needs at least one GPU pool"),
    ({"ttlHours": 0}, "aksgpu:ttlHours", "between 1 and 720"),
    ({"cluster": {"openApiServer": True, "maintenanceWindow": {"durationHours": 3}}},
     "aksgpu:cluster.maintenanceWindow.durationHours", "must be between 4 and 24"),
    ({"cluster": {"openApiServer": True, "maintenanceWindow": {"startTime": "25:00"}}},
     "aksgpu:cluster.maintenanceWindow.startTime", "HH:MM"),
    ({"lifetime": "forever"}, "aksgpu:lifetime", "allowed: demo, long-lived"),
    ({"build": {"mode": "docker"}}, "aksgpu:build.mode", "allowed: acr, local"),
    ({"build": {"context": "."}}, "aksgpu:build.context", "unknown key; allowed here: mode"),
    ({"scenario": "function-gpu", "addons": {"gpuOperator": False}, "gpuPools": [{**T4, "driver": "install"}]},
     "aksgpu:addons.gpuOperator", "requests nvidia.com/gpu"),
    ({"gpuPools": [{**T4, "labels": {"team": "a b"}}]}, "aksgpu:gpuPools[0].labels.team",
     "label values are up to 63 letters"),
    ({"gpuPools": [{"name": "a10", "vmSize": "Standard_NV36ads_A10_v5", "driver": "install",
                    "sharing": {"mode": "mps"}}]}, "aksgpu:gpuPools[0].sharing.mode", "A10 (Standard_NV36ads_A10_v5) "
                                                                                   "does not support mps"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NC24ads_A100_v4", "driver": "install", "sharing": {"mode": "mig"}}]},
     "aksgpu:gpuPools[0].sharing.migProfile", "mode mig needs a profile such as MIG1g"),
    ({"gpuPools": [{**T4, "vmSize": "Standard_NC24ads_A100_v4", "driver": "none",
                    "sharing": {"mode": "mig", "migProfile": "MIG1g"}}]},
     "aksgpu:gpuPools[0].driver", "MIG pools need driver install"),
    ({"monitoring": {"enabled": False, "grafana": True}, "addons": {"keda": False}}, "aksgpu:monitoring.grafana",
     "needs monitoring.enabled"),
    ({"monitoring": {"alertEmail": "ml-team"}}, "aksgpu:monitoring.alertEmail", "must be one e-mail address"),
    ({"addons": {"smokeTest": True, "gpuOperator": False}, "gpuPools": [{**T4, "driver": "install"}]},
     "aksgpu:addons.smokeTest", "the smoke test needs the GPU operator's device plugin"),
    ({"storage": {"accounts": [{"role": "in"}]}, "addons": {"blobCsi": False}}, "aksgpu:addons.blobCsi",
     "storage.accounts are mounted as blob volumes"),
    ({"cluster": {"systemPool": {"vmSize": "Standard_NC4as_T4_v3"}}}, "aksgpu:cluster.systemPool.vmSize",
     "GPU sizes belong in gpuPools, not cluster.systemPool"),
]


@pytest.mark.parametrize("raw, key, text", BAD_CONFIGS, ids=[f"{k}:{t[:30]}" for _, k, t in BAD_CONFIGS])
def test_bad_config_stops_with_one_line_naming_key_and_value(raw, key, text):
    with pytest.raises(ConfigError) as e:
        load(raw)
    problem = next((p for p in e.value.problems if p.key == key), e.value.problems[0])
    assert problem.key == key
    assert str(problem).startswith(f"invalid config {key}=")
    assert text in str(problem) and "\n" not in str(problem)


def test_every_problem_of_a_stack_file_is_reported_at_once_one_line_each():
    with pytest.raises(ConfigError) as e:
        load({"ttlHours": 0, "gpuPools": [{"name": "T4", "maxCuont": 2}], "cluster": {"loginMode": "devicecode"},
              "monitoring": {"idleGpuMinutes": 1}}, "test")
    keys = [p.key for p in e.value.problems]
    assert keys == ["aksgpu:ttlHours", "aksgpu:cluster.loginMode", "aksgpu:gpuPools[0].name",
                    "aksgpu:gpuPools[0].maxCuont", "aksgpu:monitoring.idleGpuMinutes"]
    assert str(e.value).splitlines() == [str(p) for p in e.value.problems]


def test_unknown_keys_and_scenario_names_suggest_the_nearest_one():
    with pytest.raises(ConfigError, match=r'scenario="gpu-basic": did you mean gpu-basics\? allowed:'):
        load({"scenario": "gpu-basic"})
    with pytest.raises(ConfigError, match=r"gpuPools\[0\].maxCuont=2: unknown key; did you mean maxCount\?"):
        load({"gpuPools": [{"maxCuont": 2}]})


def test_a_key_that_moved_into_a_scenarios_section_says_where_it_went():
    with pytest.raises(ConfigError) as e:
        load({"scenario": "av-resim", "workloads": {"resimJobs": 5, "gpuTestJobs": 3}, "cluster": {"private": True},
              "storage": {"accounts": [{"role": "input"}, {"role": "output"}]}, "build": {"mode": "local"}})
    assert [str(p) for p in e.value.problems] == [
        "invalid config aksgpu:workloads.resimJobs=5: moved to aksgpu:resim.jobs",
        "invalid config aksgpu:workloads.gpuTestJobs=3: moved to aksgpu:resim.gpuTestJobs"]
    with pytest.raises(ConfigError, match="moved to aksgpu:resim.jobs, a key of av-resim stacks; this stack runs "
                                          "gpu-basics"):
        load({"workloads": {"resimJobs": 5}})


def test_a_scenarios_section_on_another_scenarios_stack_is_refused():
    with pytest.raises(ConfigError, match=r'aksgpu:resim=\{"jobs": 3\}: is the section of av-resim stacks; this stack '
                                          "runs gpu-basics"):
        load({"resim": {"jobs": 3}})


def test_values_are_strict_but_top_level_ones_arrive_as_cli_strings():
    cfg = load({"gpuPools": '[{"name": "t4", "minCount": 1, "maxCount": 2}]', "cluster": '{"openApiServer": true}',
                "ttlHours": "8", "owner": "123", "lifetime": "demo"})
    assert cfg.gpu_pools[0].min_count == 1 and cfg.ttl_hours == 8 and cfg.owner == "123"
    for nested in ({"gpuPools": [{"minCount": "1"}]}, {"cluster": {"private": "true"}}):
        with pytest.raises(ConfigError, match="must be (an integer|true or false)"):
            load(nested)


def test_defaults_give_a_spot_t4_pool_that_scales_to_zero_with_the_operators_precompiled_driver():
    cfg = load({}, "dev")
    (gpu,) = cfg.gpu_pools
    assert gpu == GPU_POOL_DEFAULTS == GpuPool() and load({"gpuPools": [{}]}, "dev").gpu_pools == (gpu,)
    assert (gpu.vm_size, gpu.spot, gpu.spot_max_price, gpu.min_count, gpu.initial_count, gpu.gpu_driver) == \
        ("Standard_NC4as_T4_v3", True, -1.0, 0, 0, "precompiled")
    assert cfg.environment == "dev" and cfg.naming.root == "dev" and cfg.stack == "dev" and cfg.project == PROJECT


def test_driver_defaults_to_aks_where_only_aks_can_install_it():
    a10 = {"name": "a10", "vmSize": "Standard_NV36ads_A10_v5"}
    mig = {"name": "mig", "vmSize": "Standard_NC24ads_A100_v4", "sharing": {"mode": "mig", "migProfile": "MIG1g"}}
    pools = load({"gpuPools": [a10, mig, {"name": "a100", "vmSize": "Standard_NC24ads_A100_v4"}]}).gpu_pools
    assert [p.gpu_driver for p in pools] == ["install", "install", "precompiled"]


def test_defaults_that_depend_on_other_keys_follow_them():
    cfg = load({"cluster": {"private": True}, "build": {"mode": "local"}, "storage": {"accounts": [{"role": "in"}]},
                "gpuPools": [{"minCount": 1, "maxCount": 2, "sharing": {"mode": "time-slicing"}}]})
    assert cfg.storage.private is True and cfg.addons.blob_csi is True
    assert cfg.gpu_pools[0].initial_count == 1 and cfg.gpu_pools[0].schedulable_gpus_per_node == 2
    assert cfg.storage.accounts[0].container_names == ("in",)


def test_tags_name_scenario_environment_and_owner():
    cfg = load({"scenario": "gpu-basics", "owner": "ml-team", "environment": "staging"}, "x")
    assert {"scenario": "gpu-basics", "environment": "staging", "owner": "ml-team"}.items() <= cfg.tags.items()


def test_every_pulumi_yaml_default_is_the_models_default():
    declared = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())["config"]
    assert declared
    for key, spec in declared.items():
        field = next(f for f in StackConfig.model_fields.values() if f.alias == key)
        assert spec.get("description") and spec["default"] == field.default, key


def stack_file_schema() -> dict:
    return json.loads((REPO_ROOT / STACK_FILE_SCHEMA).read_text())


def test_every_stack_file_validates_against_the_committed_json_schema():
    validator = jsonschema.Draft202012Validator(stack_file_schema())
    for stack, path in stack_files().items():
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], stack
        assert path.read_text().startswith(f"# yaml-language-server: $schema=./{STACK_FILE_SCHEMA}"), stack


@pytest.mark.parametrize("raw", [
    {"gpuPools": [{"minCount": -1}]}, {"ttlHours": 0}, {"gpuPools": [{"maxCuont": 2}]}, {"lifetime": "forever"},
    {"cluster": {"private": "yes"}}, {"scenario": "gpu-party"}, {"resim": {"jobs": 3}},
    {"scenario": "llm-serving", "llm": {"modle": "x"}}, {"scenario": "gpu-basics", "training": {"parallelRuns": 2}},
])
def test_the_json_schema_refuses_what_the_loader_refuses_for_its_shape(raw):
    stack_file = {"config": {f"{PROJECT}:{k}": v for k, v in raw.items()}}
    assert list(jsonschema.Draft202012Validator(stack_file_schema()).iter_errors(stack_file))
    with pytest.raises(ConfigError):
        load(raw)


def test_a_value_the_checks_let_through_missing_is_a_bug_naming_its_key():
    assert validated(0, "aksgpu:llm.pool") == 0  # falsy but present
    with pytest.raises(AssertionError, match="aksgpu:llm.pool was not validated"):
        validated(None, "aksgpu:llm.pool")
