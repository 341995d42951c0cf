"""Re-simulation shards on the CPU, with temporary folders standing in for the input and output volumes."""

from __future__ import annotations

import json

import pytest
import torch

from tests.docker_modules import import_from

resim = import_from("jobs", "resim")
CPU = torch.device("cpu")


@pytest.fixture
def volumes(tmp_path):
    source, output = tmp_path / "input", tmp_path / "output"
    for i in range(7):
        path = source / f"drive-{i % 2}" / f"recording-{i:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes((i * 37 + j) % 256 for j in range(3000 + 500 * i)))
    return source, output


def results(output):
    return {p.relative_to(output).as_posix(): json.loads(p.read_text()) for p in output.rglob("*.result.json")}


def test_shards_cover_every_input_exactly_once():
    files = [f"f{i:02d}" for i in range(23)]
    parts = [resim.shard(files, i, 5) for i in range(5)]
    assert sorted(f for part in parts for f in part) == files
    assert len({f for part in parts for f in part}) == 23


def test_each_index_writes_one_result_per_input_it_owns(volumes):
    source, output = volumes
    for index in range(3):
        resim.run(source, output, index, 3, CPU)
    done = results(output)
    assert len(done) == 7
    assert {r["input"] for r in done.values()} == set(resim.input_files(source))
    files = resim.input_files(source)
    assert all(r["input"] in resim.shard(files, r["shard"], 3) for r in done.values())
    assert not list(output.rglob(".*.tmp-*"))


def test_a_crashed_shard_reruns_without_losing_or_repeating_work(volumes, tmp_path):
    source, output = volumes
    reference = tmp_path / "reference"
    resim.run(source, reference, 0, 2, CPU)

    with pytest.raises(RuntimeError, match="simulated crash"):
        resim.run(source, output, 0, 2, CPU, fail_after=2)
    first = results(output)
    assert len(first) == 2
    # An eviction mid-write leaves a temporary file; the retry removes it and never reads it.
    target = resim.result_path(output, resim.shard(resim.input_files(source), 0, 2)[2])
    target.parent.mkdir(parents=True, exist_ok=True)
    (target.parent / f".{target.name}.tmp-node-1").write_text("{half")

    summary = resim.run(source, output, 0, 2, CPU)
    assert summary["skipped"] == 2 and summary["processed"] == 2 and summary["partials_removed"] == 1
    assert results(output) == results(reference)
    assert not list(output.rglob(".*.tmp-*"))


def test_results_are_deterministic(volumes, tmp_path):
    source, _ = volumes
    resim.run(source, tmp_path / "a", 1, 2, CPU)
    resim.run(source, tmp_path / "b", 1, 2, CPU)
    assert results(tmp_path / "a") == results(tmp_path / "b")


@pytest.mark.parametrize("index, shards", [(3, 3), (-1, 3)])
def test_a_bad_index_fails_with_the_no_retry_exit_code(volumes, index, shards):
    source, output = volumes
    with pytest.raises(SystemExit) as exit_info:
        resim.run(source, output, index, shards, CPU)
    assert exit_info.value.code == resim.EXIT_USAGE


def test_a_missing_input_volume_fails_with_the_no_retry_exit_code(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        resim.run(tmp_path / "not-mounted", tmp_path / "out", 0, 1, CPU)
    assert exit_info.value.code == resim.EXIT_USAGE


def test_the_index_comes_from_the_indexed_job(volumes, monkeypatch):
    source, output = volumes
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    summary = resim.main(["--input", str(source), "--output", str(output), "--shards", "2", "--device", "cpu"])
    assert summary["shard"] == 1 and summary["files"] == 3
