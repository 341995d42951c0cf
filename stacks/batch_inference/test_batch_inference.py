"""The batch-inference scenario: a CronJob that fires on its schedule, queued, on the pool that scales from zero,
with its own identity; and the batch script on the CPU (answers, skips what is answered, survives a killed run)."""

from __future__ import annotations

import json
import re

import pytest

from program.config.errors import ConfigError
from stacks.batch_inference.deploy import DOWNLOAD_ANSWERS, RUN_NOW, UPLOAD_MODEL, UPLOAD_REQUESTS
from tests.docker_modules import import_from
from tests.helpers import PUBLIC, QUEUE_LABEL, allowed, data_identities, load, pod_spec, stack_config_of, unreadable

STACK = "batch-inference"
CRONJOB = "kubernetes:batch/v1:CronJob"
train = import_from("jobs", "train")
batch = import_from("jobs", "batch_predict")
digits = import_from("jobs", "digits")


@pytest.fixture(scope="module")
def r(render_of):
    return render_of(STACK)


def test_the_run_fires_on_its_schedule_in_its_time_zone_and_never_overlaps(r):
    cron = r.named("batch-cronjob", CRONJOB).revealed["spec"]
    assert (cron["schedule"], cron["timeZone"], cron["suspend"]) == ("0 2 * * *", "Etc/UTC", False)
    assert cron["concurrencyPolicy"] == "Forbid" and cron["startingDeadlineSeconds"] > 0


def test_the_run_is_queued_on_the_pool_that_scales_from_zero_with_one_gpu(r):
    cron = r.named("batch-cronjob", CRONJOB)
    job = cron.revealed["spec"]["jobTemplate"]
    assert job["metadata"]["labels"][QUEUE_LABEL] == "gpu-jobs"
    assert "kueue-release" in cron.depends_on or "kueue" in cron.depends_on
    pod = pod_spec(cron.revealed)
    assert pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "t4"} and r.cfg.gpu_pool("t4").min_count == 0
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "FailJob", "onExitCodes": {"containerName": "batch-predict", "operator": "In",
                                                 "values": [batch.NO_MODEL_EXIT_CODE]}} in rules


def test_the_run_reads_requests_and_models_and_writes_only_answers_as_its_own_identity(r):
    pod = pod_spec(r.named("batch-cronjob", CRONJOB).revealed)
    assert pod["serviceAccountName"] == "batch" and data_identities(r) == {"id-batch-inference-batch"}
    volumes = {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert volumes["requests"]["readOnly"] and volumes["models"]["readOnly"] and not volumes["answers"].get("readOnly")
    # Blobs are mounted by the node's CSI plugin: the run itself calls nothing.
    assert not allowed(r, "batch-predict", PUBLIC, 443)


def test_outputs_run_now_and_move_requests_models_and_answers(r):
    out = r.outputs
    assert "create job --from=cronjob/batch-predict" in out[RUN_NOW]
    assert "--destination requests --source ./requests" in out[UPLOAD_REQUESTS]
    assert "--destination models --source ./checkpoints" in out[UPLOAD_MODEL]
    assert "download-batch" in out[DOWNLOAD_ANSWERS] and "--source answers --destination ./answers" in \
        out[DOWNLOAD_ANSWERS]


@pytest.mark.parametrize("change, key, text", [
    ({"batch": {"schedule": "every night"}}, "aksgpu:batch.schedule", "must be a cron schedule of 5 fields"),
    ({"batch": {"timeZone": "Paris time"}}, "aksgpu:batch.timeZone", "IANA time zone"),
    # Shaped like a zone, in no tz database: Kubernetes would refuse the CronJob at pulumi up.
    ({"batch": {"timeZone": "Europe/Pariss"}}, "aksgpu:batch.timeZone", "did you mean Europe/Paris?"),
    ({"batch": {"timeZone": "Europe/Pari"}}, "aksgpu:batch.timeZone", "IANA time zone"),
    ({"batch": {"timeZone": "Mars/Base"}}, "aksgpu:batch.timeZone", "IANA time zone"),
    ({"batch": {"timeZone": "Local"}}, "aksgpu:batch.timeZone", "IANA time zone"),
    ({"batch": {"schedule": "99 99 99 99 99"}}, "aksgpu:batch.schedule", "minute '99' is outside 0-59"),
    ({"batch": {"schedule": "0 24 * * *"}}, "aksgpu:batch.schedule", "hour '24' is outside 0-23"),
    ({"batch": {"schedule": "0 2 0 * *"}}, "aksgpu:batch.schedule", "day of month '0' is outside 1-31"),
    ({"batch": {"schedule": "0 2 * 13 *"}}, "aksgpu:batch.schedule", "month '13' is outside 1-12"),
    ({"batch": {"schedule": "0 2 * * 7"}}, "aksgpu:batch.schedule", "day of week '7' is outside 0-6"),
    ({"batch": {"schedule": "*/0 2 * * *"}}, "aksgpu:batch.schedule", "a zero step"),
    ({"batch": {"schedule": "0 5-2 * * *"}}, "aksgpu:batch.schedule", "an empty range"),
    ({"batch": {"schedule": "0 2 * * funday"}}, "aksgpu:batch.schedule", "'funday' is not a number or a name"),
    ({"batch": {"schedule": "CRON_TZ=Europe/Paris 0 2 * * *"}}, "aksgpu:batch.schedule", "batch.timeZone"),
    ({"batch": {"pool": "a100"}}, "aksgpu:batch.pool", "must name a GPU pool of this stack: t4"),
    ({"gpuPools": [{"name": "t4", "minCount": 1}]}, "aksgpu:gpuPools", "scales from 0"),
    ({"storage": {"accounts": [{"role": "input"}, {"role": "output"}]}}, "aksgpu:storage.accounts",
     "reads requests and models from the input account"),
])
def test_a_schedule_pool_or_storage_the_run_cannot_use_is_one_line(change, key, text):
    with pytest.raises(ConfigError) as e:
        load({**stack_config_of(STACK), **change})
    assert [p.key for p in e.value.problems] == [key] and text in str(e.value)


@pytest.mark.parametrize("schedule, zone", [
    ("30 2 * * 1-5", "Europe/Paris"), ("*/15 0-6,22,23 1,15 jan-mar,DEC sun,sat", "America/New_York"),
    ("5/10 ? * * ?", "Asia/Kolkata"), ("@weekly", "Etc/UTC"), ("0  2 * * *", "UTC"), ("@every 6h", "UTC"),
    ("+5 2 * * *", "UTC")])
def test_a_schedule_and_zone_the_cronjob_controller_reads_are_taken(schedule, zone):
    cfg = load({**stack_config_of(STACK), "batch": {"schedule": schedule, "timeZone": zone}})
    assert (cfg.settings.schedule, cfg.settings.time_zone) == (schedule, zone)


# The script, on the CPU -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    train.train(train.parse_args(["--checkpoints", str(folder), "--steps", "80", "--checkpoint-every", "40",
                                  "--batch-size", "64", "--data", "synthetic", "--device", "cpu"]))
    return folder


