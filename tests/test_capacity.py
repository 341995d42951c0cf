"""The capacity preflight against recorded Azure responses (tests/fixtures/azure): each case's verdict, in one line
with its fix, through the real SDK calls."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import unquote

import pytest

from ops import capacity
from ops.__main__ import main
from ops.azure_reads import Azure
from ops.capacity import Verdict
from tests.azure_replay import Replay, Token
from tests.helpers import load

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
ENOUGH = {"skus": "skus.json", "usages": "usages-enough.json", "spot": "spot-high.json",
          "pools": "agentpools-none.json"}


def run(gpu_pools: list[dict], raw: dict | None = None, now: datetime | None = None,
        **files: str) -> tuple[list[capacity.PoolCheck], Replay]:
    cfg = load({**(raw or {}), "gpuPools": gpu_pools})
    replay = Replay({**ENOUGH, **files})
    needs = capacity.pool_needs(cfg)
    return capacity.check(needs, capacity.read(Azure(SUBSCRIPTION, Token(), replay), cfg, needs, now)), replay


def pool(checks: list[capacity.PoolCheck], name: str) -> capacity.PoolCheck:
    return next(c for c in checks if c.need.pool == name)


T4_SPOT = {"name": "t4", "vmSize": "Standard_NC4as_T4_v3", "minCount": 0, "maxCount": 3}
H100 = {"name": "h100", "vmSize": "Standard_ND96isr_H100_v5", "priority": "regular", "minCount": 0, "maxCount": 2}


def test_a_spot_pool_with_quota_and_a_high_score_fits():
    checks, replay = run([T4_SPOT])
    t4 = pool(checks, "t4")
    assert t4.verdict == Verdict.FITS and capacity.worst(checks) == Verdict.FITS
    assert t4.line() == ("t4 (Standard_NC4as_T4_v3, 0–3 spot nodes): fits — Total Regional Spot vCPUs 0/100; "
                         "spot placement score for 3 VMs: zone 1 High, zone 2 High, zone 3 High")
    # The score was asked for the pool's maximum, in its region first and where else the size is offered.
    spot = next(body for method, url, body in replay.seen if "placementScores" in url)
    assert spot == {"desiredLocations": ["eastus", "eastus2", "westus3"], "desiredCount": 3,
                    "desiredSizes": [{"sku": "Standard_NC4as_T4_v3"}], "availabilityZones": True}


def test_a_family_without_quota_does_not_fit_and_says_what_to_request():
    checks, _ = run([{**H100, "minCount": 1}], usages="usages-no-gpu-quota.json")
    h100 = pool(checks, "h100")
    assert h100.verdict == Verdict.NO_FIT
    assert ("standardNDSH100v5Family vCPUs in eastus: 0 of 0 used, the stack needs 96 at min and 192 at max, 288 "
            "while an upgrade adds a surge node to each regular pool" in h100.line())
    assert h100.fixes == ["request standardNDSH100v5Family vCPUs in eastus raised to 288 "
                          "(learn.microsoft.com/azure/quotas/per-vm-quota-requests)"]
    assert pool(checks, "system").verdict == Verdict.FITS  # the regional total still has room


def test_room_for_the_minimum_only_fits_at_min_and_asks_for_the_rest():
    checks, _ = run([{**H100, "minCount": 1}], usages="usages-one-node-free.json")
    h100 = pool(checks, "h100")
    assert h100.verdict == Verdict.MIN_ONLY
    assert h100.fixes[0].startswith("request standardNDSH100v5Family vCPUs in eastus raised to 384 ")


def test_a_second_run_of_a_deployed_stack_does_not_count_its_own_nodes_twice():
    # The family's quota holds two nodes, one of them this stack's own running h100 node: the usage says 96 of 192,
    # of which 96 are ours, so the pool's node and an upgrade's surge node fit.
    checks, _ = run([{**H100, "minCount": 1, "maxCount": 1}], usages="usages-one-node-free.json",
                    pools="agentpools-running.json", cluster="cluster-autoscaler.json")
    h100 = pool(checks, "h100")
    assert h100.verdict == Verdict.FITS and "1 node(s) running, not counted twice" in h100.line()


def test_a_size_restricted_in_one_of_the_pools_zones_does_not_fit_and_names_the_zones_that_work():
    a100 = {"name": "a100", "vmSize": "Standard_NC24ads_A100_v4", "minCount": 0, "maxCount": 2, "zones": ["1", "2"]}
    checks, _ = run([a100])
    check = pool(checks, "a100")
    assert check.verdict == Verdict.NO_FIT
    assert check.line() == ("a100 (Standard_NC24ads_A100_v4, 0–2 spot nodes): does not fit — "
                            "Standard_NC24ads_A100_v4 is not available to this subscription in zone(s) 2 of eastus. "
                            "Fix: zones: [1, 3]")


def test_a_low_spot_score_fits_at_min_only_and_points_at_where_it_is_high():
    checks, _ = run([T4_SPOT], spot="spot-low.json")
    t4 = pool(checks, "t4")
    assert t4.verdict == Verdict.MIN_ONLY
    assert "spot capacity is scarce: placement score for 3 VMs in eastus is zone 1 Low, zone 2 Low, zone 3 Low" \
        in t4.line()
    assert t4.fixes == ["High in: eastus2 zone 2"]


def test_an_identity_that_may_not_ask_for_spot_scores_gets_a_note_not_a_failure():
    checks, _ = run([T4_SPOT], spot="spot-forbidden.json")
    t4 = pool(checks, "t4")
    assert t4.verdict == Verdict.FITS
    assert "no spot placement score (the identity may not ask: it needs the Compute Recommendations Role" in t4.line()


def test_a_size_not_offered_in_the_region_does_not_fit_and_names_regions_that_offer_it():
    h200 = {"name": "h200", "vmSize": "Standard_ND96isr_H200_v5", "priority": "regular", "maxCount": 1}
    checks, _ = run([h200])
    check = pool(checks, "h200")
    assert check.verdict == Verdict.NO_FIT
    # southcentralus offers it too, but not to this subscription: it is not suggested.
    assert check.line().endswith("Standard_ND96isr_H200_v5 is not offered in eastus. "
                                 "Fix: a region that offers it: eastus2")


def test_a_size_azure_does_not_list_at_all_does_not_fit():
    a100 = {"name": "a100", "vmSize": "Standard_NC96ads_A100_v4", "maxCount": 1}
    check = pool(run([a100])[0], "a100")
    assert check.verdict == Verdict.NO_FIT
    assert "Azure lists no VM size Standard_NC96ads_A100_v4 for this subscription in any region" in check.line()
    assert check.fixes == ["a size from `az vm list-skus --location eastus --resource-type virtualMachines`"]


def test_pools_that_share_a_quota_are_counted_together():
    # Two T4 spot pools of 3 nodes need 24 of the 100 spot vCPUs together: both fit; with 13 nodes each (104) the
    # minimum (0) fits and the maximum does not, for both.
    two = [T4_SPOT, {**T4_SPOT, "name": "t4b"}]
    assert {c.verdict for c in run(two)[0]} == {Verdict.FITS}
    big = [{**p, "maxCount": 13} for p in two]
    assert {c.verdict for c in run(big)[0] if c.need.pool != "system"} == {Verdict.MIN_ONLY}


def test_the_markdown_summary_has_one_row_per_pool_with_verdict_and_fix():
    checks, _ = run([{**H100, "minCount": 1}], usages="usages-no-gpu-quota.json")
    text = capacity.markdown("test", "eastus", checks)
    assert text.startswith("### Capacity for stack `test` in `eastus`: does not fit")
    assert "| h100 | `Standard_ND96isr_H100_v5` | 1–2 nodes | **does not fit** |" in text
    assert text.count("\n| ") == 3  # header, system, h100


@pytest.mark.parametrize("verdict, fail_on, code", [
    (Verdict.FITS, None, 0), (Verdict.MIN_ONLY, None, 1), (Verdict.NO_FIT, None, 2), (Verdict.UNCHECKED, None, 3),
    (Verdict.MIN_ONLY, "no-fit", 0), (Verdict.NO_FIT, "no-fit", 1), (Verdict.MIN_ONLY, "min-only", 1),
    (Verdict.UNCHECKED, "no-fit", 0), (Verdict.NO_FIT, "never", 0),
])
def test_exit_codes_are_the_worst_verdict_or_what_fail_on_asks(verdict, fail_on, code):
    assert capacity.exit_code(verdict, fail_on) == code


def test_the_command_prints_one_line_per_pool_and_appends_the_summary(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), Replay(ENOUGH)))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps\n")
    code = main(["capacity", "--stack", "gpu-basics", "--subscription", SUBSCRIPTION, "--markdown", str(summary)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0].startswith("system (Standard_D4ds_v5, 2–3 nodes): fits")
    assert any(line.startswith("t4 (Standard_NC4as_T4_v3, 0–2 spot nodes): fits") for line in out)
    assert summary.read_text().startswith("earlier steps\n### Capacity for stack `gpu-basics` in `eastus`: fits")


def test_json_gives_the_verdict_and_one_object_per_pool_with_the_same_exit_code(monkeypatch, capsys):
    low = {**ENOUGH, "spot": "spot-low.json"}
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), Replay(low)))
    code = main(["capacity", "--stack", "gpu-basics", "--subscription", SUBSCRIPTION, "--json"])
    found = json.loads(capsys.readouterr().out)
    assert code == capacity.Verdict.MIN_ONLY and found["verdict"] == "fits at min only"
    assert (found["stack"], found["region"]) == ("gpu-basics", "eastus")
    t4 = next(p for p in found["pools"] if p["pool"] == "t4")
    assert t4["vmSize"] == "Standard_NC4as_T4_v3" and t4["verdict"] == "fits at min only" and t4["why"]


def test_the_pull_request_comment_is_written_only_when_a_pool_does_not_fit_in_full(monkeypatch, tmp_path):
    comment = tmp_path / "comment.md"
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), Replay(ENOUGH)))
    assert main(["capacity", "--stack", "gpu-basics", "--subscription", SUBSCRIPTION, "--comment", str(comment),
                 "--fail-on", "no-fit"]) == 0
    assert not comment.exists()
    low = {**ENOUGH, "spot": "spot-low.json"}
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), Replay(low)))
    assert main(["capacity", "--stack", "gpu-basics", "--subscription", SUBSCRIPTION, "--comment", str(comment),
                 "--fail-on", "no-fit"]) == 0
    assert comment.read_text().startswith("### Capacity for stack `gpu-basics` in `eastus`: fits at min only")


def _az(folder, script: str) -> str:
    """A stand-in Azure CLI in ``folder`` (a PATH of its own) that runs ``script`` (Python)."""
    import sys
    folder.mkdir(exist_ok=True)
    (folder / "az").write_text(f"#!{sys.executable}\nimport sys\n{script}\n")
    (folder / "az").chmod(0o755)
    return str(folder)


@pytest.fixture
def no_environment_subscription(monkeypatch):
    for name in ("AZURE_SUBSCRIPTION_ID", "ARM_SUBSCRIPTION_ID"):
        monkeypatch.delenv(name, raising=False)


def test_without_az_or_a_subscription_the_command_says_where_one_comes_from(no_environment_subscription, monkeypatch,
                                                                             tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no az
    assert main(["capacity", "--stack", "gpu-basics"]) == 2
    assert "--subscription" in capsys.readouterr().err


def test_without_a_subscription_it_asks_the_one_az_account_show_names(no_environment_subscription, monkeypatch,
                                                                      tmp_path, capsys):
    """The README's command runs as written after `az account set` (newcomer #4)."""
    monkeypatch.setenv("PATH", _az(tmp_path / "bin", f"print({SUBSCRIPTION!r})"))
    asked = []
    monkeypatch.setattr(capacity, "connect",
                        lambda subscription: asked.append(subscription) or Azure(subscription, Token(), Replay(ENOUGH)))
    assert main(["capacity", "--stack", "gpu-basics"]) == 0
    assert asked == [SUBSCRIPTION]


