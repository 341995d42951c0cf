"""What the workflows run: the render diff, the replacement guard, expiry, leftovers (``python -m offline``), and
the state-backend script."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest
import yaml

from offline import render_diff
from offline.stack_files import REPO_ROOT
from ops import lifecycle, preview_guard
from program.config.expiry import Lifetime, expired_stacks
from tests.helpers import command

SCRIPTS = REPO_ROOT / "scripts"


def run(*args, **kwargs):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=REPO_ROOT, **kwargs)


def offline(*args, **kwargs):
    return command("offline", *args, **kwargs)


def ops(*args, **kwargs):
    return command("ops", *args, **kwargs)


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
    refused = ops("preview-guard", preview)
    assert refused.returncode == 1 and "allow-replace" in refused.stderr
    assert ops("preview-guard", preview, "--allow").returncode == 0
    preview.write_text(json.dumps({"steps": []}))
    assert ops("preview-guard", preview).returncode == 0


def test_the_guard_in_json_names_the_steps_and_pools_with_the_same_exit_code(tmp_path):
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [step("replace", CLUSTER, "aks-aks"),
                                             step("replace", "azure-native:containerservice:AgentPool", "gpu")]}))
    refused = ops("preview-guard", preview, "--json")
    assert refused.returncode == 1 and json.loads(refused.stdout) == {
        "destructive": [f"replace {CLUSTER} aks-aks"], "replacedPools": ["gpu"], "allowed": False, "blocked": True}
    allowed = ops("preview-guard", preview, "--json", "--allow")
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["blocked"] is False


def tree(root, stack, summary, manifest, resources="[]\n"):
    (root / stack / "manifests").mkdir(parents=True)
    (root / stack / "summary.md").write_text(summary)
    (root / stack / "manifests" / "job.yaml").write_text(manifest)
    (root / stack / "resources.json").write_text(resources)


def test_render_diff_lists_changed_stacks_and_shows_their_diffs(tmp_path):
    base, head = tmp_path / "base", tmp_path / "head"
    tree(base, "a", "pools: 1\n", "replicas: 1\n")
    tree(head, "a", "pools: 2\n", "replicas: 1\n")
    tree(base, "b", "same\n", "same\n")
    tree(head, "b", "same\n", "same\n")
    tree(head, "c", "new\n", "new\n")
    # the same document as PyYAML's own emitter and libyaml's fold it (a base rendered before the render moved to
    # libyaml's): not a change
    doc = {"script": "a line long enough to fold, \n  indented, with a trailing space \nand more words to fold"}
    folded = [yaml.dump(doc, Dumper=dumper, width=20) for dumper in (yaml.SafeDumper, yaml.CSafeDumper)]
    assert folded[0] != folded[1]
    tree(base, "d", "same\n", folded[0])
    tree(head, "d", "same\n", folded[1])
    tree(base, "e", "same\n", "replicas: 1\n")  # a manifest's data
    tree(head, "e", "same\n", "replicas: 2\n")
    tree(base, "f", "same\n", "same\n", '[{"enabled": true}]\n')  # a bool become a number: == would say equal
    tree(head, "f", "same\n", "same\n", '[{"enabled": 1}]\n')
    tree(base, "g", "gone\n", "gone\n")  # only in the base
    tree(base, "h", "same\n", "a: 1\n")  # a file that does not parse counts as changed, and breaks nothing
    tree(head, "h", "same\n", "a: [\n")
    assert render_diff.changed_stacks(base, head) == ["a", "c", "e", "f", "g", "h"]
    text = render_diff.markdown(base, head)
    assert "-pools: 1" in text and "+pools: 2" in text and "+replicas: 2" in text
    assert "`b`" not in text and "`d`" not in text
    shown_for_a = text.split("<code>a</code>")[1].split("</details>")[0]
    assert "summary.md" in shown_for_a and "job.yaml" not in shown_for_a  # only the files whose data changed
    assert json.loads(offline("render-diff", base, head, "--stacks").stdout) == ["a", "c", "e", "f", "g", "h"]
    assert "No stack's render changed" in render_diff.markdown(base, base)


def test_expired_stacks_reads_az_group_list_from_stdin():
    groups = [{"name": "rg-x", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "x", "lifetime": "demo",
                                        "expires-at": "2020-01-01T00:00:00Z"}},
              {"name": "rg-dev", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "dev", "lifetime": "long-lived"}}]
    result = ops("expired-stacks", input=json.dumps(groups))
    assert result.returncode == 0 and json.loads(result.stdout) == ["x"]


SUBSCRIPTION = "22222222-3333-4444-5555-666666666666"


@pytest.fixture
def fake_az(tmp_path):
    """An `az` on PATH signed in to SUBSCRIPTION that answers from a JSON file and logs every call:
    {"groups": {name: tags} of those that exist, "ips": [ids], "resources": {group: [{"name", "type"}]}}."""
    state = tmp_path / "azure.json"
    az = tmp_path / "bin" / "az"
    az.parent.mkdir()
    az.write_text(f"""#!{sys.executable}