def write_requests(folder, count):
    images, labels = digits.synthetic_digits(seed=0, size=8 * count)
    for i in range(count):
        (folder / f"night/{i}.json").parent.mkdir(parents=True, exist_ok=True)
        (folder / f"night/{i}.json").write_text(json.dumps({"images": images[8 * i:8 * i + 8].squeeze(1).tolist()}))
    return labels


def test_every_request_gets_answers_from_the_newest_checkpoint_and_a_rerun_skips_them(tmp_path, models):
    requests, answers = tmp_path / "requests", tmp_path / "answers"
    labels = write_requests(requests, 3)
    (requests / "night/bad.json").write_text("{not json")
    summary = batch.run(requests, models, answers, batch.torch.device("cpu"))
    assert (summary["pending"], summary["answered"], summary["refused"], summary["step"]) == (4, 3, 1, 80)
    first = json.loads((answers / "night/0.json.answers.json").read_text())
    assert first["step"] == 80 and len(first["predictions"]) == 8
    right = sum(p["label"] == int(want) for p, want in zip(first["predictions"], labels[:8], strict=True))
    assert right >= 6
    assert "not valid JSON" in json.loads((answers / "night/bad.json.answers.json").read_text())["error"]
    assert batch.run(requests, models, answers, batch.torch.device("cpu"))["pending"] == 0


def test_a_killed_runs_half_written_answer_is_cleared_and_written_again(tmp_path, models):
    requests, answers = tmp_path / "requests", tmp_path / "answers"
    write_requests(requests, 1)
    partial = answers / "night/.0.json.answers.json.tmp-node-42"
    partial.parent.mkdir(parents=True)
    partial.write_text('{"half')
    summary = batch.run(requests, models, answers, batch.torch.device("cpu"))
    assert summary["cleaned_partials"] == 1 and summary["answered"] == 1 and not partial.exists()


def test_without_a_checkpoint_the_run_stops_with_the_code_the_job_does_not_retry(tmp_path, capsys):
    write_requests(tmp_path / "requests", 1)
    with pytest.raises(SystemExit) as e:
        batch.main(["--requests", str(tmp_path / "requests"), "--models", str(tmp_path / "none"),
                    "--answers", str(tmp_path / "answers"), "--device", "cpu"])
    assert e.value.code == batch.NO_MODEL_EXIT_CODE and "uploadModel" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert batch.main(["--requests", str(tmp_path / "empty"), "--models", str(tmp_path / "none"),
                       "--answers", str(tmp_path / "answers"), "--device", "cpu"])["pending"] == 0