def test_not_signed_in_is_the_first_line_alone(no_environment_subscription, monkeypatch, tmp_path, capsys):
    """Newcomer #5: the one useful line first, exit 3 (not checked)."""
    monkeypatch.setenv("PATH", _az(tmp_path / "bin", "sys.exit(\"ERROR: Please run 'az login' to setup account.\")"))
    assert main(["capacity", "--stack", "gpu-basics"]) == 3
    assert capsys.readouterr().err.splitlines()[0] == "not signed in to Azure: run az login"


def test_a_credential_chain_that_finds_nothing_is_one_line_first_without_its_diagnostics(monkeypatch, tmp_path,
                                                                                          capsys):
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import CredentialUnavailableError

    class NoCredential:
        def get_token(self, *scopes, **kwargs):
            raise CredentialUnavailableError("DefaultAzureCredential failed to retrieve a token from the included "
                                             "credentials.\nAttempted credentials:\n\tEnvironmentCredential: ...")

        get_token_info = get_token

    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, NoCredential()))
    summary = tmp_path / "summary.md"
    code = main(["capacity", "--stack", "gpu-basics", "--subscription", SUBSCRIPTION, "--markdown", str(summary)])
    err = capsys.readouterr().err
    assert code == 3 and err.splitlines()[0] == "not signed in to Azure: run az login"
    assert len(err.splitlines()) == 2 and "DefaultAzureCredential" not in err
    assert "not signed in to Azure" in summary.read_text()
    assert issubclass(CredentialUnavailableError, ClientAuthenticationError)


