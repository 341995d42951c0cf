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

# One worker runs the module: the renders are written out (written) once, not once per worker.
pytestmark = pytest.mark.xdist_group("pictures")

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


def test_the_architecture_graph_groups_azure_cluster_software_and_workloads_and_prices_the_gpu_pools(written):
    """Why #7: a decision-maker sees what runs in Azure, on the cluster and as the scenario, and what the GPU pools
    are and cost, not only component names."""
    graph = (written["av-resim"] / "graph.mmd").read_text()
    groups = {g: body for g, _, body in re.findall(r'^  subgraph g_(\w+)\["([^"]+)"\]\n(.*?)^  end$', graph,
                                                   re.MULTILINE | re.DOTALL)}
    assert list(groups) == ["azure", "cluster", "workloads"]
    assert "n_aks[" in groups["azure"] and "n_gpu_operator[" in groups["cluster"] and "n_resim[" in groups["workloads"]
    assert "<small>NC4as_T4_v3, 1–5 spot, $0.063/node-h</small>" in groups["azure"]


def test_the_gantt_axis_says_minutes_and_timeline_md_shows_each_phase_once(written):
    """Why #7: `00:16` read as a time of day; four tables repeated the node's phases."""
    text = (written["function-gpu"] / "timeline.md").read_text()
    (chart,) = BLOCK.findall(text)
    assert "  axisFormat %M min\n" in chart and "minutes from its start" in chart
    section = text.split("## First GPU pod", 1)[1].split("```mermaid", 1)[0]
    phases = re.findall(r"^\| ([^|]+) \| [^|]+ \| [^|]+ \| [^|]+ \|$", section, re.MULTILINE)[2:]
    assert len(phases) == len(set(phases)) >= 6 and section.count("VM boots and joins the cluster") == 1
    assert "| from `pulumi up`: starts + takes | on a new node: starts + takes |" in section
