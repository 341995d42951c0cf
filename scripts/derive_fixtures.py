"""Derive the tests' fixtures of upstream facts (chart values, CRD schemas, DCGM counters) from upstream files.

The tests never read anything outside the repository: they read what this script writes under
``tests/fixtures/``, keyed by the versions the program pins (``components/kubernetes/charts.py``). A chart bump
without fresh fixtures fails the tests; run this script to make them.

SOURCE is a folder laid out as::

    SOURCE/charts/<chart>/Chart.yaml, values.yaml[, values.schema.json][, crds/*.yaml]
    SOURCE/crds/<project>-v<version>/*.yaml          CRD manifests of an operator at a tag
    SOURCE/dcgm/dcgm-exporter-<version>_<name>.csv    the exporter's counter lists
    SOURCE/seeds/003/nfd-gpu-rule.yaml                seed 003's NodeFeatureRule (optional)
    SOURCE/metrics/prometheus-metrics-scrape-configuration-minimal.md
                                                      the managed Prometheus add-on's minimal ingestion keep lists
    SOURCE/metrics/vllm-<version>-loggers.py          vLLM's vllm/v1/metrics/loggers.py at a version

On a machine with network access, fill it like this (versions from charts.py)::

    helm pull oci://registry.k8s.io/nfd/charts/node-feature-discovery --version 0.19.0 --untar -d SOURCE/charts
    helm pull gpu-operator --repo https://helm.ngc.nvidia.com/nvidia --version v26.7.0 --untar -d SOURCE/charts
    helm pull blob-csi-driver --repo https://kubernetes-sigs.github.io/blob-csi-driver --version 1.27.9 \\
        --untar -d SOURCE/charts
    helm pull oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2 --untar -d SOURCE/charts
    helm pull network-operator --repo https://helm.ngc.nvidia.com/nvidia --version 26.4.1 --untar -d SOURCE/charts
    helm pull oci://registry.k8s.io/jobset/charts/jobset --version 0.12.0 --untar -d SOURCE/charts
    # (or each chart's folder at its git tag: Mellanox/network-operator v26.4.1 deployment/network-operator,
    #  kubernetes-sigs/jobset v0.12.0 charts/jobset, as these fixtures were made)
    # operator CRDs at a tag, e.g. KEDA's: SOURCE/crds/keda-v2.16.1/ from kedacore/keda config/crd/bases/
    # DCGM counters: SOURCE/dcgm/ from NVIDIA/dcgm-exporter etc/*.csv at the exporter tag the operator names
    # keep lists: SOURCE/metrics/ from MicrosoftDocs/azure-docs (commit 02d1d9c4956ab465e868375eca9dd7d9f964c42b)
    #   articles/azure-monitor/essentials/prometheus-metrics-scrape-configuration-minimal.md
    # node auto-provisioning: SOURCE/crds/karpenter-provider-azure-v1.12.2/ from Azure/karpenter-provider-azure
    #   pkg/apis/crds/karpenter.sh_nodepools.yaml and karpenter.azure.com_aksnodeclasses.yaml at tag v1.12.2
    # vLLM metrics: SOURCE/metrics/vllm-0.10-loggers.py from vllm-project/vllm
    #   (commit 005a810bc40faa25b8870fbc8559c3462581eee3) vllm/v1/metrics/loggers.py

then ``python scripts/derive_fixtures.py SOURCE``. Only the pinned chart versions are written; a chart whose
Chart.yaml names another version is refused. The files written are JSON, sorted, so a refresh diffs cleanly.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from components.kubernetes import charts  # noqa: E402  (the pins; run as a script from any folder)

FIXTURES = ROOT / "tests" / "fixtures"
CRD_KINDS = {
    "keda": {"ScaledObject", "TriggerAuthentication"},
    "kueue": {"ClusterQueue", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass"},
    "kaito": {"Workspace", "InferenceSet"},
    "prometheus-collector": {"PodMonitor", "ServiceMonitor"},
    "karpenter-provider-azure": {"NodePool", "AKSNodeClass"},
}
"""The kinds the program writes, per operator: only their schemas are kept (KEDA's ScaledJob alone is 600 KB)."""


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


def crd_facts(documents: list[dict[str, Any]], kinds: set[str] | None = None) -> dict[str, Any]:
    """CRD name → scope, group, kind and each served version's openAPIV3Schema."""
    facts = {}
    for doc in documents:
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        if kinds is not None and spec["names"]["kind"] not in kinds:
            continue
        facts[doc["metadata"]["name"]] = {
            "group": spec["group"], "kind": spec["names"]["kind"], "scope": spec["scope"],
            "versions": {v["name"]: v["schema"]["openAPIV3Schema"] for v in spec["versions"] if v.get("served")},
        }
    return facts


def load_documents(paths: list[Path]) -> list[dict[str, Any]]:
    return [doc for path in sorted(paths) for doc in yaml.safe_load_all(path.read_text()) if doc]


def derive_chart(folder: Path, pinned: charts.Chart) -> None:
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    # A released chart carries the pinned version; a chart read from its git tag may carry a placeholder
    # version with the release in appVersion, or (NVIDIA's) "-devel" and nothing to check against.
    named = {str(meta.get("version", "")).lstrip("v"), str(meta.get("appVersion", "")).lstrip("v")}
    if pinned.version.lstrip("v") not in named:
        if not str(meta.get("version", "")).endswith("-devel"):
            sys.exit(f"{folder}: Chart.yaml names {sorted(named)}, not the pinned {pinned.version}")
        print(f"{folder.name}: a git tree without a release version; make sure it is the {pinned.version} tag")
    out = FIXTURES / "charts" / folder.name / pinned.version
    write_json(out / "chart.json", {"name": meta["name"], "version": pinned.version,
                                    "appVersion": meta.get("appVersion"),
                                    "dependencies": meta.get("dependencies") or []})
    write_json(out / "values.json", yaml.safe_load((folder / "values.yaml").read_text()) or {})
    if (folder / "values.schema.json").is_file():
        write_json(out / "values.schema.json", json.loads((folder / "values.schema.json").read_text()))
    crds = list((folder / "crds").glob("*.yaml"))
    if crds:
        write_json(out / "crds.json", crd_facts(load_documents(crds)))


def derive_crds(folder: Path) -> None:
    match = re.fullmatch(r"(.+)-v(\d+\.\d+\.\d+.*)", folder.name)
    if not match:
        sys.exit(f"{folder}: expected <project>-v<version>")
    project, version = match.groups()
    write_json(FIXTURES / "crds" / project / version / "crds.json",
               crd_facts(load_documents(list(folder.glob("*.yaml"))), CRD_KINDS.get(project)))


def derive_dcgm(path: Path) -> None:
    match = re.fullmatch(r"dcgm-exporter-(.+)_(.+)\.csv", path.name)
    if not match:
        sys.exit(f"{path}: expected dcgm-exporter-<version>_<list>.csv")
    version, name = match.groups()
    counters = []
    for row in csv.reader(line for line in path.read_text().splitlines() if line and not line.startswith("#")):
        if len(row) >= 2:
            counters.append({"name": row[0].strip(), "type": row[1].strip(), "help": ",".join(row[2:]).strip()})
    write_json(FIXTURES / "dcgm" / version / f"{name}.json", counters)


def derive_keep_lists(path: Path) -> None:
    """Each default target's minimal-ingestion keep list: the series managed Prometheus keeps unless told more."""
    lists = {target: sorted(set(names.split("|"))) for target, names in re.findall(
        r'`default-targets-metrics-keep-list\.(\w+)` = `"([^"]+)"`', path.read_text())}
    if not lists:
        sys.exit(f"{path}: no default-targets-metrics-keep-list lines")
    write_json(FIXTURES / "metrics" / "managed-prometheus-minimal-ingestion.json", lists)


VLLM_SUFFIXES = {"gauge": ("",), "counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
"""The series prometheus_client exposes per metric kind (a counter ``vllm:x`` is scraped as ``vllm:x_total``)."""


def vllm_series(source: str) -> dict[str, list[str]]:
    """Metric name → the series it is scraped as, from vLLM's Prometheus logger source (the
    ``self._gauge_cls(name="vllm:...")`` constructors of ``vllm/v1/metrics/loggers.py``)."""
    found = re.findall(r'_(gauge|counter|histogram)_cls\(\s*name="(vllm:\w+)"', source)
    return {name: [name + suffix for suffix in VLLM_SUFFIXES[kind]] for kind, name in sorted(set(found),
                                                                                         key=lambda k: k[1])}


def derive_vllm_metrics(path: Path, version: str) -> None:
    series = vllm_series(path.read_text())
    if not series:
        sys.exit(f"{path}: no vLLM metric constructors")
    write_json(FIXTURES / "metrics" / f"vllm-{version}.json",
               {"source": f"vllm-project/vllm vllm/v1/metrics/loggers.py ({version})", "series": series})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    args = parser.parse_args()
    pins = {c.chart.rsplit("/", 1)[-1]: c for c in charts.PINNED_CHARTS}
    for folder in sorted((args.source / "charts").iterdir()):
        if folder.name in pins:
            derive_chart(folder, pins[folder.name])
    for folder in sorted((args.source / "crds").glob("*-v*")):
        derive_crds(folder)
    for path in sorted((args.source / "dcgm").glob("*.csv")):
        derive_dcgm(path)
    keep_lists = args.source / "metrics" / "prometheus-metrics-scrape-configuration-minimal.md"
    if keep_lists.is_file():
        derive_keep_lists(keep_lists)
    for path in sorted((args.source / "metrics").glob("vllm-*-loggers.py")):
        derive_vllm_metrics(path, path.name.removeprefix("vllm-").removesuffix("-loggers.py"))
    rule = args.source / "seeds" / "003" / "nfd-gpu-rule.yaml"
    if rule.is_file():
        write_json(FIXTURES / "seeds" / "003-nfd-gpu-rule.json", yaml.safe_load(rule.read_text()))


if __name__ == "__main__":
    main()
