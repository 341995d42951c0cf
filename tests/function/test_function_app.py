"""The function app's routes, called through azure-functions' own request/response types on the CPU."""

from __future__ import annotations

import json

import pytest
import torch

from tests.function.conftest import import_function_module

SEED_STATUS_CPU = "Status - Torch device is set to cpu ."

QA = [
    (
        "What installs the NVIDIA driver on the GPU nodes?",
        "AKS creates the node pool from the stack's settings. The GPU operator installs the NVIDIA driver "
        "and the container toolkit on every GPU node. The Blob CSI driver mounts storage accounts as volumes.",
        "The GPU operator installs the NVIDIA driver and the container toolkit on every GPU node.",
    ),
    (
        "Which city is the capital of France?",
        "Paris is the capital of France. Berlin is known for its museums!\n\nMount Everest is the highest mountain.",
        "Paris is the capital of France.",
    ),
    (
        "How tall is the highest mountain?",
        "The library opens at nine. Mount Everest rises 8,849 metres above sea level. Rivers flow to the sea.",
        "Mount Everest rises 8,849 metres above sea level.",
    ),
]


def test_routes_are_anonymous_with_the_seed_paths(routes):
    bindings = {
        name: next(b.get_dict_repr() for b in fn.get_bindings() if b.get_dict_repr()["type"] == "httpTrigger")
        for name, fn in routes.items()
    }
    assert {name: (b["route"], [str(m.value) for m in b["methods"]]) for name, b in bindings.items()} == {
        "status": ("status", ["GET"]),
        "health": ("health", ["GET"]),
        "answer": ("answer", ["POST"]),
    }
    assert {str(b["authLevel"].value) for b in bindings.values()} == {"anonymous"}


def test_status_says_cpu_in_the_seeds_words_without_a_gpu(call):
    response = call("status")
    assert response.status_code == 200
    assert response.get_body().decode() == SEED_STATUS_CPU
    assert response.mimetype == "text/plain"