def test_a_nap_pool_falls_back_as_nap_does_and_says_from_what():
    """node-auto-provisioning-node-pools: with both capacity types allowed NAP launches spot first and on-demand
    when spot cannot be had; the verdict is the first size and type that fits best."""
    nap = {"name": "t4", "provisioning": "nap", "vmSize": "Standard_NC4as_T4_v3", "minCount": 0, "maxCount": 3}
    cfg = load({"cluster": {"systemPool": {"minCount": 2, "maxCount": 2}}, "gpuPools": [nap]})
    needs = capacity.pool_needs(cfg)
    assert next(n for n in needs if n.pool == "t4").alternatives == (("Standard_NC4as_T4_v3", False),)
    replay = Replay({**ENOUGH, "spot": "spot-low.json"})
    t4 = pool(capacity.check(needs, capacity.read(Azure(SUBSCRIPTION, Token(), replay), cfg, needs)), "t4")
    assert t4.verdict == Verdict.FITS and not t4.need.spot
    assert "node auto-provisioning falls back to this: Standard_NC4as_T4_v3 spot fits at min only" in t4.line()


def test_an_infiniband_pool_without_aks_infiniband_support_does_not_fit_and_says_how_to_register():
    """Round-4 Azure audit #4: AKS use-amd-gpus ("Register the AKSInfinibandSupport feature": RDMA sizes "need to
    ensure that the machines in the nodepool land on the same physical Infiniband network")."""
    cfg = load({"gpuPools": [H100], "addons": {"networkOperator": True}})
    needs = capacity.pool_needs(cfg)
    assert [n.pool for n in needs if n.rdma] == ["h100"]
    lines = {}
    for answer in ("feature-ib-not-registered.json", "feature-ib-registered.json"):
        replay = Replay({**ENOUGH, "features": answer})
        h100 = pool(capacity.check(needs, capacity.read(Azure(SUBSCRIPTION, Token(), replay), cfg, needs)), "h100")
        assert any("Microsoft.Features/providers/Microsoft.ContainerService/features/AKSInfinibandSupport" in url
                   for _, url, _ in replay.seen)
        lines[answer] = (h100.verdict, h100.line())
    verdict, line = lines["feature-ib-not-registered.json"]
    assert verdict == Verdict.NO_FIT
    assert "the subscription's AKSInfinibandSupport feature is NotRegistered" in line
    assert "Fix: az feature register --namespace Microsoft.ContainerService --name AKSInfinibandSupport" in line
    assert lines["feature-ib-registered.json"][0] == Verdict.FITS, lines["feature-ib-registered.json"][1]


def test_a_stack_without_infiniband_pools_never_asks_for_the_feature():
    checks, replay = run([T4_SPOT])
    assert not any("Microsoft.Features" in url for _, url, _ in replay.seen)


ACR_TASKS = {"scenario": "function-gpu", "cluster": {"openApiServer": True}, "build": {"mode": "acr"}}


