"""The GPU node gate's acceptance check, on the CPU, against a sysfs tree laid out as a node's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.docker_modules import DOCKER_DIR, import_from

gpu_check = import_from("jobs", "gpu_check")


def run(*args: str, sysfs=None) -> dict:
    argv = ["--device", "cpu", "--gpus", "1", "--size", "64", "--iterations", "2", *args]
    return gpu_check.check(gpu_check.parse_args(argv + (["--sysfs", str(sysfs)] if sysfs else [])))


def infiniband(root, *ports: tuple[str, str]):
    """A sysfs tree with one InfiniBand device per (state, rate), as ``/sys/class/infiniband/mlx5_N/ports/1``."""
    for i, (state, rate) in enumerate(ports):
        port = root / "class" / "infiniband" / f"mlx5_ib{i}" / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(f"{state}\n")
        (port / "rate").write_text(f"{rate}\n")
    return root


def test_a_gpu_at_its_rate_with_sound_memory_passes():
    report = run("--min-tflops", "0")
    (gpu,) = report["gpus"]
    assert report["verdict"] == "pass" and report["failures"] == []
    assert gpu["memory_ok"] is True and gpu["memory_gib_tested"] > 0 and gpu["name"] == "cpu"


def test_a_slow_gpu_and_a_missing_one_fail_naming_what_they_found():
    report = run("--min-tflops", "1000000", "--gpus", "2")
    assert report["verdict"] == "fail"
    assert report["failures"][0] == "1 GPU(s) visible, the node's size has 2"
    assert "TFLOPS bf16, below 1000000.0" in report["failures"][1]


def test_memory_that_reads_back_wrong_fails(monkeypatch):
    real = gpu_check.torch.empty

    def flipped(*args, **kwargs):
        """A block whose last word loses a bit after every fill: a stuck memory cell."""
        block = real(*args, **kwargs)
        fill = block.fill_

        def fill_and_flip(value):
            fill(value)
            block[-1] ^= 1 << 3
            return block

        block.fill_ = fill_and_flip
        return block

    monkeypatch.setattr(gpu_check.torch, "empty", flipped)
    assert run("--min-tflops", "0")["failures"] == ["cpu (cpu): memory read back wrong"]


NDR = "400 Gb/sec (4X NDR)"


@pytest.mark.parametrize("ports, failure", [
    ([("4: ACTIVE", NDR)] * 8, None),
    ([("4: ACTIVE", NDR)] * 7 + [("1: DOWN", "10 Gb/sec (4X SDR)")], "7 of 8 InfiniBand ports ACTIVE at 400 Gb/s"),
    # A port that trained at a lower rate is as bad as a down one.
    ([("4: ACTIVE", NDR)] * 7 + [("4: ACTIVE", "200 Gb/sec (4X HDR)")], "7 of 8 InfiniBand ports ACTIVE at 400 Gb/s"),
], ids=["all-up", "one-down", "one-slow"])
def test_every_infiniband_port_must_be_active_at_its_rate(tmp_path, ports, failure):
    report = run("--min-tflops", "0", "--ib-ports", "8", "--ib-rate-gbps", "400", sysfs=infiniband(tmp_path, *ports))
    assert report["failures"] == ([failure] if failure else [])
    assert len(report["infiniband"]["ports"]) == 8


def test_the_script_prints_one_json_report_and_exits_1_on_a_failure():
    result = subprocess.run([sys.executable, "gpu_check.py", "--device", "cpu", "--gpus", "1", "--size", "32",
                             "--iterations", "1", "--min-tflops", "1000000"],
                            capture_output=True, text=True, cwd=DOCKER_DIR / "jobs", check=False)
    assert result.returncode == 1
    assert json.loads(result.stdout.strip().splitlines()[-1])["verdict"] == "fail"
