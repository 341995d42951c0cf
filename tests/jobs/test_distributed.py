"""The training code under torchrun with two CPU processes (gloo): rendezvous, sharding, checkpoints,
a lost process, a resume, and the all-reduce check. The same code runs on N GPUs and N nodes with NCCL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import torch

from tests.docker_modules import DOCKER_DIR, import_from

train = import_from("jobs", "train")
checkpoints = import_from("jobs", "checkpoints")
allreduce = import_from("jobs", "allreduce")
launch = import_from("jobs", "launch")

# One worker runs these one after another: two torchrun groups at once on two cores (pytest-xdist's workers) left
# gloo's ranks waiting on descheduled peers, a quarter more CPU time for the same runs.
pytestmark = pytest.mark.xdist_group("torchrun")

STEPS = ["--steps", "30", "--checkpoint-every", "10", "--batch-size", "32", "--data", "synthetic", "--device", "cpu"]


def torchrun(script: str, *args: str, processes: int = 2, restarts: int = 0,
             launch: bool = False) -> subprocess.CompletedProcess:
    """torchrun --standalone: a rendezvous on this machine, as the engine's pods hold one across nodes; ``launch``:
    through launch.py, as the JobSet's pods start it.

    The environment is the training pods' (TORCH_RESTART_ENV); gloo talks over loopback here."""
    env = {**os.environ, **train.TORCH_RESTART_ENV, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # torchrun's script
    start = [sys.executable, str(DOCKER_DIR / "jobs" / "launch.py"), "torchrun"] if launch else \
        [sys.executable, "-m", "torch.distributed.run"]
    return subprocess.run(
        [*start, "--standalone", f"--nproc-per-node={processes}", f"--max-restarts={restarts}",
         str(DOCKER_DIR / "jobs" / script), *args],
        capture_output=True, text=True, env=env, timeout=240, check=False)


def summary(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])


def weights(folder):
    step, state = checkpoints.load_newest(folder)
    return step, state


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("two")
    return folder, summary(torchrun("train.py", "--checkpoints", str(folder), *STEPS, launch=True))


def test_one_worker_runs_the_torchrun_group(request):
    """pytest-xdist sends a group to one worker by suffixing its items' node ids (xdist/remote.py); pytest 9.2 builds
    node ids another way and every group was silently ignored (pytest-dev/pytest-xdist#1386): pyproject.toml pins
    pytest below it, and this fails where a bump breaks it again. It holds every group of the suite: these, the
    module fixtures others make once, and tests/test_on_cluster.py's, which put each stack on its control plane."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not under pytest-xdist --dist loadgroup (make test runs it so)")
    assert request.node.nodeid.endswith("@torchrun")


def test_two_processes_take_the_steps_one_process_takes(two_process_run, tmp_path):
    folder, report = two_process_run
    assert report["processes"] == 2 and report["done"]
    train.train(train.parse_args(["--checkpoints", str(tmp_path), *STEPS]))
    (step_two, two), (step_one, one) = weights(folder), weights(tmp_path)
    assert step_two == step_one == 30 and two["processes"] == 2 and one["processes"] == 1
    # Each process's half of the batch, gradients averaged: the same steps up to summation order.
    for key, value in one["model"].items():
        torch.testing.assert_close(two["model"][key], value, rtol=0, atol=1e-3)


def test_a_run_that_loses_a_process_resumes_to_the_uninterrupted_weights(two_process_run, tmp_path):
    result = torchrun("train.py", "--checkpoints", str(tmp_path), *STEPS, "--fail-at-step", "15", restarts=1)
    report = summary(result)
    assert "rank 1 failing at step 15" in result.stdout
    assert report["resumed_from"] == 10 and report["done"]  # the restarted group went back to step 10
    (_, whole), (_, resumed) = weights(two_process_run[0]), weights(tmp_path)
    assert all(torch.equal(whole["model"][k], resumed["model"][k]) for k in whole["model"])
    assert all(torch.equal(a, b) for a, b in zip(whole["optimizer"]["state"][0].values(),
                                                  resumed["optimizer"]["state"][0].values(), strict=True))


def test_a_run_without_restarts_fails_when_a_process_is_lost(tmp_path):
    result = torchrun("train.py", "--checkpoints", str(tmp_path), *STEPS, "--fail-at-step", "15")
    assert result.returncode != 0
    assert [step for step, _ in checkpoints.list_checkpoints(tmp_path)] == [10]


def test_a_refused_checkpoint_stops_the_launch_with_exit_2_before_any_worker_starts(tmp_path):
    """Final audit: under torchrun the leader's exit 2 became torchrun's 1 (ChildFailedError; torch
    distributed/elastic/multiprocessing/errors), which the Job's pod failure policy cannot tell from a lost node, so
    JobSet restarted every node maxRestarts times. The launcher refuses before torchrun starts."""
    train.train(train.parse_args(["--checkpoints", str(tmp_path), *STEPS, "--stop-after", "10"]))
    refused = checkpoints.checkpoint_path(tmp_path, 20)
    torch.save({"model": {}, "note": PurePosixPath("written by another tool")}, refused)
    launched = torchrun("train.py", "--checkpoints", str(tmp_path), *STEPS, launch=True)
    assert launched.returncode == 2 and not launched.stdout
    assert launched.stderr.splitlines() == [
        f"error: checkpoint ckpt-00000020.pt is refused by torch's safe loader (Unsupported global: GLOBAL "
        f"pathlib.PurePosixPath): it holds objects train.py never writes; move it out of {tmp_path} to resume "
        "from the one before"]
    assert [step for step, _ in checkpoints.list_checkpoints(tmp_path)] == [20, 10]


@pytest.mark.parametrize(("args", "error"), [
    (["--batch-size", "33"], "error: argument --batch-size: 33 does not split over 2 processes: use a multiple of 2"),
    (["--steps", "0"], "error: argument --steps: '0' is not a whole number >= 1 (see train.py --help)"),
])
def test_a_bad_argument_stops_the_launch_with_exit_2_before_any_worker_starts(tmp_path, args, error, capsys,
                                                                              monkeypatch):
    """launch.py's main in this process (the process and its exit 2 are the refused checkpoint's test above): an
    interpreter and torch's import per case, and torchrun would replace this process if the check let it start."""
    monkeypatch.setattr(launch.os, "execvp", lambda *command: pytest.fail(f"torchrun started: {command}"))
    with pytest.raises(SystemExit) as e:
        launch.main(["torchrun", "--standalone", "--nproc-per-node=2", "--max-restarts=0",
                     str(DOCKER_DIR / "jobs" / "train.py"), "--checkpoints", str(tmp_path), *STEPS, *args])
    output = capsys.readouterr()
    assert (e.value.code, output.out, output.err.splitlines()) == (2, "", [error])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("nnodes", "per_node", "processes"), [
    ("2", "8", 16), ("2:2", "8", 16), ("1:4", "8", None), ("2", "gpu", None), ("1", "auto", None)])