@pytest.mark.parametrize("offer, says", [("subscription-free-trial.json", True),
                                         ("subscription-pay-as-you-go.json", False)])
def test_a_stack_that_builds_with_acr_tasks_on_a_free_trial_is_told_its_build_fails_and_what_to_do(
        monkeypatch, capsys, tmp_path, offer, says):
    """Round-4 Azure audit #6: ACR Task runs "are temporarily paused from Azure free credits"
    (learn.microsoft.com/azure/container-registry/container-registry-tasks-overview); the Free Trial's quotaId is
    FreeTrial_2014-09-01 (learn.microsoft.com/azure/cost-management-billing/costs/understand-cost-mgt-data)."""
    replay = Replay({**ENOUGH, "subscription": offer})
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), replay))
    monkeypatch.setattr(capacity, "stack_config", lambda stack: load(ACR_TASKS))
    summary = tmp_path / "summary.md"
    code = main(["capacity", "--stack", "function-gpu", "--subscription", SUBSCRIPTION, "--markdown", str(summary)])
    out = capsys.readouterr().out.splitlines()
    images = [line for line in out if line.startswith("images: ")]
    assert code == Verdict.FITS  # the pools' verdict: the build is another matter, said on its own line
    if not says:
        assert images == [] and "images: " not in summary.read_text()
        return
    assert images == [
        "images: build.mode acr runs ACR Tasks, paused on Azure free credits, and this subscription is a Free Trial "
        "(FreeTrial_2014-09-01): pulumi up fails building the images (TasksOperationsNotAllowed). Fix: build.mode "
        "local, the default (Docker where pulumi up runs), or upgrade the subscription to pay-as-you-go"]
    assert images[0] in summary.read_text()
    assert any(url.endswith(f"/subscriptions/{SUBSCRIPTION}?api-version=2022-12-01") for _, url, _ in replay.seen)


def test_a_stack_that_builds_with_docker_never_asks_for_the_subscriptions_offer(monkeypatch, capsys):
    replay = Replay({**ENOUGH, "subscription": "subscription-free-trial.json"})
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), replay))
    assert main(["capacity", "--stack", "function-gpu", "--subscription", SUBSCRIPTION, "--json"]) == Verdict.FITS
    assert "images" not in json.loads(capsys.readouterr().out)
    assert not any(url.split("?")[0].endswith(f"/subscriptions/{SUBSCRIPTION}") for _, url, _ in replay.seen)


def test_an_upgrade_surge_node_draws_quota_so_a_regular_pool_sized_to_its_quota_fits_at_min_only():
    """Round-4 Azure audit #15: AKS upgrade-aks-node-pools-rolling ("Node surges require subscription quota for the
    requested max surge count for each upgrade operation"; the program's maxSurge is 1, components/azure/
    node_pools.py UPGRADE_SURGE, AKS's default too) and spot-node-pool ("There are no surge nodes available for
    Spot node pool upgrades")."""
    # 288 H100 vCPUs: two nodes and the surge node of their upgrade fit, three nodes fit only without it.
    assert pool(run([H100])[0], "h100").verdict == Verdict.FITS
    h100 = pool(run([{**H100, "maxCount": 3}])[0], "h100")
    assert h100.verdict == Verdict.MIN_ONLY
    assert ("the stack needs 0 at min and 288 at max, 384 while an upgrade adds a surge node to each regular pool: "
            "the maximum fits, an upgrade's surge node does not" in h100.line())  # issue 33c audit #15: which it is
    assert h100.fixes[0].startswith("request standardNDSH100v5Family vCPUs in eastus raised to 384 ")
    # A spot pool gets no surge node: 25 T4 spot nodes take the 100 spot vCPUs exactly.
    assert pool(run([{**T4_SPOT, "maxCount": 25}])[0], "t4").verdict == Verdict.FITS
    assert [n.surge for n in capacity.pool_needs(load({"gpuPools": [H100, T4_SPOT]}))] == [1, 1, 0]


NAP_T4 = {"name": "t4", "provisioning": "nap", "vmSize": "Standard_NC4as_T4_v3", "minCount": 0, "maxCount": 25}
NAP_STACK = {"cluster": {"systemPool": {"minCount": 2, "maxCount": 2}}}
NAP_RUNNING = {"pools": "agentpools-nap.json", "cluster": "cluster-nap.json", "usages": "usages-nap-running.json"}


def test_the_vms_nap_made_for_the_stacks_pools_are_not_counted_twice():
    """Round-4 Azure audit #16: NAP nodes are no agent pools but VMs in the node resource group tagged
    karpenter.sh_nodepool with their NodePool's name (karpenter-provider-azure v1.12.2 pkg/providers/launchtemplate/
    tags.go NodePoolTagKey, pkg/providers/instance/vminstance.go); the usage counts them once."""
    # 25 spot T4 nodes need the 100 spot vCPUs, 12 of which NAP's two t4 nodes hold.
    checks, replay = run([NAP_T4], NAP_STACK, **NAP_RUNNING, vms="vms-nap.json")
    t4 = pool(checks, "t4")
    assert t4.verdict == Verdict.FITS and "2 NAP node(s) running, not counted twice" in t4.line()
    assert any(url.split("?")[0].endswith("/resourceGroups/rg-test-nodes/providers/Microsoft.Compute/virtualMachines")
               for _, url, _ in replay.seen)
    # Read as none, they would be counted in the usage and again in the demand.
    checks, _ = run([NAP_T4], NAP_STACK, **NAP_RUNNING, vms="vms-none.json")
    assert pool(checks, "t4").verdict == Verdict.MIN_ONLY


