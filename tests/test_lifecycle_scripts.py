"""What the workflows run: the render diff, the replacement guard, expiry, leftovers (``python -m offline``), and
the state-backend script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from offline import preview_guard, render_diff
from offline.stack_files import REPO_ROOT

SCRIPTS = REPO_ROOT / "scripts"


def run(*args, **kwargs):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=REPO_ROOT, **kwargs)


def offline(*args, **kwargs):
    return run("-m", "offline", *args, **kwargs)


URN = "urn:pulumi:dev::aksgpu::{parent}${typ}::{name}"


def step(op, typ, name, parent="aksgpu:aks:Cluster", tags=None):
    state = {"inputs": {"tags": tags}} if tags is not None else None
    return {"op": op, "urn": URN.format(parent=parent, typ=typ, name=name), "oldState": state}


CLUSTER = "azure-native:containerservice:ManagedCluster"
ACCOUNT = "azure-native:storage:StorageAccount"


@pytest.mark.parametrize("steps, blocked", [
    ([step("replace", CLUSTER, "aks-aks")], ["replace azure-native:containerservice:ManagedCluster aks-aks"]),
    ([step("create-replacement", ACCOUNT, "storage-ckpt-account")],
     ["create-replacement azure-native:storage:StorageAccount storage-ckpt-account"]),
    ([step("delete", ACCOUNT, "storage-output-account")],
     ["delete azure-native:storage:StorageAccount storage-output-account"]),
    ([step("update", CLUSTER, "aks-aks"), step("same", ACCOUNT, "storage-ckpt-account")], []),
    ([step("replace", ACCOUNT, "build-contexts-account", tags={"holds-data": "false"})], []),
    ([step("replace", ACCOUNT, "build-contexts-account", tags={"owner": "x"})],
     ["replace azure-native:storage:StorageAccount build-contexts-account"]),
    ([step("replace", "azure-native:containerservice:AgentPool", "gpu-t4-pool")], []),
], ids=["cluster-replace", "account-replacement", "account-delete", "updates", "tagged-no-data", "untagged", "pool"])
def test_the_guard_names_destructive_steps_on_the_cluster_and_data_storage_but_not_tagged_scratch(steps, blocked):
    assert preview_guard.guarded_steps({"steps": steps}) == blocked


def test_the_guard_fails_unless_allowed(tmp_path):
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [step("replace", CLUSTER, "aks-aks")]}))
    refused = offline("preview-guard", preview)
    assert refused.returncode == 1 and "allow-replace" in refused.stderr
    assert offline("preview-guard", preview, "--allow").returncode == 0
    preview.write_text(json.dumps({"steps": []}))
    assert offline("preview-guard", preview).returncode == 0


def tree(root, stack, summary, manifest):
    (root / stack / "manifests").mkdir(parents=True)
    (root / stack / "summary.md").write_text(summary)
    (root / stack / "manifests" / "job.yaml").write_text(manifest)


def test_render_diff_lists_changed_stacks_and_shows_their_diffs(tmp_path):
    base, head = tmp_path / "base", tmp_path / "head"
    tree(base, "a", "pools: 1\n", "replicas: 1\n")
    tree(head, "a", "pools: 2\n", "replicas: 1\n")
    tree(base, "b", "same\n", "same\n")
    tree(head, "b", "same\n", "same\n")
    tree(head, "c", "new\n", "new\n")
    assert render_diff.changed_stacks(base, head) == ["a", "c"]
    text = render_diff.markdown(base, head)
    assert "-pools: 1" in text and "+pools: 2" in text and "`b`" not in text
    assert json.loads(offline("render-diff", base, head, "--stacks").stdout) == ["a", "c"]
    assert "No stack's render changed" in render_diff.markdown(base, base)


def test_expired_stacks_reads_az_group_list_from_stdin():
    groups = [{"name": "rg-x", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "x", "lifetime": "demo",
                                        "expires-at": "2020-01-01T00:00:00Z"}},
              {"name": "rg-dev", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "dev", "lifetime": "long-lived"}}]
    result = offline("expired-stacks", input=json.dumps(groups))
    assert result.returncode == 0 and json.loads(result.stdout) == ["x"]


@pytest.fixture
def fake_az(tmp_path):
    """An `az` on PATH that answers from a JSON file:
    {"groups": [names that exist], "ips": [ids], "resources": {group: [{"name", "type"}]}}."""
    state = tmp_path / "azure.json"
    az = tmp_path / "bin" / "az"
    az.parent.mkdir()
    az.write_text(f"""#!{sys.executable}
