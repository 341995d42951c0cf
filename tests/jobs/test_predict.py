"""The prediction service on the CPU: waits for a checkpoint, serves /predict, picks up newer checkpoints."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.docker_modules import import_from
from tests.local_http import base_url, running

train = import_from("jobs", "train")
predict = import_from("jobs", "predict")
digits = import_from("jobs", "digits")


def post(url, body: bytes):
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def train_to(folder, steps):
    train.train(train.parse_args(["--checkpoints", str(folder), "--steps", str(steps), "--checkpoint-every", "20",
                                  "--batch-size", "64", "--data", "synthetic", "--device", "cpu"]))


@pytest.fixture
def service(tmp_path):
    with running(predict.serve(tmp_path, port=0, poll_seconds=0)) as server:
        yield tmp_path, base_url(server)


@pytest.fixture(scope="module")
def ready_url(tmp_path_factory):
    """One service over a model trained once (80 steps), for the tests that only read."""
    folder = tmp_path_factory.mktemp("trained")
    train_to(folder, 80)
    with running(predict.serve(folder, port=0, poll_seconds=0)) as server:
        yield base_url(server)


def test_service_is_unready_until_training_writes_a_checkpoint(service):
    folder, url = service
    assert get(f"{url}/healthz") == (503, {"status": "no checkpoint yet"})
    assert post(f"{url}/predict", json.dumps({"images": [[0.0] * 784]}).encode())[0] == 503
    train_to(folder, 20)
    assert get(f"{url}/healthz") == (200, {"status": "ok", "step": 20})


def test_predict_restores_the_newest_model_and_labels_digits(ready_url):
    images, labels = digits.synthetic_digits(seed=0, size=16)
    status, body = post(f"{ready_url}/predict", json.dumps({"images": images.squeeze(1).tolist()}).encode())
    assert status == 200 and body["step"] == 80
    predicted = [p["label"] for p in body["predictions"]]
    assert sum(p == want for p, want in zip(predicted, labels.tolist(), strict=True)) >= 14
    assert all(0 <= p["confidence"] <= 1 for p in body["predictions"])


def test_service_swaps_in_a_newer_checkpoint(service):
    folder, url = service
    train_to(folder, 20)
    assert get(f"{url}/healthz")[1]["step"] == 20
    train_to(folder, 40)
    assert get(f"{url}/healthz")[1]["step"] == 40


@pytest.mark.parametrize(
    "body, message",
    [
        (b"not json", "not valid JSON"),
        (b'{"image": []}', 'body must be {"images"'),
        (json.dumps({"images": [[0.5] * 10]}).encode(), "784 numbers or 28x28"),
        (json.dumps({"images": [["a"] * 784]}).encode(), "lists of numbers"),
        (json.dumps({"images": [[2.0] * 784]}).encode(), "0..1"),
        (json.dumps({"images": [[0.0] * 784] * 65}).encode(), "the limit is 64"),
        # Python's JSON reader takes NaN and 1e999 (infinity); an answer computed from them would not be JSON.
        (b'{"images": [[NaN' + b", 0.5" * 783 + b"]]}", "body holds NaN, which is not JSON"),
        (b'{"images": [[1e999' + b", 0.5" * 783 + b"]]}", "pixel values must be finite"),
    ],
    ids=["not-json", "wrong-key", "wrong-shape", "not-numbers", "out-of-range", "too-many", "nan", "infinity"],
)
def test_bad_predict_requests_get_400(ready_url, body, message):
    status, answer = post(f"{ready_url}/predict", body)
    assert status == 400 and message in answer["error"]


def test_a_content_length_that_is_not_a_byte_count_is_a_400_with_json(ready_url):
    import http.client
    from urllib.parse import urlsplit
    where = urlsplit(ready_url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    connection.putrequest("POST", "/predict")
    connection.putheader("Content-Length", "lots")
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 400 and json.loads(response.read()) == {"error": "Content-Length 'lots' is not a byte "
                                                                               "count"}


def test_a_checkpoint_of_another_layout_is_skipped_for_the_older_one(service, capsys):
    folder, url = service
    train_to(folder, 20)
    checkpoints = import_from("jobs", "checkpoints")
    checkpoints.save_atomic({"state_dict": {}}, checkpoints.checkpoint_path(folder, 30))
    predict.torch.save({"model": {"conv.weight": predict.torch.zeros(2)}}, checkpoints.checkpoint_path(folder, 40))
    assert get(f"{url}/healthz") == (200, {"status": "ok", "step": 20})
    out = capsys.readouterr().out
    assert ("skipping checkpoint ckpt-00000040.pt: its weights are not DigitNet's: 6 missing (features.0.weight, "
            "features.0.bias, features.3.weight), 1 unexpected (conv.weight)") in out
    assert "skipping checkpoint ckpt-00000030.pt: holds no DigitNet weights under 'model' (found ['state_dict'])" in out


def test_a_checkpoint_with_weights_that_are_not_finite_is_skipped_for_the_older_one(service, capsys):
    """A diverged training run's NaN weights were served: every answer {"confidence": NaN}, which is not JSON."""
    folder, url = service
    train_to(folder, 20)
    checkpoints = import_from("jobs", "checkpoints")
    state = checkpoints.load(checkpoints.checkpoint_path(folder, 20))
    state["model"]["classifier.bias"][3] = float("nan")
    checkpoints.save_atomic(state, checkpoints.checkpoint_path(folder, 40))
    assert get(f"{url}/healthz") == (200, {"status": "ok", "step": 20})
    assert ("skipping checkpoint ckpt-00000040.pt: its weights are not finite (NaN or infinity in classifier.bias): "
            "the training run diverged") in capsys.readouterr().out.splitlines()


def test_an_answer_holding_nan_is_a_500_in_json_never_invalid_json(service, monkeypatch):
    folder, url = service
    train_to(folder, 20)
    monkeypatch.setattr(predict.Predictor, "predict", lambda self, images: [{"label": 0, "confidence": float("nan")}])
    assert post(f"{url}/predict", json.dumps({"images": [[0.0] * 784]}).encode()) == (
        500, {"error": "the model answered NaN or infinity"})
