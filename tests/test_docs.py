"""The documentation: generated parts fresh, one page per scenario, every list of names checked, a short README."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from offline.docs import CONFIGURATION, ESTIMATES, README, STACK_FILE_SCHEMA, scenario_page, write_docs
from offline.runs import load_runs
from offline.stack_files import REPO_ROOT, stack_config, stack_files
from stacks import REGISTRY

DOCS = REPO_ROOT / "docs"


def test_generated_docs_are_fresh(renders):
    assert write_docs(check=True, renders=renders) == [], "run: python -m offline docs"


def test_a_stale_generated_file_is_reported_and_rewritten(renders, tmp_path):
    for name in ("README.md", "Pulumi.yaml", *(p.name for p in stack_files().values())):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / CONFIGURATION).write_text("# stale\n")
    (tmp_path / STACK_FILE_SCHEMA).write_text("{}\n")
    assert write_docs(check=True, root=tmp_path, renders=renders) == [CONFIGURATION, STACK_FILE_SCHEMA]
    assert write_docs(root=tmp_path, renders=renders) == [CONFIGURATION, STACK_FILE_SCHEMA]
    assert write_docs(check=True, root=tmp_path, renders=renders) == []


def test_readme_is_short_and_starts_with_its_status_then_the_two_commands():
    text = (REPO_ROOT / README).read_text()
    assert len(text.encode()) <= 12 * 1024
    status, commands = text.split("\n## ")[1:3]
    assert status.startswith("Status") and commands.startswith("Two commands for a fresh machine")
    assert "make render" in commands and "make test" in commands


def test_ci_runs_the_readme_test_command():
    assert (REPO_ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_every_scenario_is_a_folder_with_its_page_tests_and_a_stack_named_after_it():
    folders = {p.name for p in (REPO_ROOT / "stacks").iterdir() if (p / "__init__.py").is_file()}
    assert folders == {name.replace("-", "_") for name in REGISTRY}
    for name, scenario in REGISTRY.items():
        assert scenario.name == name and scenario.summary and scenario.seed
        assert (REPO_ROOT / scenario_page(name)).is_file(), name
        assert list((REPO_ROOT / scenario_page(name)).parent.glob("test_*.py")), name
    assert {stack_config(stack).scenario for stack in stack_files()} == set(REGISTRY)
    assert set(REGISTRY) <= set(stack_files())


def test_the_readme_table_lists_every_stack_file():
    text = (REPO_ROOT / README).read_text()
    for path in stack_files().values():
        assert f"| `{path.name}` |" in text


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in page.read_text().splitlines() if line.startswith("#")}


def test_docs_link_only_to_files_and_headings_that_exist():
    for page in [REPO_ROOT / README, *DOCS.rglob("*.md"), *(REPO_ROOT / "stacks").rglob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]*))?\)", page.read_text()):
            where = page.parent / target if target else page
            assert where.exists(), f"{page.relative_to(REPO_ROOT)} links to missing {target}"
            if anchor and where.suffix == ".md":
                assert anchor in heading_anchors(where), f"{page.relative_to(REPO_ROOT)} links to missing #{anchor}"


def test_the_estimates_page_has_a_row_per_stack():
    text = (REPO_ROOT / ESTIMATES).read_text()
    for stack in stack_files():
        assert f"| `{stack}` |" in text


OWN_FOLDERS = "components|program|stacks|offline|ops|docs|tests|scripts|docker|policy|tools|dashboards|\\.github"
PATH_IN_TEXT = re.compile(rf"(?<![\w/.@:'\"-])((?:{OWN_FOLDERS})/(?:[\w.-]+/)*[\w.-]*)")
UPSTREAM_PATHS = {"tests/setup-infra/network-operator-nfd.yaml", "tests/expected-output.md",
                  "tests/setup-infra/deploy-aks.sh", "docs/results/e2e-",
                  "tests/scenarios/k8s/values.yaml", "tests/scenarios/k8s/templates/mpi-job.yaml",
                  "tests/scenarios/nvidia-topology/", ".github/precompiled-matrix-config.json"}
"""Paths inside upstream repositories (Azure/aks-rdma-infiniband, NVIDIA/gpu-driver-container) that the code cites
beside the repository's name, and the file-name prefix of an end-to-end run's results (`docs/results/e2e-`)."""


def test_every_path_of_the_project_that_text_names_exists():
    """A rename leaves prose behind (Pulumi.yaml's description named `stacks/__init__.py` two layouts after it went):
    every path under one of the project's folders that a tracked file names, in comments, docstrings, descriptions
    or Markdown, must exist."""
    import subprocess
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
    missing = []
    for name in tracked:
        if name.startswith(("tests/fixtures/", "docs/results/")) or name.endswith((".lock", ".json", ".png")):
            continue
        for ref in PATH_IN_TEXT.findall((REPO_ROOT / name).read_text(errors="replace")):
            ref = ref.rstrip(".,:;")
            if ref not in UPSTREAM_PATHS and not (REPO_ROOT / ref).exists():
                missing.append((name, ref))
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], input="\n".join(r for _, r in missing),
                             cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()  # what a build makes
    assert not [f"{name}: {ref}" for name, ref in missing if ref not in ignored], missing


def test_the_readmes_nodejs_version_is_the_highest_that_the_locked_tools_require():
    """Newcomer #16: the README asked for Node.js 24 where every locked package runs on 20; the requirement is the
    largest lower bound of the `engines.node` fields in tools/*/package-lock.json."""
    import json
    bounds = set()
    for lock in (REPO_ROOT / "tools").glob("*/package-lock.json"):
        for package in json.loads(lock.read_text())["packages"].values():
            engines = package.get("engines")
            node = engines.get("node") if isinstance(engines, dict) else None
            if node:
                bounds |= {int(m) for m in re.findall(r">=\s*v?(\d+)", node)}
    assert bounds and f"Node.js {max(bounds)} or later" in (REPO_ROOT / README).read_text()


def test_the_readme_status_says_what_ran_on_a_gpu_and_that_nothing_ran_on_azure_from_the_result_files(tmp_path):
    """Newcomer #8: the README says what is proven where; the status is generated from docs/results/, so a new
    result (on a GPU, or an end-to-end run on Azure: docs/results/e2e-*.json) changes it, and an unknown one fails.
    Issue 37: it links the scoreboard, which has each stack's latest run."""
    from offline.docs import RESULT_PAGES, STATUS_BEGIN, _readme, stack_table, status_section
    status = status_section()
    assert STATUS_BEGIN in (REPO_ROOT / README).read_text().split("\n## Two commands")[0]
    assert "on 1× H100 80GB HBM3:" in status and "on 2× H200:" in status
    assert all(f"]({page})" in status for _, page in RESULT_PAGES.values())
    assert "Not yet deployed to Azure by this project" in status and "[scoreboard](docs/scoreboard.md)" in status
    shutil.copytree(REPO_ROOT / "docs" / "results", tmp_path / "docs" / "results")
    for path in stack_files().values():
        shutil.copy(path, tmp_path / path.name)
    # A run whose probe output names the GPU is not a GPU result of RESULT_PAGES: the status's Azure line counts it.
    (run,) = load_runs(REPO_ROOT / "tests" / "fixtures" / "runs")  # the scoreboard's (tests/test_scoreboard.py)
    probe = run.probes[0].model_copy(update={"output": "NVIDIA A100 80GB PCIe, 570.148.08"})
    (tmp_path / "docs" / "results" / run.file_name).write_text(
        run.model_copy(update={"probes": (probe,)}).model_dump_json())
    status = status_section(tmp_path)
    azure = status.splitlines()[-1]
    assert azure == (f"- **Run end to end on Azure** by this project: 1 of {len(stack_files())} stacks, 1 passing on "
                     "their latest run ([scoreboard](docs/scoreboard.md)); the others never ran; costs are "
                     "[estimates](docs/estimates.md).")
    readme = _readme((REPO_ROOT / README).read_text(), stack_table(), status)
    assert len(readme.encode()) <= 12 * 1024  # the README's limit holds whatever the runs say
    (tmp_path / "docs" / "results" / "nccl-sweep.json").write_text('{"gpus": ["NVIDIA B200, 590.1, 180000 MiB"]}')
    with pytest.raises(ValueError, match="add what it measured to RESULT_PAGES"):
        status_section(tmp_path)