def test_a_bad_checkpoint_or_request_is_refused_with_one_line_and_the_good_ones_answered(tmp_path, models, capsys):
    """A checkpoint in another layout used to stop the run before any answer; a NaN request was answered with NaN,
    which made its answer file invalid JSON."""
    import shutil
    shutil.copytree(models, tmp_path / "models")
    batch.torch.save({"weights": {}}, tmp_path / "models" / "ckpt-00000100.pt")
    requests, answers = tmp_path / "requests", tmp_path / "answers"
    write_requests(requests, 2)
    (requests / "night/nan.json").write_text('{"images": [[NaN' + ", 0.5" * 783 + "]]}")
    summary = batch.run(requests, tmp_path / "models", answers, batch.torch.device("cpu"))
    assert (summary["answered"], summary["refused"], summary["step"]) == (2, 1, 80)
    out = capsys.readouterr().out.splitlines()
    assert "skipping checkpoint ckpt-00000100.pt: holds no DigitNet weights under 'model' (found ['weights']), not " \
           "what train.py writes" in out
    assert "refused night/nan.json: body holds NaN, which is not JSON (RFC 8259 has no NaN or Infinity)" in out

    def strict(constant):
        raise AssertionError(f"{constant} in an answer file")
    for path in answers.rglob("*.answers.json"):
        json.loads(path.read_text(), parse_constant=strict)


def test_a_missing_requests_folder_means_what_a_missing_input_means_in_every_script(tmp_path, capsys):
    """Its volume is not mounted: one line, exit status 2, which the Job does not retry (resim's missing input too)."""
    with pytest.raises(SystemExit) as e:
        batch.run(tmp_path / "requests", tmp_path / "models", tmp_path / "answers", batch.torch.device("cpu"))
    assert e.value.code == 2 and capsys.readouterr().err == (
        f"error: requests folder {tmp_path / 'requests'} does not exist (is its volume mounted?)\n")


def test_a_request_that_cannot_be_read_gets_no_answer_and_the_run_exits_1_for_a_retry(tmp_path, models, monkeypatch,
                                                                                      capsys):
    """An I/O error (a blob mount failing) was written as that request's answer, so no later run ever read it again."""
    requests, answers = tmp_path / "requests", tmp_path / "answers"
    write_requests(requests, 2)
    unreadable(monkeypatch, "1.json", OSError(107, "Transport endpoint is not connected"))
    argv = ["--requests", str(requests), "--models", str(models), "--answers", str(answers), "--device", "cpu"]
    with pytest.raises(SystemExit) as e:
        batch.main(argv)
    assert e.value.code == batch.EXIT_RETRY and e.value.code != batch.NO_MODEL_EXIT_CODE
    captured = capsys.readouterr()
    assert "could not read night/1.json: Transport endpoint is not connected" in captured.out.splitlines()
    assert len(captured.err.splitlines()) == 1 and "1 request file(s) could not be read" in captured.err
    assert not batch.answer_path(answers, "night/1.json").exists()
    monkeypatch.undo()
    summary = batch.main(argv)  # the Job's retry answers it
    assert (summary["pending"], summary["answered"], summary["unread"]) == (1, 1, 0)


def test_a_run_that_refused_every_request_fails_the_job_instead_of_succeeding(tmp_path, models, capsys):
    """A run with answered: 0 and every request refused (a format change upstream) exited 0: a green CronJob."""
    requests = tmp_path / "requests"
    (requests / "night").mkdir(parents=True)
    (requests / "night/a.json").write_text('{"pixels": []}')
    with pytest.raises(SystemExit) as e:
        batch.main(["--requests", str(requests), "--models", str(models), "--answers", str(tmp_path / "answers"),
                    "--device", "cpu"])
    assert e.value.code == batch.NO_MODEL_EXIT_CODE  # the code the Job's pod failure policy fails at once
    assert capsys.readouterr().err == ("error: every request read was refused (1), none answered: has the request "
                                       "format changed?\n")


def test_its_acceptance_probe_feeds_a_run_that_answers_where_the_probe_looks(r, tmp_path, capsys):
    """The e2e run's blobs (a checkpoint train.py makes on the CPU, one request) make a run answer, with the summary
    line and the answer file the probes look for."""
    from ops.e2e.probes import MAKERS
    from program.probes import RUN, Content
    from stacks.batch_inference.probes import ANSWER_SUFFIX, ANSWERED, CHECKPOINT, REQUEST, probes
    run, written = probes(r.cfg, r.cfg.settings)
    folders = {name: tmp_path / name for name in ("requests", "models", "answers")}
    for blob in run.given:
        path = folders[blob.container] / blob.name.replace(RUN, "20260504100000")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(MAKERS[blob.content]() if isinstance(blob.content, Content) else blob.content)
    assert CHECKPOINT in {b.name for b in run.given}
    batch.main(["--requests", str(folders["requests"]), "--models", str(folders["models"]), "--answers",
                str(folders["answers"]), "--device", "cpu"])
    assert re.search(ANSWERED, capsys.readouterr().out)
    answer = batch.answer_path(folders["answers"], REQUEST.replace(RUN, "20260504100000"))
    assert [p.name for p in folders["answers"].iterdir()] == [answer.name]
    assert written.prefix == REQUEST + ANSWER_SUFFIX and answer.name == written.prefix.replace(RUN, "20260504100000")