import json, sys
state = json.load(open({str(state)!r}))
args = sys.argv[1:]
if args[:2] == ["group", "exists"]:
    print(json.dumps(args[args.index("--name") + 1] in state["groups"]))
elif args[:3] == ["network", "public-ip", "list"]:
    print(json.dumps(state["ips"]))
elif args[:2] == ["resource", "list"]:
    print(json.dumps(state.get("resources", {{}}).get(args[args.index("--resource-group") + 1], [])))
else:
    sys.exit("unexpected az call: " + " ".join(args))
""")
    az.chmod(0o755)
    env = {**os.environ, "PATH": f"{az.parent}{os.pathsep}{os.environ['PATH']}"}
    return state, env


def test_leftover_check_passes_when_nothing_is_left(fake_az):
    state, env = fake_az
    state.write_text(json.dumps({"groups": [], "ips": []}))
    result = offline("leftovers", "--stack", "function-gpu", env=env)
    assert result.returncode == 0 and "nothing of stack function-gpu is left" in result.stdout


def test_leftover_check_fails_loudly_for_groups_and_public_ips(fake_az):
    state, env = fake_az
    state.write_text(json.dumps({"groups": ["rg-function-gpu-nodes"], "ips": ["/subscriptions/s/ip/kubernetes-a1"]}))
    result = offline("leftovers", "--stack", "function-gpu", env=env)
    assert result.returncode == 1
    assert "LEFT OVER after destroy of function-gpu: resource group rg-function-gpu-nodes" in result.stderr
    assert "public IP /subscriptions/s/ip/kubernetes-a1" in result.stderr


def test_protected_data_and_its_resource_group_are_kept_and_said_so(fake_az):
    from offline.stack_files import stack_config
    cfg = stack_config("av-resim")
    output = cfg.storage_account_name(next(a for a in cfg.storage.accounts if a.protect))
    account = {"name": output, "type": "Microsoft.Storage/storageAccounts"}
    state, env = fake_az
    state.write_text(json.dumps({"groups": ["rg-av-resim"], "ips": [], "resources": {"rg-av-resim": [account]}}))
    result = offline("leftovers", "--stack", "av-resim", env=env)
    assert result.returncode == 0, result.stderr
    assert f"kept after destroy of av-resim: storage account {output} in resource group rg-av-resim" in result.stdout
    assert "has protect: true" in result.stdout


def test_anything_beside_the_protected_data_is_a_leftover(fake_az):
    state, env = fake_az
    extra = {"name": "vnet-av-resim", "type": "Microsoft.Network/virtualNetworks"}
    state.write_text(json.dumps({"groups": ["rg-av-resim"], "ips": [], "resources": {"rg-av-resim": [extra]}}))
    result = offline("leftovers", "--stack", "av-resim", env=env)
    assert result.returncode == 1
    assert "LEFT OVER after destroy of av-resim: Microsoft.Network/virtualNetworks vnet-av-resim" in result.stderr


def test_an_unprotected_stacks_resource_group_is_a_leftover(fake_az):
    state, env = fake_az
    state.write_text(json.dumps({"groups": ["rg-function-gpu"], "ips": [], "resources": {}}))
    result = offline("leftovers", "--stack", "function-gpu", env=env)
    assert result.returncode == 1 and "resource group rg-function-gpu" in result.stderr


def test_workflow_matrix_runs_private_stacks_on_their_own_runner_and_never_on_a_hosted_one():
    result = offline("matrix", json.dumps(["av-resim", "dev"]))
    assert result.returncode == 0
    rows = {row["stack"]: row["runner"] for row in json.loads(result.stdout)["include"]}
    assert rows == {"av-resim": ["self-hosted", "aksgpu-av-resim"], "dev": "ubuntu-24.04"}


def test_a_private_stack_without_a_runner_is_left_out_with_a_warning(tmp_path, monkeypatch):
    from aksgpu.config.loader import load_config
    from offline import runners
    from scenarios import REGISTRY
    monkeypatch.setattr(runners, "stack_config", lambda stack: load_config(
        {"scenario": "gpu-basics", "cluster": {"private": True}}, "aksgpu", stack, REGISTRY))
    assert runners.matrix(["p"]) == {"include": []}


def test_state_backend_script_is_valid_bash_and_explains_its_arguments():
    script = SCRIPTS / "create-state-backend.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    usage = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    text = script.read_text()
    assert "--allow-shared-key-access false" in text and "--enable-purge-protection true" in text