def test_nap_machines_in_an_aks_machines_pool_are_not_counted_twice():
    """Issue 33c audit #7: in karpenter-provider-azure's AKS Machine API modes NAP's machines sit in an agent pool of
    mode Machines (pkg/operator/options/options.go AKS_MACHINES_POOL_NAME; pkg/test/aksagentpools.go builds it with
    Count and VMSize) and their VMs keep the karpenter.sh_nodepool tag (pkg/providers/instance/
    aksmachineinstanceutils.go): the pool's count was given back besides the tagged VMs."""
    cfg = load({**NAP_STACK, "gpuPools": [NAP_T4]})
    needs = capacity.pool_needs(cfg)
    held = []
    for pools in ("agentpools-nap.json", "agentpools-nap-machines.json"):
        replay = Replay({**ENOUGH, **NAP_RUNNING, "pools": pools, "vms": "vms-nap.json"})
        readings = capacity.read(Azure(SUBSCRIPTION, Token(), replay), cfg, needs)
        held.append(capacity._own_vcpus(readings, ["system"], ["t4"]))
    assert "aksmanagedap" in readings.deployed and held[0] == held[1]


def test_switching_nap_on_a_deployed_stack_is_refused_with_the_documented_way():
    """Round-4 Azure audit #10: AKS node-auto-provisioning, Limitations ("You can't enable NAP on clusters enabled
    with the cluster autoscaler"); use-node-auto-provisioning, Enable NAP on an existing cluster
    (az aks update --node-provisioning-mode Auto); cluster-autoscaler (--disable-cluster-autoscaler)."""
    switching = {"pools": "agentpools-running.json", "cluster": "cluster-autoscaler.json", "vms": "vms-none.json"}
    system = pool(run([NAP_T4], NAP_STACK, **switching)[0], "system")
    assert system.verdict == Verdict.NO_FIT
    assert system.line().startswith(
        "system (Standard_D4ds_v5, 2–2 nodes): does not fit — switching NAP on a deployed stack is refused by AKS: "
        "the cluster autoscaler is on in its pool(s) h100, system")
    assert system.fixes == [
        "turn it off in each first (az aks nodepool update -g rg-test --cluster-name aks-test -n POOL "
        "--disable-cluster-autoscaler), then az aks update -g rg-test -n aks-test --node-provisioning-mode Auto, then "
        "pulumi up; or pulumi destroy, then deploy the stack again"]
    # Already on NAP, or not deployed yet: nothing to switch.
    assert pool(run([NAP_T4], NAP_STACK, **NAP_RUNNING, vms="vms-none.json")[0], "system").verdict == Verdict.FITS
    checks, replay = run([NAP_T4], NAP_STACK)
    assert pool(checks, "system").verdict == Verdict.FITS
    assert not any("/managedClusters/aks-test?" in url for _, url, _ in replay.seen)


def test_switching_nap_off_a_deployed_stack_is_refused_until_no_nap_node_is_left():
    """Round-4 Azure audit #10: AKS use-node-auto-provisioning, Disable ("You can only disable NAP on a cluster if
    ... There are no existing NAP nodes ... All existing Karpenter NodePools have their spec.limits.cpu field set to
    0"), which the program's update does not do."""
    system = pool(run([T4_SPOT], **NAP_RUNNING, vms="vms-nap.json")[0], "system")
    assert system.verdict == Verdict.NO_FIT
    assert ("switching NAP off a deployed stack is refused by AKS until no NAP node is left (3 now) and every NodePool "
            "has limits.cpu 0" in system.line())
    assert "az aks update -g rg-test -n aks-test --node-provisioning-mode Manual, then pulumi up" in system.fixes[0]
    assert pool(run([T4_SPOT], pools="agentpools-running.json", cluster="cluster-autoscaler.json")[0],
                "system").verdict == Verdict.FITS


def test_the_command_refuses_a_nap_switch_with_the_system_pool_first_and_the_no_fit_exit_code(monkeypatch, capsys):
    """The first line is still the system pool's and the exit code the worst verdict's, so the deploy job's
    `--fail-on no-fit` stops before `pulumi up` sends the update AKS refuses (round-4 Azure audit #10)."""
    answers = {**ENOUGH, "pools": "agentpools-running.json", "cluster": "cluster-autoscaler.json",
               "vms": "vms-none.json"}
    monkeypatch.setattr(capacity, "connect", lambda subscription: Azure(subscription, Token(), Replay(answers)))
    code = main(["capacity", "--stack", "gpu-nap", "--subscription", SUBSCRIPTION])
    out = capsys.readouterr().out.splitlines()
    assert code == Verdict.NO_FIT
    assert out[0].startswith("system (") and "switching NAP on a deployed stack is refused by AKS" in out[0]


CRG = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-reserved/providers/"
       "Microsoft.Compute/capacityReservationGroups/crg-a100")
A100_RESERVED = {"name": "a100", "vmSize": "Standard_NC24ads_A100_v4", "priority": "regular", "minCount": 0,
                 "maxCount": 2, "zones": ["1"], "capacityReservationGroup": CRG}
RESERVED = {"crg": "crg-a100.json", "reservations": "reservations-a100.json", "usages": "usages-no-gpu-quota.json"}