import json, sys
state = json.load(open({str(state)!r}))
args = sys.argv[1:]
with open({str(tmp_path / "calls.log")!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["account", "show"]:
    print(json.dumps({SUBSCRIPTION!r}))
elif args[:2] == ["group", "exists"]:
    print(json.dumps(args[args.index("--name") + 1] in state["groups"]))
elif args[:2] == ["group", "show"]:
    print(json.dumps(state["groups"][args[args.index("--name") + 1]]))
elif args[:2] == ["group", "update"]:
    print("{{}}")
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


def az_calls(state) -> list[list[str]]:
    log = state.parent / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_leftover_check_passes_when_nothing_is_left(fake_az):
    state, env = fake_az
    state.write_text(json.dumps({"groups": {}, "ips": []}))
    result = ops("leftovers", "--stack", "function-gpu", env=env)
    assert result.returncode == 0 and "nothing of stack function-gpu is left" in result.stdout


def test_leftover_check_fails_loudly_for_groups_and_public_ips(fake_az):
    state, env = fake_az
    state.write_text(json.dumps({"groups": {"rg-function-gpu-nodes": {}},
                                 "ips": ["/subscriptions/s/ip/kubernetes-a1"]}))
    result = ops("leftovers", "--stack", "function-gpu", env=env)
    assert result.returncode == 1
    assert "LEFT OVER after destroy of function-gpu: resource group rg-function-gpu-nodes" in result.stderr
    assert "public IP /subscriptions/s/ip/kubernetes-a1" in result.stderr
    as_json = ops("leftovers", "--stack", "function-gpu", "--json", env=env)
    assert as_json.returncode == 1 and json.loads(as_json.stdout) == {
        "stack": "function-gpu", "kept": [], "retained": False, "keptGroup": None,
        "leftovers": ["resource group rg-function-gpu-nodes", "public IP /subscriptions/s/ip/kubernetes-a1"]}


KEPT_GROUP_TAGS = {"pulumi-project": "aksgpu", "pulumi-stack": "av-resim", "lifetime": "demo",
                   "expires-at": "2026-11-20T00:00:00Z", "owner": "platform team"}


def kept_account(stack: str) -> dict[str, str]:
    """The protected account of ``stack`` under the name its deployment into SUBSCRIPTION gives it."""
    from offline.stack_files import stack_config
    cfg = stack_config(stack).for_deployment(SUBSCRIPTION)
    return {"name": cfg.storage_account_name(next(a for a in cfg.storage.accounts if a.protect)),
            "type": "Microsoft.Storage/storageAccounts"}


def test_protected_data_and_its_resource_group_are_kept_and_said_so(fake_az):
    account = kept_account("av-resim")
    state, env = fake_az
    state.write_text(json.dumps({"groups": {"rg-av-resim": KEPT_GROUP_TAGS}, "ips": [],
                                 "resources": {"rg-av-resim": [account]}}))
    result = ops("leftovers", "--stack", "av-resim", env=env)
    assert result.returncode == 0, result.stderr
    assert f"kept after destroy of av-resim: storage account {account['name']} in resource group rg-av-resim" \
        in result.stdout
    assert "has protect: true" in result.stdout
    assert not [c for c in az_calls(state) if c[:2] == ["group", "update"]]  # only with --retain


def test_a_kept_group_is_marked_retained_so_expiry_and_pushes_leave_it_alone(fake_az):
    """Round-3 audit #16: a kept group still tagged demo and past its expiry made the expiry workflow dispatch a
    destroy every hour, forever."""
    state, env = fake_az
    state.write_text(json.dumps({"groups": {"rg-av-resim": KEPT_GROUP_TAGS}, "ips": [],
                                 "resources": {"rg-av-resim": [kept_account("av-resim")]}}))
    result = ops("leftovers", "--stack", "av-resim", "--retain", env=env)
    assert result.returncode == 0, result.stderr
    (update,) = [c for c in az_calls(state) if c[:2] == ["group", "update"]]
    tags = dict(t.split("=", 1) for t in update[update.index("--tags") + 1:update.index("--output")])
    assert tags == {"pulumi-project": "aksgpu", "pulumi-stack": "av-resim", "lifetime": "retained",
                    "owner": "platform team"}
    now = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    assert expired_stacks([{"tags": tags}], now, "aksgpu") == []
    assert lifecycle.push_targets(["av-resim"], [{"tags": tags}], now, "aksgpu", lambda s: Lifetime.DEMO).deploy == []


def test_anything_beside_the_protected_data_is_a_leftover(fake_az):
    state, env = fake_az
    extra = {"name": "vnet-av-resim", "type": "Microsoft.Network/virtualNetworks"}
    state.write_text(json.dumps({"groups": {"rg-av-resim": {}}, "ips": [], "resources": {"rg-av-resim": [extra]}}))
    result = ops("leftovers", "--stack", "av-resim", env=env)
    assert result.returncode == 1
    assert "LEFT OVER after destroy of av-resim: Microsoft.Network/virtualNetworks vnet-av-resim" in result.stderr


def test_an_unprotected_stacks_resource_group_is_a_leftover(fake_az):
    state, env = fake_az
    state.write_text(json.dumps({"groups": {"rg-function-gpu": {}}, "ips": [], "resources": {}}))
    result = ops("leftovers", "--stack", "function-gpu", env=env)
    assert result.returncode == 1 and "resource group rg-function-gpu" in result.stderr


def test_workflow_matrix_runs_private_stacks_on_their_own_runner_and_never_on_a_hosted_one():
    result = ops("matrix", json.dumps(["av-resim", "dev"]))
    assert result.returncode == 0
    rows = {row["stack"]: row["runner"] for row in json.loads(result.stdout)["include"]}
    assert rows == {"av-resim": ["self-hosted", "aksgpu-av-resim"], "dev": "ubuntu-24.04"}


def test_a_private_stack_without_a_runner_is_left_out_with_a_warning(tmp_path, monkeypatch):
    from ops import runners
    from program.config.loader import load_config
    from stacks import REGISTRY
    monkeypatch.setattr(runners, "stack_config", lambda stack: load_config(
        {"scenario": "gpu-basics", "cluster": {"private": True}}, "aksgpu", stack, REGISTRY))
    assert runners.matrix(["p"]) == {"include": []}


def test_state_backend_script_is_valid_bash_and_explains_its_arguments():
    from tests.tools import venv_tool
    script = SCRIPTS / "create-state-backend.sh"
    lint = subprocess.run([venv_tool("shellcheck"), str(script)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    usage = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    text = script.read_text()
    assert "--allow-shared-key-access false" in text and "--enable-purge-protection true" in text


NOW = dt.datetime(2026, 11, 24, 12, tzinfo=dt.UTC)


def group(stack: str, **tags: str) -> dict:
    return {"name": f"rg-{stack}", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": stack, **tags}}


def test_a_push_deploys_live_demos_and_long_lived_stacks_only():
    """Why #4: a change to a shared component re-created every demo the expiry job had destroyed."""
    groups = [group("live", lifetime="demo", **{"expires-at": "2026-11-25T00:00:00Z"}),
              group("expired", lifetime="demo", **{"expires-at": "2026-11-24T00:00:00Z"}),
              group("kept", lifetime="retained"),
              group("other-project-stack", lifetime="demo") | {"tags": {"pulumi-project": "x", "pulumi-stack": "gone"}}]
    lifetimes = {"prod": Lifetime.LONG_LIVED}
    found = lifecycle.push_targets(["live", "expired", "kept", "gone", "prod"], groups, NOW, "aksgpu",
                                   lambda s: lifetimes.get(s, Lifetime.DEMO))
    assert found.deploy == ["live", "prod"]
    assert found.skipped == {
        "expired": "expired: the expiry workflow destroys it",
        "gone": "a demo that is not deployed (never, or destroyed): run the deploy workflow for it",
        "kept": "destroyed; only its protected data is kept: run the deploy workflow to bring it back"}


def test_a_push_leaves_a_demo_an_end_to_end_run_has_up_to_the_run():
    """Audit 37 R3: a push during an e2e run found its demo live and queued a deploy behind it in the stack's
    concurrency group, which brought the stack back right after the run destroyed it. The run deploys as environment
    e2e-run (python -m ops e2e), and a push leaves that deployment alone; a long-lived stack deploys on a push
    whatever it holds, as always."""
    groups = [group("drilled", lifetime="demo", environment=lifecycle.E2E_ENVIRONMENT,
                    **{"expires-at": "2026-11-25T00:00:00Z"}),
              group("dev", lifetime="demo", environment=lifecycle.E2E_ENVIRONMENT)]
    found = lifecycle.push_targets(["drilled", "dev"], groups, NOW, "aksgpu",
                                   lambda s: Lifetime.LONG_LIVED if s == "dev" else Lifetime.DEMO)
    assert found.deploy == ["dev"] and found.skipped == {"drilled": (
        "an end-to-end run's deployment (e2e.yml), which the run destroys: a deploy queued behind it would bring the "
        "stack back")}


def test_push_targets_reads_az_group_list_and_says_what_it_skips():
    groups = [group("gpu-basics", lifetime="demo", **{"expires-at": "2999-01-01T00:00:00Z"})]
    result = ops("push-targets", json.dumps(["gpu-basics", "function-gpu"]), input=json.dumps(groups))
    assert result.returncode == 0 and json.loads(result.stdout) == ["gpu-basics"]
    assert "::notice::a push leaves stack function-gpu alone: a demo that is not deployed" in result.stderr
    refused = ops("push-targets", json.dumps(["nope"]), input="[]")
    assert refused.returncode == 2 and "no config file for stack 'nope'" in refused.stderr


@pytest.fixture
def fake_cli(tmp_path):
    """`pulumi` printing a kubeconfig output (or failing when there is none) and `kubectl` logging its call."""
    bin_dir = tmp_path / "cli"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(f"""#!{sys.executable}
import os, sys
if os.environ.get("NO_OUTPUT"):
    sys.exit("error: current stack does not have output property kubeconfig")
print("apiVersion: v1")
""")
    (bin_dir / "kubectl").write_text(f"""#!{sys.executable}
import sys
open({str(tmp_path / "kubectl.log")!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
print('job.batch "resim-gpu-io-1" deleted')
""")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return tmp_path, {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_destroy_first_deletes_the_scenarios_jobs_so_kueue_lets_its_queue_go(fake_cli):
    """Round-3 audit #12: Kueue keeps a ClusterQueue while admitted Jobs remain; the unattended destroy waited."""
    root, env = fake_cli
    result = ops("drain-jobs", "--stack", "av-resim", env=env)
    assert result.returncode == 0 and 'deleted the Jobs and CronJobs of namespace av-resim' in result.stdout
    jobs, jobsets = (root / "kubectl.log").read_text().splitlines()
    assert "--namespace av-resim delete cronjobs,jobs --all --ignore-not-found --wait=true" in jobs
    # Runs created on demand (distributed-training's JobSets) hold Kueue Workloads too.
    assert "--namespace av-resim delete jobsets.jobset.x-k8s.io --all --ignore-not-found" in jobsets
    assert not list(root.glob("*.kubeconfig"))  # the credentials file is gone


def test_draining_a_stack_that_is_not_deployed_is_a_no_op(fake_cli):
    root, env = fake_cli
    result = ops("drain-jobs", "--stack", "av-resim", env={**env, "NO_OUTPUT": "1"})
    assert result.returncode == 0 and "nothing to drain" in result.stdout
    assert not (root / "kubectl.log").exists()


def test_state_backend_waits_for_its_role_assignments_instead_of_stopping_at_the_first_403(tmp_path):
    """Round-3 audit #11: a role assignment takes up to 10 minutes to apply; the data-plane call right after it
    was refused and `set -e` ended the bootstrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(f"""#!{sys.executable}
import sys
from pathlib import Path
args = " ".join(sys.argv[1:])
log = Path({str(tmp_path / "az.log")!r})
log.write_text(log.read_text() + args + "\\n" if log.exists() else args + "\\n")
if args.startswith(("storage container create", "keyvault key create")):
    attempts = log.read_text().count(args)
    if attempts < 3:
        sys.exit("(AuthorizationPermissionMismatch) This request is not authorized to perform this operation.")
if "--query id" in args or "--query user.name" in args:
    print("/subscriptions/s/resourceGroups/g/providers/x/y")
""")
    (bin_dir / "az").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RETRY_SECONDS": "0"}
    result = subprocess.run(["bash", str(SCRIPTS / "create-state-backend.sh"), "rg-state", "stteam", "kv-team"],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "az.log").read_text().splitlines()
    assert sum(c.startswith("storage container create") for c in calls) == 3
    assert sum(c.startswith("keyvault key create") for c in calls) == 3
    assert calls[0].startswith(("ad signed-in-user show", "account show"))
    assert "provider register --namespace Microsoft.KeyVault --wait --output none" in calls


@pytest.mark.parametrize("listed, where", [
    ([{"name": "dev", "current": False}], "shared"),
    ([{"name": "organization/aksgpu/dev", "current": False}], "shared"),  # PULUMI fully qualified names
    ([{"name": "gpu-basics"}, {"name": "organization/other/dev"}], "local"),  # another project's dev
    ([], "local"),
])
def test_a_preview_goes_local_only_for_a_stack_the_shared_backend_does_not_list(listed, where):
    """Issue 33b audit #5. `pulumi stack ls --json` (pulumi/pulumi pkg/cmd/pulumi/stack/stack_ls.go: a list of
    {name, ...}) names a DIY backend's stack of this project by name, or organization/<project>/<stack> when fully
    qualified (pkg/backend/diy/backend.go, diyBackendReference.String)."""
    assert lifecycle.preview_backend(listed, "dev") == where


def test_what_is_not_a_stack_list_is_one_line_and_no_decision():
    for stdin in ("error: could not list", '{"name": "dev"}', '[{"stack": "dev"}]'):
        result = command("ops", "preview-backend", "--stack", "dev", input=stdin)
        assert result.returncode == 2 and not result.stdout and result.stderr.count("\n") == 1, stdin
