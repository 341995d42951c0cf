"""The offline render: its files, determinism, secrets, and how it fails on bad config."""

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from offline.render import REPO_ROOT, SECRET, render_stack
from offline.report import HELM_RELEASE, helm_release, is_manifest, is_patch, manifest, write_render
from program import outputs
from stacks.gpu_sharing.deploy import NOTEBOOK_TOKEN
from tests.helpers import STACKS


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offline", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def written(render_of, tmp_path_factory):
    """Each stack's render written out once for this module's tests."""
    root = tmp_path_factory.mktemp("written")
    return functools.cache(lambda stack: write_render(render_of(stack), root))


@pytest.mark.parametrize("stack", STACKS)
def test_resources_json_is_sorted_by_type_and_name_with_parent_and_dependencies(stack, written):
    out = written(stack)
    data = json.loads((out / "resources.json").read_text())
    assert [(d["type"], d["name"]) for d in data] == sorted((d["type"], d["name"]) for d in data)
    names = {d["name"] for d in data}
    for d in data:
        assert set(d) >= {"type", "name", "parent", "dependsOn", "inputs"}
        assert d["parent"] is None or d["parent"] in names
        assert set(d["dependsOn"]) <= names, d["name"]
    assert (out / "summary.md").read_text().startswith(f"# Stack `{stack}`")
    assert (out / "graph.mmd").read_text().startswith("flowchart TB")


def _typed_text(doc) -> str:
    """A document as PyYAML's own emitter writes it: types kept, of keys too (JSON would write a key True as "true")."""
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("stack", STACKS)
def test_written_manifests_and_releases_read_back_as_the_render_declares_them(stack, render_of, written):
    render, out = render_of(stack), written(stack)
    declared = [manifest(r) for r in render.resources if is_manifest(r) or is_patch(r)]
    declared += [helm_release(r) for r in render.of_type(HELM_RELEASE)]
    read_back = [yaml.safe_load(p.read_text()) for p in out.glob("*/*.yaml")]
    assert len(read_back) == len(declared) > 0
    assert sorted(map(_typed_text, read_back)) == sorted(map(_typed_text, declared))


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_but_components_has_a_component_parent(stack, render_of):
    r = render_of(stack)
    for res in r.resources:
        if res.custom:
            assert res.parent is not None and not r.named(res.parent).custom, res.name


def test_kubeconfig_is_secret_in_outputs_and_in_the_provider_inputs(render_shape):
    r = render_shape("dev-minimal")
    assert r.outputs["kubeconfig"] == SECRET
    assert r.named("k8s-provider").inputs["kubeconfig"] == SECRET
    assert "BEGIN CERTIFICATE" not in json.dumps([x.as_json() for x in r.resources])


def test_render_is_deterministic_byte_for_byte(tmp_path, renders):
    first = write_render(renders["av-resim"], tmp_path / "a")
    second = write_render(render_stack("av-resim"), tmp_path / "b")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for f in files:
        assert (first / f).read_bytes() == (second / f).read_bytes(), f


def test_summary_lists_node_pools_with_gpu_model_spot_bounds_and_taints(render_shape, tmp_path):
    text = (write_render(render_shape("private-two-pools"), tmp_path) / "summary.md").read_text()
    assert "| nc48a100 | User | Standard_NC48ads_A100_v4 | A100 × 2 | yes | 0–2 |" in text
    assert "| nc4ast4 | User | Standard_NC4as_T4_v3 | T4 × 1 | yes | 1–5 |" in text
    assert "`sku=gpu:NoSchedule`" in text
    assert "GPU nodes stay up when idle (min > 0) in pools: nc4ast4" in text


def test_cli_renders_one_stack_with_a_config_file(tmp_path):
    result = run_cli("render", "--stack", "dev", "--config", str(REPO_ROOT / "Pulumi.gpu-basics.yaml"),
                     "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "dev" / "resources.json").exists()


def cli_in_process(capsys, *args: str) -> tuple[int, str]:
    """The CLI's exit status and stderr, run in this process (the subprocess test above covers the entry point)."""
    from offline.__main__ import main

    status = main(list(args))
    return status, capsys.readouterr().err


def test_cli_config_error_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump({"config": {"aksgpu:gpuPools": [{"name": "k80", "vmSize": "Standard_NC6"}]}}))
    out = tmp_path / "out"
    status, stderr = cli_in_process(capsys, "render", "--stack", "bad", "--config", str(bad), "--out", str(out))
    assert status == 2
    assert stderr.strip().count("\n") == 0
    assert "aksgpu:gpuPools[0].vmSize" in stderr and "Standard_NC4as_T4_v3" in stderr
    assert "Traceback" not in stderr
    assert not out.exists()


