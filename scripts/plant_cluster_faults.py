"""Plant one fault of each kind the cluster tests exist for, and show that the test meant to catch it fails.

Each fault is a one-line change to the product code, made in a throwaway git worktree of HEAD; there the cluster
tests of one stack run (tests/test_on_cluster.py, on the test control plane of testcluster/), and the fault counts as
caught when the test named for it fails. The result is written as JSON (docs/results/cluster-planted-faults.json):

    python scripts/plant_cluster_faults.py [--only NAME ...] [--json docs/results/cluster-planted-faults.json]

Needs what the cluster tests need (the project's .venv, Go for the first build of testcluster/).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Fault:
    name: str
    path: str
    old: str
    new: str
    stack: str
    test: str
    """The test (a substring of its name) that must fail."""


FAULTS = (
    Fault("refused on apply: a protocol the API server does not know", "components/kubernetes/network_policy.py",
          '"ports": [{"protocol": "UDP", "port": 53}', '"ports": [{"protocol": "UDPX", "port": 53}', "dev",
          "accepted_by_the_api_server"),
    Fault("changed by a second apply: an explicit empty ingress list", "components/kubernetes/network_policy.py",
          '{"policyTypes": ["Ingress", "Egress"], "egress": [DNS]}',
          '{"policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": [DNS]}', "dev", "second_apply"),
    Fault("a Job that Pulumi would patch in place under its fixed name", "components/gpu/nvidia_smi.py",
          "delete_before_replace=True),", "delete_before_replace=False),", "dev", "changed_job_template"),
    Fault("a pod that cannot land on its pool: the pool's taints not tolerated", "components/kubernetes/pods.py",
          'spec["tolerations"] = pool.tolerations', 'spec["tolerations"] = []', "dev", "runs_on_its_pool"),
    Fault("a queued run Kueue never admits: no GPU quota", "components/autoscaling/kueue.py",
          '"nvidia.com/gpu": str(nodes * pool.gpu.per_node)}', '"nvidia.com/gpu": "0"}', "training-autoscale",
          "on_demand_run"),
    Fault("repair that drains a pool which cannot replace the node", "components/gpu/node_repair_job.py",
          "return self.min_count != self.max_count and nodes < self.max_count", "return True",
          "gpu-sharing-mig", "node_repair"),
    Fault("pull-ahead pods that do not tolerate their GPU pool's taint", "components/images/pull_ahead.py",
          'spec["tolerations"] = merged_tolerations(spec["tolerations"], [GATE_TOLERATION])',
          'spec["tolerations"] = [t for t in spec["tolerations"] if t["key"] != "sku"]', "dev", "pull_ahead"),
    Fault("a destroy held by the checkpoint claim's protection: runs not owned by it",
          "stacks/distributed_training/workloads.py", "queue_labels(args.queue), claim), ns, TRAIN_RUN, after, claim)",
          "queue_labels(args.queue)), ns, TRAIN_RUN, after)", "distributed-training", "leaves_nothing_behind"),
    Fault("an InfiniBand namespace that admits a hostPath volume", "components/kubernetes/security.py",
          '("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))", "no hostPath volume"),', "",
          "distributed-training", "infiniband_namespace"),
)


def plant(fault: Fault, python: Path) -> dict:
    """Run the fault's stack's cluster tests with the fault planted; which tests failed, and how long it took."""
    with tempfile.TemporaryDirectory(prefix="planted-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), "HEAD"],
                       check=True)
        try:
            target = tree / fault.path
            text = target.read_text()
            if text.count(fault.old) != 1:
                raise SystemExit(f"{fault.name}: {fault.path} holds {text.count(fault.old)} copies of the line")
            target.write_text(text.replace(fault.old, fault.new))
            start = time.monotonic()
            run = subprocess.run(
                [str(python), "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider",
                 "tests/test_on_cluster.py", "--stack", fault.stack, "-rf"],
                cwd=tree, capture_output=True, text=True)
            failed = sorted(set(re.findall(r"^FAILED tests/test_on_cluster.py::(\w+)", run.stdout, re.MULTILINE)))
            return {"fault": fault.name, "change": f"{fault.path}: {fault.old!r} -> {fault.new!r}",
                    "stack": fault.stack, "expected_to_fail": fault.test, "failed": failed,
                    "caught": any(fault.test in name for name in failed),
                    "summary": run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-300:],
                    "seconds": round(time.monotonic() - start, 1)}
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="substrings of the faults' names to plant")
    parser.add_argument("--json", type=Path, help="where to write the results")
    args = parser.parse_args()
    python = REPO / ".venv" / "bin" / "python"
    results = []
    for fault in FAULTS:
        if args.only and not any(o in fault.name for o in args.only):
            continue
        found = plant(fault, python)
        print(f"{'caught' if found['caught'] else 'MISSED'}: {fault.name} ({found['summary']})", flush=True)
        results.append(found)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["caught"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
