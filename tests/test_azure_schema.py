"""Every Azure resource the render sends, against Microsoft's ARM models of the API versions in use.

Mocks accept anything; these models do not. See tests/azure_models.py for what is checked and where the rules
come from. The mocks' answers (ids, identities, FQDNs, run results) are checked as Azure responses too, so the
program is tested against outputs of the shape Azure gives.
"""

from __future__ import annotations

import copy

import pytest
from pulumi.runtime.mocks import MockResourceArgs

from offline.mocks import AzureMocks
from tests.azure_models import ARM_TYPES, NO_PUBLISHED_MODEL, Report, check_resource
from tests.helpers import STACKS, render_with, shape

# One worker runs the module: the config variants (variants) are rendered once, not once per worker.
pytestmark = pytest.mark.xdist_group("azure-schema")

VARIANTS = {
    "local-build-internal-function": dict(scenario="function-gpu", build={"mode": "local"},
                                          function={"exposure": "internal"}),
    "sas-storage": dict(scenario="av-resim", storage={"auth": "sas", "accounts": [{"role": "input"},
                                                                                 {"role": "output"}]}),
    "mig-and-a10-on-demand": dict(gpuPools=[
        {"name": "a100", "vmSize": "Standard_NC24ads_A100_v4", "driver": "install", "priority": "regular",
         "sharing": {"mode": "mig", "migProfile": "MIG2g"}},
        {"name": "a10", "vmSize": "Standard_NV36ads_A10_v5", "driver": "install", "spotMaxPrice": 0.5,
         "zones": ["1", "2"]}]),
    "grafana-alert-email-autoscaler-logs": dict(monitoring={"grafana": True, "alertEmail": "ml-team@example.com",
                                                            "autoscalerLogs": True}),
    "authorized-ranges-standard-tier": dict(cluster={"authorizedIpRanges": ["203.0.113.7/32"], "skuTier": "Standard",
                                                     "upgradeChannel": "stable", "networkPolicy": "calico"}),
    "private-from-a-runner": dict(shape("private-two-pools"), network={
        **shape("private-two-pools")["network"], "runnerVnetId": "/subscriptions/11111111-2222-3333-4444-555555555555/"
        "resourceGroups/rg-runners/providers/Microsoft.Network/virtualNetworks/vnet-runners"}),
}


@pytest.fixture(scope="module")
def variants():
    return {name: render_with(**config) for name, config in VARIANTS.items()}


def azure(render):
    return [r for r in render.resources if r.type.startswith("azure-native:")]


@pytest.mark.parametrize("stack", STACKS)
def test_every_azure_type_the_program_sends_has_its_arm_model(stack, render_of):
    for r in azure(render_of(stack)):
        assert r.type in ARM_TYPES or r.type in NO_PUBLISHED_MODEL, r.type


@pytest.mark.parametrize("stack", STACKS)
def test_every_azure_input_is_valid_for_the_api_version_sent(stack, render_of):
    report = Report()
    for r in azure(render_of(stack)):
        if r.type in ARM_TYPES:
            check_resource(r.type, r.name, r.revealed, report)
    assert report.violations == []
    assert report.values > 100 and report.enums > 20


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_config_variants_send_valid_inputs_too(variants, variant):
    report = Report()
    for r in azure(variants[variant]):
        if r.type in ARM_TYPES:
            check_resource(r.type, r.name, r.revealed, report)
    assert report.violations == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_mocks_answer_with_what_azure_answers(stack, render_of):
    report, mocks = Report(), AzureMocks(stack)
    for r in azure(render_of(stack)):
        if r.type in ARM_TYPES:
            _, outputs = mocks.new_resource(MockResourceArgs(r.type, r.name, r.revealed, "", "", True))
            check_resource(r.type, r.name, outputs, report, response=True)
    assert report.violations == []


def _inputs(render, typ):
    return copy.deepcopy(next(r for r in render.resources if r.type == typ).revealed)


FAULTS = [
    # (resource type, how to break a real input, the violation's words)
    ("azure-native:containerservice:AgentPool", lambda i: i.update(agentPoolName="gpu-pool"), "does not match"),
    ("azure-native:containerservice:AgentPool", lambda i: i.update(scaleSetPriority="Cheap"), "is not one of"),
    ("azure-native:containerservice:AgentPool", lambda i: i.update(osDiskSizeGB=5000), "is above 2048"),
    ("azure-native:containerservice:AgentPool", lambda i: i.update(provisioningState="Succeeded"), "read-only"),
    ("azure-native:containerservice:ManagedCluster", lambda i: i.pop("location"), "required by ManagedCluster"),
    ("azure-native:containerservice:ManagedCluster",
     lambda i: i["networkProfile"].update(networkPolicy="weave"), "is not one of"),
    ("azure-native:storage:StorageAccount", lambda i: i.update(accountName="Not_Valid"), "does not match"),
    ("azure-native:storage:StorageAccount", lambda i: i.update(allowSharedKeys=False), "has no such property"),
    ("azure-native:authorization:RoleAssignment", lambda i: i.update(principalType="Robot"), "is not one of"),
    ("azure-native:containerregistry:Registry", lambda i: i.update(registryName="cr"), "is shorter than 5"),
]


@pytest.mark.parametrize("typ, fault, words", FAULTS, ids=[f"{t.split(':')[-1]}-{w}" for t, _, w in FAULTS])
def test_the_check_catches_a_fault_planted_in_a_real_input(render_shape, typ, fault, words):
    inputs = _inputs(render_shape("training"), typ)
    report = Report()
    check_resource(typ, "planted", inputs, report)
    assert report.violations == []
    fault(inputs)
    check_resource(typ, "planted", inputs, report)
    assert any(words in v for v in report.violations), report.violations