def test_a_pool_takes_no_quota_for_what_its_group_reserves_and_quota_for_the_nodes_beyond():
    """Round-4 Azure audit #8 (b) and #15: capacity-reservation-overview ("the quota checks are omitted for VM
    deployment up to the reserved quantity. Allocating VMs beyond the reserved quantity is called overallocating
    ... subject to quota checks"); use-capacity-reservation-groups ("When maxSurge > 0, reserve extra capacity for
    the max surge value")."""
    # The group reserves 4 A100 in zone 1, one taken by another VM: 3 for the pool's 2 nodes and a surge node.
    checks, replay = run([A100_RESERVED], **RESERVED)
    a100 = pool(checks, "a100")
    assert a100.verdict == Verdict.FITS, a100.line()
    assert ("takes reserved capacity (crg-a100: 4 Standard_NC24ads_A100_v4 reserved in zone(s) 1, 3 free for it)"
            in a100.line())
    assert any("/capacityReservationGroups/crg-a100?" in url and "$expand=instanceView" in unquote(url)
               for _, url, _ in replay.seen)
    # One node more: its upgrade's surge node is beyond the reservation, on a family quota of none.
    a100 = pool(run([{**A100_RESERVED, "maxCount": 3}], **RESERVED)[0], "a100")
    assert a100.verdict == Verdict.MIN_ONLY
    assert ("crg-a100: 4 Standard_NC24ads_A100_v4 reserved in zone(s) 1, 3 free for it, the pool needs 4 at max with "
            "an upgrade's surge node: the other 1 come from ordinary quota without the capacity SLA "
            "(capacity-reservation-overallocate), or reserve them: az capacity reservation update -c crg-a100 "
            "-g rg-reserved -n a100-z1 --capacity 5" in a100.line())
    assert "StandardNCADSA100v4Family vCPUs in eastus: 0 of 0 used, the stack needs 0 at min and 0 at max, 24 while" \
        in a100.line()


def test_a_block_group_gives_no_vm_beyond_its_reservation():
    """Compute API 2026-04-01 (azure-mgmt-compute 39.0.0) ReservationType: "'Block' for block capacity
    reservations that enable a VM to consume capacity only from this capacity block"; 'Targeted' ones "fall back to
    the publicly available capacity if the reservation is full"."""
    block = {**RESERVED, "crg": "crg-a100-block.json"}
    assert pool(run([A100_RESERVED], **block)[0], "a100").verdict == Verdict.FITS
    a100 = pool(run([{**A100_RESERVED, "maxCount": 3}], **block)[0], "a100")
    assert a100.verdict == Verdict.MIN_ONLY and "a Block group gives no VM beyond its reservation" in a100.line()


def test_a_short_block_group_is_told_to_add_a_block_of_an_allowed_size_not_to_update_one():
    """Issue 33c audit #6: `az capacity reservation update --capacity 5` on a Block reservation is refused twice over:
    azure-mgmt-compute 39.0.0 CapacityReservationUpdate ("sku.capacity cannot be updated for Block Capacity
    Reservation") and CapacityReservation.sku ("For Block capacity reservations, sku.capacity can only accept values
    1, 2, 4, 8, 16, 32, 64")."""
    block = {**RESERVED, "crg": "crg-a100-block.json"}
    a100 = pool(run([{**A100_RESERVED, "maxCount": 5}], **block)[0], "a100")  # 6 with its surge node, 3 free
    assert a100.verdict == Verdict.MIN_ONLY and not any("reservation update" in f for f in a100.fixes)
    assert a100.fixes == ["a new Block reservation of 4 Standard_NC24ads_A100_v4 in crg-a100 for the days the stack "
                          "runs (a Block reservation's capacity cannot be updated, and one holds 1, 2, 4, 8, 16, 32 or "
                          "64 VMs; aka.ms/blockcapacityreservation)"]
    assert capacity._block_fix("crg", "S", 65).startswith("a new Block reservations of S adding up to 65 or more")


@pytest.mark.parametrize("raw, now, says", [
    ({"ttlHours": 24}, datetime(2026, 6, 5, tzinfo=UTC), None),
    ({"ttlHours": 168}, datetime(2026, 6, 5, tzinfo=UTC),
     "Block reservation a100-z1 ends 2026-06-10, before this demo stack expires (2026-06-12)"),
    ({"lifetime": "long-lived"}, datetime(2026, 6, 5, tzinfo=UTC),
     "Block reservation a100-z1 ends 2026-06-10, and this long-lived stack outlives it"),
    ({}, datetime(2026, 5, 20, tzinfo=UTC), "Block reservation a100-z1 starts 2026-06-01: until then it holds no VM"),
    ({}, datetime(2026, 6, 20, tzinfo=UTC), "Block reservation a100-z1 ended 2026-06-10"),
])
def test_a_block_reservations_schedule_is_said_against_the_stacks_life(raw, now, says):
    """Issue 33c audit #6: a Block reservation holds VMs only between its scheduleProfile's start and end, immutable
    (azure-mgmt-compute 39.0.0 ScheduleProfile); the preflight read neither."""
    block = {**RESERVED, "crg": "crg-a100-block.json", "reservations": "reservations-a100-block.json"}
    line = pool(run([A100_RESERVED], raw, now=now, **block)[0], "a100").line()
    assert "a Block group, which no AKS document names for node pools" in line  # unverified on AKS, said so
    if says is None:
        assert "Block reservation a100-z1" not in line
    else:
        assert says in line