@pytest.mark.parametrize("text, says", [
    # libyaml says "did not find expected", PyYAML's own parser "expected ..., but got '<stream end>'".
    ("config: [unclosed\n", r"Pulumi\.bad\.yaml:2:1: (did not find )?expected ',' or '\]'.* \(not valid YAML\)"),
    ("- just\n- a list\n", "Pulumi.bad.yaml: the top level: must be a mapping of keys to values, not a list"),
    ("config: 42\n", "Pulumi.bad.yaml: config: must be a mapping of keys to values, not a number"),
    ("config:\n  aksgpu:gpuPools:\n    - spotMaxPrice: .nan\n", "spotMaxPrice"),
])
def test_a_malformed_stack_file_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, text, says):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(text)
    out = tmp_path / "out"
    status, stderr = cli_in_process(capsys, "render", "--stack", "bad", "--config", str(bad), "--out", str(out))
    assert status == 2 and "Traceback" not in stderr
    assert stderr.strip().count("\n") == 0 and re.search(says, stderr), stderr
    assert not out.exists()


SENTINEL = "S3NT1NEL"


@pytest.fixture
def sentinel_secrets(monkeypatch):
    """Mocks whose every secret value (notebook token, registry token, kubeconfig) carries a sentinel."""
    from offline import mocks

    new_resource, call, kubeconfig = mocks.AzureMocks.new_resource, mocks.AzureMocks.call, mocks.aad_kubeconfig

    def marked_resource(self, args):
        rid, outputs = new_resource(self, args)
        if args.typ == "random:index/randomPassword:RandomPassword":
            outputs["result"] = f"{SENTINEL}-token"
        return rid, outputs

    def marked_call(self, args):
        result = call(self, args)
        if args.token == "command:local:run":
            result["stdout"] = f"{SENTINEL}-registry"
        return result

    monkeypatch.setattr(mocks.AzureMocks, "new_resource", marked_resource)
    monkeypatch.setattr(mocks.AzureMocks, "call", marked_call)
    monkeypatch.setattr(mocks, "aad_kubeconfig", lambda *a: kubeconfig(*a) + f"# {SENTINEL}-kubeconfig\n")


def test_no_secret_value_reaches_the_render_files_or_outputs(sentinel_secrets, tmp_path):
    from tests.helpers import render_with

    r = render_with(
        scenario="gpu-sharing",
        gpuPools=[{"name": "shared", "minCount": 1, "maxCount": 1, "sharing": {"mode": "time-slicing", "replicas": 4}}],
        build={"mode": "local"},
    )
    revealed = json.dumps([x.revealed for x in r.resources])
    assert f"{SENTINEL}-token" in revealed and f"{SENTINEL}-registry" in revealed  # the sentinels are really there
    out = write_render(r, tmp_path)
    for path in out.rglob("*"):
        if path.is_file():
            assert SENTINEL not in path.read_text(), path.relative_to(out)
    assert SENTINEL not in json.dumps(r.outputs)
    # Outputs that carry secrets are secret outputs (masked whole), never plain values.
    assert r.outputs[outputs.KUBECONFIG] == SECRET and r.outputs[NOTEBOOK_TOKEN] == SECRET


def test_a_masked_secret_keeps_its_shape_so_its_manifest_is_still_valid(render_shape):
    from offline.report import manifest
    from tests import upstream

    secret = render_shape("time-slicing").named("sharing-notebook-token-secret")
    assert secret.inputs["stringData"] == {"token": SECRET}
    upstream.validate_builtin(manifest(secret))


@pytest.mark.parametrize("stack", STACKS)
def test_command_outputs_run_under_eval_as_one_line_without_comments(stack, render_of):
    """Newcomer #2: a `#` in an output ends the line under `eval "$(pulumi stack output X)"` and is passed to the
    command as words under a bare `$(...)`; what a reader needs to know the command prints itself."""
    r = render_of(stack)
    for key, value in r.outputs.items():
        if isinstance(value, str):
            assert "\n" not in value.strip() or key == outputs.KUBECONFIG, (r.stack, key)
            assert not re.search(r"(^|\s)#", value), (r.stack, key, value)