def test_the_launch_knows_the_process_count_only_where_the_command_fixes_it(nnodes, per_node, processes):
    assert launch.processes(nnodes, per_node) == processes


def test_the_launch_starts_only_torchrun(capsys):
    with pytest.raises(SystemExit) as e:
        launch.main(["python", "train.py"])
    assert e.value.code == 2 and capsys.readouterr().err.startswith("error: the command must start with torchrun")


def test_a_batch_that_does_not_split_over_the_processes_is_refused(tmp_path, capsys):
    process_group = import_from("jobs", "process_group")
    two = process_group.World(rank=0, size=2, device=torch.device("cpu"))  # refused before any collective
    with pytest.raises(SystemExit) as e:
        train._train(train.parse_args(["--checkpoints", str(tmp_path), *STEPS, "--batch-size", "33"]), two)
    assert e.value.code == 2 and capsys.readouterr().err == (
        "error: argument --batch-size: 33 does not split over 2 processes: use a multiple of 2\n")


def test_the_allreduce_check_sums_right_and_reports_bus_bandwidth():
    result = torchrun("allreduce.py", "--device", "cpu", "--min-bytes", "65536", "--max-bytes", "1048576",
                      "--iterations", "3", "--warmup", "1", "--expect-busbw", "0.0001")
    report = summary(result)
    assert report["verdict"] == "pass" and report["backend"] == "gloo" and report["processes"] == 2
    assert [r["bytes"] for r in report["sizes"]] == [65536, 262144, 1048576]
    # Two processes: each link carries 2(n-1)/n = 1 times the data, so bus and algorithm bandwidth agree.
    assert all(r["busbw_gbps"] == pytest.approx(r["algbw_gbps"], abs=0.011) for r in report["sizes"])
    assert all(r["time_us"] > 0 and r["algbw_gbps"] > 0 for r in report["sizes"])


def test_the_allreduce_verdict_holds_the_best_bus_bandwidth_to_the_sizes_baseline():
    """Microsoft's ND H100 v5 baseline: ~450 GB/s, warn below 400, faulty (drain, report) below 300."""
    rows = [allreduce.row(1 << 20, 1e-4, 16), allreduce.row(1 << 30, 0.05, 16)]
    best = rows[1]["busbw_gbps"]
    assert best == pytest.approx(1.0737 * 2 * 15 / 16 * 20, rel=1e-3)  # 40.3 GB/s
    assert allreduce.verdict(rows, 45.0, 40.0, 30.0, True)["verdict"] == "pass"
    assert allreduce.verdict(rows, 45.0, 41.0, 30.0, True)["verdict"] == "slow"
    assert allreduce.verdict(rows, 45.0, 41.0, 40.5, True)["verdict"] == "faulty"
    assert allreduce.verdict(rows, 45.0, 41.0, None, True)["verdict"] == "slow"
    assert allreduce.verdict(rows, 40.0, None, None, True)["verdict"] == "pass"  # the whole expectation
    assert allreduce.verdict(rows, None, None, None, True)["verdict"] == "measured"
    assert allreduce.verdict(rows, 45.0, 40.0, 30.0, False)["verdict"] == "wrong-sum"
    assert allreduce.EXIT_CODES == {"pass": 0, "measured": 0, "slow": 1, "wrong-sum": 2, "faulty": 3}


def test_each_process_takes_its_own_equal_slice_of_the_global_batch():
    process_group = import_from("jobs", "process_group")
    batch = torch.arange(8)
    halves = [process_group.World(rank=r, size=2, device=torch.device("cpu")).shard(batch) for r in (0, 1)]
    assert torch.equal(halves[0], torch.arange(4)) and torch.equal(halves[1], torch.arange(4, 8))


def test_the_gpu_benchmark_reads_the_link_between_two_gpus_from_nvidia_smi():
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_distributed",
                                                  DOCKER_DIR.parent / "scripts" / "benchmark_distributed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    topology = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n")
    assert bench.link_between_first_two(topology) == "NV18"
    assert bench.link_allows("NV18")[0] == 450.0  # 900 GB/s both ways over 18 links
    assert bench.link_allows("SYS")[0] == 64.0
    log = ("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
           "NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM/read")
    assert bench.nccl_paths(log) == ["via P2P/CUMEM/read"]
