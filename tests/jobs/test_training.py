"""Training on the CPU: checkpoints, a kill and a resume that ends where an uninterrupted run ends."""

from __future__ import annotations

import gzip
import json
import pickle
import struct
from pathlib import Path, PurePosixPath

import pytest
import torch

from tests.docker_modules import import_from

train = import_from("jobs", "train")
checkpoints = import_from("jobs", "checkpoints")
digits = import_from("jobs", "digits")

FAST = ["--steps", "40", "--checkpoint-every", "10", "--batch-size", "32", "--data", "synthetic", "--device", "cpu"]


def run(folder, *extra):
    return train.train(train.parse_args(["--checkpoints", str(folder), *FAST, *extra]))


def final_weights(folder):
    step, state = checkpoints.load_newest(folder)
    return step, state["model"]


def test_killed_training_resumes_and_ends_with_the_uninterrupted_weights(tmp_path):
    whole = run(tmp_path / "whole")
    assert whole["done"] and whole["resumed_from"] == 0

    first = run(tmp_path / "killed", "--stop-after", "25")  # killed between checkpoints 20 and 30
    assert not first["done"] and first["step"] == 25
    second = run(tmp_path / "killed")
    assert second["resumed_from"] == 20 and second["done"]

    step_a, a = final_weights(tmp_path / "whole")
    step_b, b = final_weights(tmp_path / "killed")
    assert step_a == step_b == 40
    assert all(torch.equal(a[k], b[k]) for k in a)
    # What the spot drill compares: the summaries' digest of those weights.
    assert second["weights_sha256"] == whole["weights_sha256"] == train.weights_sha256(a)


