"""checkov over what users deploy: every stack's rendered Kubernetes manifests, the Dockerfiles, the workflows.

checkov runs from its own virtualenv (``make install-checkov``); ``--skip-download`` keeps it offline. Any failed
check outside tests/checkov_skips.txt fails the suite, and so does a skip whose check no longer fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from offline.report import is_manifest, manifest
from offline.stack_files import REPO_ROOT

# One worker runs the module: its checkov run (reports) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("checkov")

CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPS = Path(__file__).with_name("checkov_skips.txt")
FRAMEWORKS = ("kubernetes", "dockerfile", "github_actions")


def read_skips(text: str) -> dict[str, str]:
    """Check id → reason, from ``ID  reason`` lines (``#`` comments and blank lines ignored)."""
    skips = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        check, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"checkov_skips.txt:{number}: {check} has no reason")
        if check in skips:
            raise ValueError(f"checkov_skips.txt:{number}: {check} is listed twice")
        skips[check] = reason.strip()
    return skips


@pytest.fixture(scope="module")
def reports(renders, tmp_path_factory) -> dict[str, dict]:
    """checkov's JSON report per framework, from one run over everything."""
    assert CHECKOV.is_file(), "checkov is installed by `make install-checkov` (its own venv, .venv-checkov)"
    # One directory, one report per framework (checkov writes a report per --directory).
    root = tmp_path_factory.mktemp("checkov")
    # Each distinct manifest once: half of them are the same object in several stacks (the operator's namespace,
    # NFD's rule), and checkov's time grows with the files it reads.
    distinct = {yaml.safe_dump(manifest(r), sort_keys=False): f"{stack}-{r.name}"
                for stack, render in sorted(renders.items(), reverse=True) for r in render.resources if is_manifest(r)}
    (root / "manifests").mkdir()
    for text, name in distinct.items():
        (root / "manifests" / f"{name}.yaml").write_text(text)
    shutil.copytree(REPO_ROOT / "docker", root / "docker")
    shutil.copytree(REPO_ROOT / ".github", root / ".github")
    result = subprocess.run(
        [str(CHECKOV), "--skip-download", "--compact", "--output", "json",
         "--framework", *FRAMEWORKS, "--directory", str(root),
         ],
        capture_output=True, text=True, timeout=300,
    )
    # checkov exits 1 when a check fails; anything else means it did not run.
    assert result.returncode in (0, 1), result.stderr[-2000:]
    parsed = json.loads(result.stdout)
    return {report["check_type"]: report for report in ([parsed] if isinstance(parsed, dict) else parsed)}


def test_the_skip_list_gives_a_reason_for_each_check_once():
    assert read_skips("# comment\n\nCKV_K8S_1  because\n") == {"CKV_K8S_1": "because"}
    for bad in ("CKV_K8S_1\n", "CKV_K8S_1 a\nCKV_K8S_1 b\n"):
        with pytest.raises(ValueError):
            read_skips(bad)
    assert read_skips(SKIPS.read_text())


def test_checkov_scans_every_framework_without_parsing_errors(reports):
    assert set(reports) == set(FRAMEWORKS)
    for framework, report in reports.items():
        assert report["summary"]["parsing_errors"] == 0, framework
        assert report["summary"]["passed"] > 0, f"checkov found nothing to check in {framework}"
    # Every stack's manifests were scanned: a workload of each scenario is among the passed resources.
    resources = {c["resource"] for c in reports["kubernetes"]["results"]["passed_checks"]}
    for workload in ("Deployment.gpu-function.gpu-function", "Deployment.gpu-sharing.notebook",
                     "CronJob.av-resim.gpu-io", "Job.gpu-basics.train", "Deployment.training.predict"):
        assert workload in resources


def test_no_check_fails_beyond_the_justified_skips(reports):
    skips = read_skips(SKIPS.read_text())
    failed = {(c["check_id"], c["resource"], c.get("file_path", ""))
              for report in reports.values() for c in report["results"]["failed_checks"]}
    unexpected = sorted(f for f in failed if f[0] not in skips)
    assert not unexpected, "\n".join(" ".join(f) for f in unexpected)
    stale = set(skips) - {f[0] for f in failed}
    assert not stale, f"these checks pass now: remove them from checkov_skips.txt: {sorted(stale)}"
