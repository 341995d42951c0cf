"""Pictures where people look (Why #10, newcomer #11, #15): every Mermaid diagram the render and the docs draw
parses with Mermaid itself; the architecture graph is the components, top to bottom, with the provider edges that
tie the Kubernetes half to the cluster, in summary.md; the timeline is a Gantt chart; the driver column says who
installs the driver."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from offline.report import transitive_reduction, write_render
from offline.stack_files import REPO_ROOT

MERMAID = REPO_ROOT / "tools" / "mermaid"
BLOCK = re.compile(r"^```mermaid\n(.*?)^```", re.DOTALL | re.MULTILINE)


def parse(diagrams: dict[str, str], folder) -> dict[str, dict]:
    node = shutil.which("node")
    assert node and (MERMAID / "node_modules").is_dir(), "make install-dev installs tools/mermaid"
    files = []
    for name, text in diagrams.items():
        path = folder / f"{len(files)}.mmd"
        path.write_text(text)
        files.append((name, str(path)))
    result = subprocess.run([node, str(MERMAID / "parse.mjs"), *(f for _, f in files)], capture_output=True,
                            text=True, check=True)
    by_file = {r["file"]: r for r in json.loads(result.stdout)}
    return {name: by_file[path] for name, path in files}


@pytest.fixture(scope="module")
def written(renders, tmp_path_factory):
    root = tmp_path_factory.mktemp("renders")
    return {stack: write_render(r, root) for stack, r in renders.items()}


def test_every_diagram_of_the_renders_and_the_docs_parses(written, tmp_path):
    diagrams = {}
    for stack, folder in written.items():
        for page in ("summary.md", "timeline.md"):
            for i, block in enumerate(BLOCK.findall((folder / page).read_text())):
                diagrams[f"{stack}/{page}#{i}"] = block
        diagrams[f"{stack}/graph.mmd"] = (folder / "graph.mmd").read_text()
    pages = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md"), *(REPO_ROOT / "stacks").glob("*/*.md")]
    for page in pages:
        for i, block in enumerate(BLOCK.findall(page.read_text())):
            diagrams[f"{page.relative_to(REPO_ROOT)}#{i}"] = block
    diagrams["planted error"] = "flowchart TB\n  a -->\n"
    results = parse(diagrams, tmp_path)
    assert not results.pop("planted error")["ok"]
    assert {name: r["error"] for name, r in results.items() if not r["ok"]} == {}
    assert sum(1 for name in results if name.endswith("summary.md#0")) == len(written)


def test_the_architecture_graph_is_components_top_to_bottom_with_the_provider_edges(written):
    text = (written["av-resim"] / "summary.md").read_text()
    graph = BLOCK.findall(text.split("## Architecture", 1)[1])[0]
    assert graph.startswith("flowchart TB\n") and graph == (written["av-resim"] / "graph.mmd").read_text()
    edges = set(re.findall(r"^  (\w+) --> (\w+)$", graph, re.MULTILINE))
    nodes = set(re.findall(r"^  (\w+)\[", graph, re.MULTILINE))
    # The Kubernetes half hangs off the cluster through the provider; nothing floats unconnected.
    assert ("n_aks", "n_k8s") in edges and ("n_k8s", "n_gpu_operator") in edges
    assert nodes == {n for edge in edges for n in edge}
    assert len(nodes) <= 25  # components, not resources: readable at page width


def test_an_arrow_that_others_imply_is_left_out():
    assert transitive_reduction({("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")}) == {("a", "b"), ("b", "c"),
                                                                                      ("c", "d")}


def test_the_timeline_draws_its_critical_path_as_a_gantt_chart(written):
    text = (written["gpu-basics"] / "timeline.md").read_text()
    (chart,) = BLOCK.findall(text)
    bars = re.findall(r"^  (\S+) : s\d+, (\d\d:\d\d:\d\d), (\d+)s$", chart, re.MULTILINE)
    rows = re.findall(r"^\| [\d.]+ min \| [\d.]+ min \| `([^`]+)` \|", text, re.MULTILINE)
    assert [name for name, _, _ in bars] == rows and bars[0][1] == "00:00:00"


def test_the_driver_column_says_who_installs_the_driver(written):
    def column(stack):
        return re.findall(r"^\| \w+ \| User \|.*?\| (AKS|GPU operator|nobody|-) \|", (written[stack] / "summary.md")
                          .read_text(), re.MULTILINE)

    assert "GPU driver installed by" in (written["gpu-basics"] / "summary.md").read_text()
    assert column("gpu-basics") == ["GPU operator"]  # the design card's owner, precompiled by default
    assert column("av-resim") == ["GPU operator", "GPU operator"]
    assert column("gpu-sharing-mig") == ["AKS"]  # MIG on AKS needs AKS's driver