def test_a_paced_run_lasts_its_seconds_from_step_0_only_and_ends_with_the_unpaced_weights(tmp_path, monkeypatch):
    """The spot drill's run (ops/e2e/drill.py) must still run when Azure's eviction lands, minutes after the call,
    whatever the GPU: ``--pace-seconds`` spreads a run from step 0 over that time by sleeping, and a resumed process
    runs at full speed. Sleeping changes nothing it computes."""
    whole = run(tmp_path / "whole")
    clock, slept = [0.0], []  # a clock that only sleeping moves on

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds
    monkeypatch.setattr(train.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(train.time, "sleep", sleep)
    paced = run(tmp_path / "paced", "--pace-seconds", "4")
    assert paced["weights_sha256"] == whole["weights_sha256"]
    assert len(slept) == 40 and clock[0] == pytest.approx(4 * 39 / 40)  # the last step starts at 39/40 of 4 s
    slept.clear()
    run(tmp_path / "resumed", "--stop-after", "25")
    resumed = run(tmp_path / "resumed", "--pace-seconds", "4")
    assert resumed["resumed_from"] == 20 and slept == []


def test_the_weights_digest_tells_runs_apart_and_a_rerun_of_a_finished_run_prints_it_again(tmp_path):
    seeded = run(tmp_path / "seed-1", "--seed", "1")
    whole = run(tmp_path / "seed-0")
    assert len(whole["weights_sha256"]) == 64 and seeded["weights_sha256"] != whole["weights_sha256"]
    assert run(tmp_path / "seed-0")["weights_sha256"] == whole["weights_sha256"]  # nothing trained, same weights
    _, weights = final_weights(tmp_path / "seed-0")
    nudged = {**weights, "classifier.bias": weights["classifier.bias"].clone()}
    nudged["classifier.bias"][0] = torch.nextafter(nudged["classifier.bias"][0], torch.tensor(1.0))
    assert train.weights_sha256(nudged) != whole["weights_sha256"]  # one bit of one weight


def test_each_process_says_when_it_took_its_first_step_and_from_where(tmp_path, capsys):
    run(tmp_path, "--stop-after", "25")
    run(tmp_path)
    firsts = [line for line in capsys.readouterr().out.splitlines() if "first of this process" in line]
    assert firsts == [train.FIRST_STEP.format(step=1, steps=40, start=0),
                      train.FIRST_STEP.format(step=21, steps=40, start=20)]


def test_training_learns_the_synthetic_digits(tmp_path):
    summary = run(tmp_path)
    assert summary["loss"] < 1.8  # chance is ln(10) = 2.30 after 40 small steps
    assert summary["data"] == "synthetic" and summary["device"] == "cpu"


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    run(tmp_path, "--keep", "2")
    assert [step for step, _ in checkpoints.list_checkpoints(tmp_path)] == [40, 30]


def test_a_damaged_newest_checkpoint_is_skipped_for_the_one_before(tmp_path):
    run(tmp_path, "--stop-after", "30")
    checkpoints.checkpoint_path(tmp_path, 30).write_bytes(b"truncated by an eviction")
    assert run(tmp_path)["resumed_from"] == 20


class Planted:
    """What someone with write access to the checkpoint volume could leave there: unpickling it calls a function of
    their choice (here ``Path.touch`` on a marker file)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_planted_pickle_payload_is_refused_and_readers_use_the_checkpoint_before_it(tmp_path, capsys):
    run(tmp_path, "--stop-after", "10")
    marker = tmp_path / "code-ran"
    planted = checkpoints.checkpoint_path(tmp_path, 20)
    torch.save({"model": Planted(marker), "step": 20}, planted)
    with pytest.raises(pickle.UnpicklingError):
        checkpoints.load(planted)
    step, state = checkpoints.load_newest(tmp_path)
    assert step == 10 and set(state) >= {"model", "optimizer", "rng"}
    assert "skipping refused checkpoint ckpt-00000020.pt: Unsupported global: GLOBAL getattr" in \
        capsys.readouterr().out.splitlines()
    assert not marker.exists()


def test_a_refused_newest_checkpoint_stops_training_with_one_line_and_exit_2(tmp_path, capsys):
    """Skipped, it restarted training from the step before it (from 0 where it was alone), and with --keep 1 every new
    checkpoint was pruned straight after saving while the refused one (the highest step) stayed."""
    run(tmp_path, "--stop-after", "10")
    refused = checkpoints.checkpoint_path(tmp_path, 20)
    torch.save({"model": {}, "note": PurePosixPath("written by another tool")}, refused)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run(tmp_path, "--keep", "1")
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"error: checkpoint ckpt-00000020.pt is refused by torch's safe loader (Unsupported global: "
                    f"GLOBAL pathlib.PurePosixPath): it holds objects train.py never writes; move it out of {tmp_path} "
                    "to resume from the one before")
    assert [s for s, _ in checkpoints.list_checkpoints(tmp_path)] == [20, 10]  # nothing written, nothing pruned
    refused.rename(tmp_path / "refused-ckpt-00000020.pt")
    assert run(tmp_path, "--keep", "1")["resumed_from"] == 10


def test_a_rerun_of_a_finished_training_prints_strict_json_with_a_null_loss(tmp_path, capsys):
    """It printed "loss": NaN, which is not JSON (RFC 8259)."""
    run(tmp_path)
    capsys.readouterr()
    assert run(tmp_path)["loss"] is None

    def strict(constant):
        raise AssertionError(f"{constant} in the summary")
    summary = json.loads(capsys.readouterr().out.splitlines()[-1], parse_constant=strict)
    assert summary["loss"] is None and summary["done"] and summary["resumed_from"] == 40


def test_a_half_written_checkpoint_is_cleaned_up_and_never_read(tmp_path):
    run(tmp_path, "--stop-after", "10")
    partial = tmp_path / ".ckpt-00000020.pt.tmp-4242"
    partial.write_bytes(b"half")
    assert run(tmp_path)["resumed_from"] == 10
    assert not partial.exists()


def test_batches_depend_only_on_seed_and_step():
    images, labels = digits.synthetic_digits(seed=1, size=256)
    a = digits.batch_for_step(images, labels, seed=1, step=7, batch_size=16)
    b = digits.batch_for_step(images, labels, seed=1, step=7, batch_size=16)
    c = digits.batch_for_step(images, labels, seed=1, step=8, batch_size=16)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[0], c[0])


def test_auto_data_falls_back_to_synthetic_when_mnist_is_unreachable(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(digits.urllib.request, "urlopen", offline)
    name, images, labels = digits.load_dataset("auto", tmp_path, seed=0)
    assert name == "synthetic" and images.shape[1:] == (1, 28, 28)
    with pytest.raises(OSError):
        digits.load_dataset("mnist", tmp_path, seed=0)


def test_cached_mnist_files_are_parsed_as_idx(tmp_path):
    pixels = bytes(range(0, 256, 64)) * 392  # 2 images of 28x28
    images = struct.pack(">HBBIII", 0, 8, 3, 2, 28, 28) + pixels[: 2 * 784]
    labels = struct.pack(">HBBI", 0, 8, 1, 2) + bytes([3, 7])
    (tmp_path / digits.MNIST_FILES["images"]).write_bytes(gzip.compress(images))
    (tmp_path / digits.MNIST_FILES["labels"]).write_bytes(gzip.compress(labels))
    name, x, y = digits.load_dataset("mnist", tmp_path, seed=0)
    assert name == "mnist" and x.shape == (2, 1, 28, 28) and y.tolist() == [3, 7]
    assert float(x.max()) <= 1.0
