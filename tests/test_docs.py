"""The documentation: generated parts fresh, one page per scenario, every list of names checked, a short README."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import stacks
from offline.docs import CONFIGURATION, ESTIMATES, README, write_docs
from offline.stack_files import REPO_ROOT, stack_config, stack_files

DOCS = REPO_ROOT / "docs"


def test_generated_docs_are_fresh(renders):
    assert write_docs(check=True, renders=renders) == [], "run: python -m offline docs"


def test_a_stale_generated_file_is_reported_and_rewritten(renders, tmp_path):
    for name in ("README.md", "Pulumi.yaml", *(p.name for p in stack_files().values())):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / CONFIGURATION).write_text("# stale\n")
    assert write_docs(check=True, root=tmp_path, renders=renders) == [CONFIGURATION]
    assert write_docs(root=tmp_path, renders=renders) == [CONFIGURATION]
    assert write_docs(check=True, root=tmp_path, renders=renders) == []


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (REPO_ROOT / README).read_text()
    assert len(text.encode()) <= 12 * 1024
    first_section = text.split("\n## ")[1]
    assert first_section.startswith("Two commands for a fresh machine")
    assert "make render" in first_section and "make test" in first_section


def test_ci_runs_the_readme_test_command():
    assert (REPO_ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_every_scenario_has_a_stack_file_and_a_docs_page():
    scenarios_with_stacks = {stack_config(stack).scenario for stack in stack_files()}
    assert scenarios_with_stacks == set(stacks.REGISTRY)
    pages = {p.stem for p in (DOCS / "scenarios").glob("*.md")}
    assert pages == set(stacks.REGISTRY)


def test_every_scenario_has_a_stack_named_after_it():
    assert set(stacks.REGISTRY) <= set(stack_files())


def test_every_registered_scenario_is_the_one_its_module_defines():
    for name in stacks.REGISTRY:
        scenario = stacks.load(name)
        assert scenario.name == name and scenario.summary and scenario.seed


def test_the_readme_table_lists_every_stack_file():
    text = (REPO_ROOT / README).read_text()
    for path in stack_files().values():
        assert f"| `{path.name}` |" in text


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in page.read_text().splitlines() if line.startswith("#")}


def test_docs_link_only_to_files_and_headings_that_exist():
    for page in [REPO_ROOT / README, *DOCS.rglob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]*))?\)", page.read_text()):
            where = page.parent / target if target else page
            assert where.exists(), f"{page.relative_to(REPO_ROOT)} links to missing {target}"
            if anchor and where.suffix == ".md":
                assert anchor in heading_anchors(where), f"{page.relative_to(REPO_ROOT)} links to missing #{anchor}"


def test_the_estimates_page_has_a_row_per_stack():
    text = (REPO_ROOT / ESTIMATES).read_text()
    for stack in stack_files():
        assert f"| `{stack}` |" in text