def test_status_says_cuda_when_torch_sees_a_gpu(call, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert call("status").get_body().decode() == "Status - Torch device is set to cuda ."


def test_status_json_reports_device_gpus_and_versions(call):
    response = call("status", params={"format": "json"})
    report = json.loads(response.get_body())
    assert response.mimetype == "application/json"
    assert report["device"] == "cpu"
    assert report["cuda_available"] is False
    assert report["gpu_count"] == 0 and report["gpus"] == []
    assert report["torch_version"] == torch.__version__
    assert {"cuda_version", "cudnn_version", "python_version"} <= set(report)


def test_health_is_ready_once_the_model_is_loaded(call):
    response = call("health")
    assert response.status_code == 200
    assert json.loads(response.get_body()) == {
        "status": "ok",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "device": "cpu",
    }


def test_health_fails_the_probe_when_the_model_cannot_load(call, function_app, monkeypatch):
    def broken():
        raise OSError("model.safetensors is truncated")

    monkeypatch.setattr(function_app, "shared_reader", broken)
    response = call("health")
    assert response.status_code == 503
    assert json.loads(response.get_body()) == {"status": "model not loaded"}


@pytest.mark.parametrize("question, context, expected", QA, ids=["operator", "capital", "everest"])
def test_answer_picks_the_sentence_that_answers_the_question(call, question, context, expected):
    response = call("answer", "POST", json.dumps({"question": question, "context": context}).encode())
    assert response.status_code == 200
    result = json.loads(response.get_body())
    assert result["answer"] == expected
    assert context[result["start"] : result["end"]] == expected
    assert 0.0 < result["score"] <= 1.0
    assert result["device"] == "cpu"


def test_answer_batch_keeps_the_order_of_its_items(call):
    batch = [{"question": q, "context": c} for q, c, _ in QA]
    response = call("answer", "POST", json.dumps(batch).encode())
    assert response.status_code == 200
    assert [item["answer"] for item in json.loads(response.get_body())] == [expected for _, _, expected in QA]


def test_batched_scores_equal_single_request_scores(call):
    singles = [
        json.loads(call("answer", "POST", json.dumps({"question": q, "context": c}).encode()).get_body())["score"]
        for q, c, _ in QA
    ]
    body = json.dumps([{"question": q, "context": c} for q, c, _ in QA]).encode()
    batch = json.loads(call("answer", "POST", body).get_body())
    assert [item["score"] for item in batch] == pytest.approx(singles, abs=1e-3)


TOO_LONG_CONTEXT = "word " * 4001  # 20,005 characters, over the 20,000 default


@pytest.mark.parametrize(
    "body, message",
    [
        (b"", "body is empty"),
        (b"{not json", "body is not valid JSON"),
        (b"\xff\xfe", "body is not valid JSON"),
        (b'"just a string"', "body must be a JSON object"),
        (b"[]", "batch is empty"),
        (json.dumps([{"question": "q", "context": "c"}] * 33).encode(), "batch has 33 items; the limit is 32"),
        (json.dumps({"context": "Some text."}).encode(), "body is missing field 'question'"),
        (json.dumps({"question": "Why?"}).encode(), "body is missing field 'context'"),
        (json.dumps({"question": 42, "context": "Some text."}).encode(), "body.question must be a string, got int"),
        (json.dumps({"question": "  ", "context": "Some text."}).encode(), "body.question is empty"),
        (json.dumps({"question": "q" * 1001, "context": "c"}).encode(),
         "body.question has 1001 characters; the limit is 1000"),
        (json.dumps({"question": "Why?", "context": TOO_LONG_CONTEXT}).encode(),
         "body.context has 20005 characters; the limit is 20000"),
        (json.dumps({"question": "Why?", "context": "c", "top": 3}).encode(),
         "unknown field(s) top; allowed: question, context"),
        (json.dumps([{"question": "q", "context": "c"}, {"question": "q"}]).encode(),
         "item[1] is missing field 'context'"),
        (b"{" + b" " * (1024 * 1024) + b"}", "the limit is 1048576"),
    ],
    ids=[
        "empty", "not-json", "not-utf8", "scalar", "empty-batch", "batch-too-big", "no-question", "no-context",
        "question-not-string", "blank-question", "question-too-long", "context-too-long", "unknown-field",
        "bad-batch-item", "body-too-big",
    ],
)
def test_bad_answer_requests_get_400_with_a_clear_message(call, body, message):
    response = call("answer", "POST", body)
    assert response.status_code == 400
    assert response.mimetype == "application/json"
    assert message in json.loads(response.get_body())["error"]


def test_context_limit_follows_the_deployment_setting(call, monkeypatch):
    monkeypatch.setenv("MRC_MAX_CONTEXT_CHARS", "10")
    response = call("answer", "POST", json.dumps({"question": "Why?", "context": "Eleven char"}).encode())
    assert response.status_code == 400
    assert "the limit is 10" in json.loads(response.get_body())["error"]


def test_answer_says_503_in_json_when_the_model_folder_is_empty(call, function_app, monkeypatch, tmp_path):
    """The health route said 503 while the answer route raised: both now say the model is not loaded."""
    reader = import_function_module("reader")
    monkeypatch.setenv("MRC_MODEL_DIR", str(tmp_path))
    monkeypatch.setattr(reader, "_reader", None)
    body = json.dumps({"question": "Which city?", "context": "Paris is the capital of France."}).encode()
    for name, method, data in (("answer", "POST", body), ("health", "GET", b"")):
        response = call(name, method, data)
        assert response.status_code == 503 and response.mimetype == "application/json"
        assert "not loaded" in json.dumps(json.loads(response.get_body()))


def test_an_answer_holding_nan_is_a_500_in_json_never_invalid_json(call, function_app, monkeypatch):
    """json.dumps wrote {"score": NaN}, which is not JSON (RFC 8259), with status 200."""
    class Diverged:
        def answer(self, queries):
            return [{"answer": "x", "score": float("nan")}]
    monkeypatch.setattr(function_app, "shared_reader", Diverged)
    response = call("answer", "POST", json.dumps({"question": "q?", "context": "c."}).encode())
    assert response.status_code == 500
    assert json.loads(response.get_body()) == {"error": "the model answered NaN or infinity"}