def test_an_open_groups_use_is_read_from_its_count_by_subscription():
    """Issue 33c audit #5: an Open reservation reports its use in usedReservedCountBySubscription, "populated only
    for open capacity reservations", not in virtualMachinesAllocated (azure-mgmt-compute 39.0.0
    CapacityReservationUtilization): read as none allocated, its 4 looked free when 3 were in use."""
    a100 = pool(run([A100_RESERVED], **{**RESERVED, "crg": "crg-a100-open.json"})[0], "a100")
    assert "4 Standard_NC24ads_A100_v4 reserved in zone(s) 1, 1 free for it, the pool needs 3" in a100.line()
    assert "an Open group" in a100.line() and "unverified" in a100.line()


def test_a_group_that_could_not_be_read_takes_no_quota_off():
    """Issue 33c audit #4: a group refused to the identity (403) was taken to hold the pool's every node, so the
    quota check skipped the pool and it "fit" on a family quota of none."""
    a100 = pool(run([{**A100_RESERVED, "minCount": 1}], **{**RESERVED, "crg": "crg-forbidden.json"})[0], "a100")
    assert a100.verdict == Verdict.NO_FIT and a100.reserved is None
    assert "StandardNCADSA100v4Family vCPUs in eastus: 0 of 0 used, the stack needs 24 at min and 48 at max" \
        in a100.line()
    assert "capacity reservation group crg-a100 was not read (the identity may not read it (Reader)): whether it " \
           "holds the pool's VMs was not checked, and every node is counted against quota" in a100.line()


OTHER = "22222222-2222-2222-2222-222222222222"
SHARED_CRG = CRG.replace(SUBSCRIPTION, OTHER)
SHARED = {"crg": "crg-shared.json", "reservations": "reservations-shared.json", "zonepeers": "zone-peers.json"}


def test_a_group_shared_from_another_subscription_takes_no_quota_off_this_one():
    """Issue 33c audit #1: capacity-reservation-group-share, "Using a shared Capacity Reservation Group": "The
    Consumer subscription making a deployment in the shared reservation group will need to hold its own quota"."""
    shared = {**A100_RESERVED, "minCount": 1, "zones": ["3"], "capacityReservationGroup": SHARED_CRG}
    none = pool(run([shared], **SHARED, usages="usages-no-gpu-quota.json")[0], "a100")
    assert none.verdict == Verdict.NO_FIT and none.reserved is None
    assert "crg-a100 is shared from subscription 22222222-2222-2222-2222-222222222222: every node draws this " \
           "subscription's quota too" in none.line()
    assert none.fixes[0].startswith("request StandardNCADSA100v4Family vCPUs in eastus raised to 72 ")
    # The same group in the deploying subscription takes its reserved VMs off the quota.
    same = {**shared, "zones": ["1"], "capacityReservationGroup": CRG}
    assert pool(run([same], **RESERVED)[0], "a100").verdict == Verdict.FITS
    enough = pool(run([shared], **SHARED)[0], "a100")
    assert enough.verdict == Verdict.FITS, enough.line()


def test_a_shared_groups_zones_are_compared_in_its_subscriptions_numbering():
    """Issue 33c audit #2: capacity-reservation-group-share, "Availability zone mapping with shared zonal Capacity
    Reservation Groups": "all subscriptions have the logical view of availability zones from the CRG subscription ...
    When deploying a VM or scale set to a shared CRG, you must remap the zones"; the map is Subscriptions - Check
    Zone Peers (here: this subscription's zone 1 is the group's 3, and 3 is its 1)."""
    shared = {**A100_RESERVED, "capacityReservationGroup": SHARED_CRG}
    three = pool(run([{**shared, "zones": ["3"]}], **SHARED)[0], "a100")
    checks, replay = run([{**shared, "zones": ["3"]}], **SHARED)
    asked = next(body for method, url, body in replay.seen if "checkZonePeers" in url)
    assert asked == {"location": "eastus", "subscriptionIds": [f"subscriptions/{OTHER}"]}
    assert three.verdict == Verdict.FITS
    assert f"4 Standard_NC24ads_A100_v4 reserved in zone(s) 3 (zone(s) 1 in subscription {OTHER}), 3 free" \
        in three.line()
    one = pool(run([shared], **SHARED)[0], "a100")  # zone 1 here is the group's zone 3, where it reserves nothing
    assert one.verdict == Verdict.NO_FIT
    assert (f"holds no reservation of Standard_NC24ads_A100_v4 in zone(s) 1 (it holds Standard_NC24ads_A100_v4 in "
            f"zone 1) (its zones are subscription {OTHER}'s: the pool's map to 3)") in one.line()
    assert one.fixes == [f"az capacity reservation create -c crg-a100 -g rg-reserved -n <name> -l eastus --sku "
                         f"Standard_NC24ads_A100_v4 --capacity 3 --subscription {OTHER} --zone 3"]


def test_a_shared_groups_zones_that_could_not_be_mapped_are_said_not_checked():
    """Issue 33c audit #2: Check Zone Peers needs Microsoft.Resources/checkZonePeers/action, which Reader (the preview
    app) does not grant, and the AvailabilityZonePeering feature (MicrosoftDocs/reliability-docs
    availability-zones-overview.md): without it the raw zone numbers say nothing, so nothing is judged by them."""
    shared = {**A100_RESERVED, "capacityReservationGroup": SHARED_CRG}
    a100 = pool(run([shared], **{**SHARED, "zonepeers": "zone-peers-forbidden.json"})[0], "a100")
    assert a100.verdict == Verdict.FITS and a100.reserved is None  # on the quota alone, which holds every node
    assert (f"Check Zone Peers did not map subscription {OTHER}'s (the identity may not ask: Reader does not grant "
            "Microsoft.Resources/checkZonePeers/action): whether crg-a100 holds Standard_NC24ads_A100_v4 in the pool's "
            "zone(s) 1 was not checked") in a100.line()


