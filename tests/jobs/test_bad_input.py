"""The job scripts as their containers run them, on the CPU: a bad argument is one line and exit status 2 (which the
Jobs' pod failure policies do not retry), a bad item is refused with one line while the others go on, and a service
that refuses connections is one line naming it, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
from unittest import mock

import pytest
import torch

from tests.docker_modules import DOCKER_DIR, import_from
from tests.helpers import unreadable

resim = import_from("jobs", "resim")
loadtest = import_from("jobs", "loadtest")


def script(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` as its container runs it (from its folder, no GPU), in this process: its exit status,
    stdout and stderr. A process per call cost 1.5 CPU-s of torch imports each."""
    path = DOCKER_DIR / "jobs" / argv[0]
    out, err = io.StringIO(), io.StringIO()
    with (mock.patch.object(sys, "argv", [str(path), *argv[1:]]),
          mock.patch.object(sys, "path", [str(path.parent), *sys.path]),
          mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "", **(env or {})}),
          contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)):
        try:
            runpy.run_path(str(path), run_name="__main__")
            code = 0
        except SystemExit as exit_:  # as the interpreter ends: a message goes to stderr with status 1
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
            if isinstance(exit_.code, str):
                print(exit_.code, file=sys.stderr)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


BAD_ARGUMENTS = [
    (["batch_predict.py", "--requests", "r", "--models", "m", "--answers", "a", "--device", "tpu"],
     "argument --device: 'tpu': allowed: auto, cpu, cuda, cuda:N"),
    (["resim.py", "--input", "i", "--output", "o", "--shards", "0"],
     "argument --shards: '0' is not a whole number >= 1"),
    (["train.py", "--checkpoints", "c", "--steps", "-5"], "argument --steps: '-5' is not a whole number >= 1"),
    (["train.py", "--checkpoints", "c", "--lr", "nan"], "argument --lr: 'nan' is not a number > 0"),
    (["gpu_check.py", "--gpus", "1", "--min-tflops", "1", "--memory-fraction", "1.5"],
     "argument --memory-fraction: '1.5' is not a fraction in (0, 1]"),
    (["allreduce.py", "--min-bytes", "4096", "--max-bytes", "1024"], "--min-bytes 4096 is above --max-bytes 1024"),
    (["gpu_load.py", "--size", "0"], "argument --size: '0' is not a whole number >= 1"),
    (["loadtest.py", "--targets", "infer-1/api/answer"], "argument --targets: 'infer-1/api/answer' is not an http"),
    (["llm_loadtest.py", "--url", "http://llm/v1", "--model", "m", "--concurrency", "0"],
     "argument --concurrency: '0' is not a whole number >= 1"),
    (["predict.py", "--checkpoints", "c", "--port", "70000"], "argument --port: '70000' is not a TCP port"),
    (["resim.py", "--input", "i", "--output", "o", "--shards", "2"],
     "JOB_COMPLETION_INDEX='' is not a shard index; run as an Indexed Job or pass --index"),
]


@pytest.mark.parametrize("argv, text", BAD_ARGUMENTS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in BAD_ARGUMENTS])
def test_a_bad_argument_is_one_line_and_exit_status_2(argv, text):
    result = script(*argv)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and text in line


def test_the_bad_input_exit_status_is_the_one_the_jobs_fail_at_once_on():
    """The program's pod failure policies name the code the scripts exit with (components/kubernetes/pods.py)."""
    from components.kubernetes.pods import BAD_INPUT_EXIT_CODE
    assert import_from("jobs", "jobio").EXIT_BAD_INPUT == BAD_INPUT_EXIT_CODE


def test_a_recording_that_cannot_be_read_fails_the_shard_for_a_retry_after_the_others(tmp_path, monkeypatch, capsys):
    """An I/O error on the blob mount counted as a refusal and the shard exited 0: a Complete Job without results,
    its retries never used. The others are simulated, the shard exits 1 (retried), and the retry finishes it."""
    source = tmp_path / "input"
    source.mkdir()
    for name in ("a.bin", "b.bin", "c.bin"):
        (source / name).write_bytes(b"\x01" * 300)
    unreadable(monkeypatch, "b.bin", OSError(5, "Input/output error"))
    argv = ["--input", str(source), "--output", str(tmp_path / "out"), "--shards", "1", "--index", "0",
            "--device", "cpu"]
    with pytest.raises(SystemExit) as exit_info:
        resim.main(argv)
    assert exit_info.value.code == resim.EXIT_RETRY != resim.EXIT_USAGE
    captured = capsys.readouterr()
    assert "shard 0: could not read b.bin: Input/output error" in captured.out.splitlines()
    assert json.loads(captured.out.splitlines()[-1])["processed"] == 2
    (line,) = captured.err.splitlines()
    assert line.startswith("error: shard 0: 1 recording(s) could not be read")
    # The retry: b.bin only, the others are skipped, and the shard succeeds.
    monkeypatch.undo()
    summary = resim.main(argv)
    assert (summary["processed"], summary["skipped"], summary["unread"]) == (1, 2, 0)


def test_an_empty_input_folder_is_nothing_to_do(tmp_path):
    (tmp_path / "input").mkdir()
    assert resim.run(tmp_path / "input", tmp_path / "out", 0, 1, torch.device("cpu"))["files"] == 0


def test_a_service_that_refuses_connections_is_one_line_naming_it(capsys):
    """The load test printed a traceback per thread; a key in a target's query is not printed either."""
    dead = "http://127.0.0.1:9/api/answer?code=function-key"
    report = loadtest.run([dead, "http://127.0.0.1:9/other"], 2, timeout=2)
    captured = capsys.readouterr()
    assert report["failed"] and "Traceback" not in captured.err and "function-key" not in captured.err + captured.out
    (line,) = captured.err.splitlines()  # the first service failed: nothing else was timed
    assert line.startswith("error: http://127.0.0.1:9/api/answer?<hidden>: ") and "refused" in line
    assert json.loads(captured.out) == report


def test_the_load_test_exits_1_with_its_report_when_a_service_fails():
    result = script("loadtest.py", "--targets", "http://127.0.0.1:9/api/answer", "--requests", "1",
                    "--timeout", "2")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert json.loads(result.stdout)["failed"] == [result.stderr.strip().removeprefix("error: ")]
