"""The policy pack, as pulumi-policy runs it in its own environment (policy/venv), over every stack's render:
what `pulumi preview --policy-pack policy` would report. 0 violations."""

from __future__ import annotations

import json
import subprocess

from offline.report import write_render
from offline.stack_files import REPO_ROOT
from policy import rules

POLICY_PYTHON = REPO_ROOT / "policy" / "venv" / "bin" / "python"


def test_the_pack_passes_every_stack_render(renders, tmp_path):
    assert POLICY_PYTHON.is_file(), "the policy pack's environment is made by `make install-policy` (policy/venv)"
    for render in renders.values():
        write_render(render, tmp_path)
    result = subprocess.run([str(POLICY_PYTHON), str(REPO_ROOT / "policy" / "offline_check.py"), str(tmp_path)],
                            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT / "policy")
    findings = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 0 and findings == [], result.stdout + result.stderr
    policies = len(rules.RULES) + len(rules.STACK_RULES)
    assert f"{policies} policies, {len(renders)} stacks, 0 violations" in result.stderr


def test_the_pack_reports_a_broken_render(render_shape, tmp_path):
    out = write_render(render_shape("function"), tmp_path)
    resources = json.loads((out / "resources.json").read_text())
    for r in resources:
        if r["name"] == "function-service":
            del r["inputs"]["spec"]["loadBalancerSourceRanges"]
    (out / "resources.json").write_text(json.dumps(resources))
    result = subprocess.run([str(POLICY_PYTHON), str(REPO_ROOT / "policy" / "offline_check.py"), str(tmp_path)],
                            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT / "policy")
    (finding,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 1 and finding["policy"] == "load-balancers-have-source-ranges"
    assert finding["urn"].endswith("kubernetes:core/v1:Service::function-service")