def test_a_group_with_no_reservation_does_not_fit_though_aks_would_add_the_pool():
    """Round-4 Azure audit #8 (b): use-capacity-reservation-groups, Prerequisites ("You need an existing capacity
    reservation group with at least one capacity reservation. If not, the node pool is added to the cluster with a
    warning and no capacity reservation group gets associated")."""
    a100 = pool(run([A100_RESERVED], **{**RESERVED, "crg": "crg-empty.json",
                                        "reservations": "reservations-none.json"})[0], "a100")
    assert a100.verdict == Verdict.NO_FIT
    assert ("capacity reservation group crg-a100 holds no reservation, so AKS would add the pool without it "
            "(a warning, no group associated) and its VMs would draw ordinary quota" in a100.line())
    assert a100.fixes[0] == ("az capacity reservation create -c crg-a100 -g rg-reserved -n <name> -l eastus "
                             "--sku Standard_NC24ads_A100_v4 --capacity 3 --zone 1")


def test_a_group_without_the_pools_size_in_its_zones_or_that_does_not_exist_does_not_fit():
    """capacity-reservation-overview ("If the group doesn't have a reservation matching the size and location, Azure
    returns an error message"); REST CapacityReservation zones ("If not provided, the reservation supports only
    non-zonal deployments. If provided, enforces VM/VMSS using this capacity reservation to be in same zone") and
    CapacityReservationGroup zones ("If provided, enforces each capacity reservation in the group to be in one of
    the zones")."""
    zone3 = pool(run([{**A100_RESERVED, "zones": ["3"]}], **RESERVED)[0], "a100")
    assert zone3.verdict == Verdict.NO_FIT
    assert ("capacity reservation group crg-a100 holds no reservation of Standard_NC24ads_A100_v4 in zone(s) 3 (it "
            "holds Standard_NC24ads_A100_v4 in zone 1)" in zone3.line())
    assert zone3.fixes[0].endswith("--capacity 3 --zone 3")
    outside = pool(run([{**A100_RESERVED, "zones": ["1", "2"]}], **RESERVED)[0], "a100")
    assert outside.verdict == Verdict.NO_FIT and "zones among the group's (1, 3) for the pool" in outside.fixes
    regional = pool(run([{**A100_RESERVED, "zones": []}], **RESERVED)[0], "a100")
    assert regional.verdict == Verdict.NO_FIT
    assert "capacity reservation group crg-a100 has zones (1, 3) and the pool none" in regional.line()
    assert regional.fixes == ["zones: [1] for the pool, or a group without zones"]
    missing = pool(run([A100_RESERVED], **{**RESERVED, "crg": "crg-missing.json"})[0], "a100")
    assert missing.verdict == Verdict.NO_FIT and "capacity reservation group crg-a100 does not exist" in missing.line()


def test_a_reserved_pools_running_nodes_are_its_own_share_of_the_reservation():
    """capacity-reservation-overview: ``virtualMachinesAllocated`` lists the VMs allocated against a reservation, the
    pool's own running nodes among them once it is associated (its agent pool's ``capacityReservationGroupID``)."""
    # The one allocated VM is the pool's own running node: all 4 reserved VMs are the pool's.
    deployed = {**RESERVED, "pools": "agentpools-reserved.json", "cluster": "cluster-reserved.json",
                "grants": "grants-recent.json"}
    a100 = pool(run([{**A100_RESERVED, "maxCount": 3}], **deployed)[0], "a100")
    assert a100.verdict == Verdict.FITS and "4 free for it" in a100.line()


def test_the_reservation_grant_is_said_until_it_can_have_reached_aks():
    """Round-4 Azure audit #8 (a): use-capacity-reservation-groups ("Assign the Contributor role to the user-assigned
    identity ... It can take up to 60 minutes for the role assignment to propagate")."""
    first = pool(run([A100_RESERVED], **RESERVED)[0], "a100")
    assert first.verdict == Verdict.FITS
    assert ("the cluster identity's Contributor on resource group rg-reserved is granted by this deploy, just before "
            "the cluster, and can take up to 60 minutes to reach AKS (use-capacity-reservation-groups): if creating "
            "the pool then fails with an authorization error, run pulumi up again once the hour is up" in first.line())
    deployed = {**RESERVED, "pools": "agentpools-reserved.json", "cluster": "cluster-reserved.json",
                "grants": "grants-recent.json"}
    # Its Contributor on rg-reserved comes on the answer's second page (nextLink).
    checks, replay = run([A100_RESERVED], now=datetime(2026, 6, 1, 10, 20, tzinfo=UTC), **deployed)
    recent = pool(checks, "a100")
    assert recent.verdict == Verdict.FITS
    assert ("the cluster identity's Contributor on resource group rg-reserved was granted at 2026-06-01 10:00 UTC and "
            "can take until 11:00 UTC to reach AKS (up to 60 minutes, use-capacity-reservation-groups): deploy after "
            "then" in recent.line())
    grants = next(url for _, url, _ in replay.seen if "roleAssignments" in url)
    assert "/resourceGroups/rg-reserved/providers/Microsoft.Authorization/roleAssignments" in grants
    assert "$filter=principalId eq '11111111-1111-1111-1111-111111111111'" in unquote(grants)
    later = pool(run([A100_RESERVED], now=datetime(2026, 6, 1, 11, 30, tzinfo=UTC), **deployed)[0], "a100")
    assert "Contributor" not in later.line()
