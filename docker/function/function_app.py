"""The GPU function app: Azure Functions v4, Python programming model v2.

Routes (anonymous, as in the seed; the LoadBalancer Service is the front door):
  GET  /api/status           the seed's text: "Status - Torch device is set to cuda ."
  GET  /api/status?format=json   GPU name, count, memory, torch/CUDA versions
  GET  /api/health           200 once the model is loaded (probes), 503 before
  POST /api/answer           {"question", "context"} -> best sentence with score

Every answer is JSON: a bad body is a 400 naming what is wrong, a model that cannot load a 503, as the health
route says; the cause goes to the log, never to the caller.
"""

from __future__ import annotations

import json
import logging

import azure.functions as func

from answer_request import BadRequest, parse_queries
from device_status import status_line, status_report
from reader import MODEL_NAME, shared_reader

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def _json(body: object, status_code: int = 200) -> func.HttpResponse:
    """Strict JSON (RFC 8259 has no NaN or Infinity): an answer holding one is a 500 saying so, never invalid JSON."""
    try:
        text = json.dumps(body, allow_nan=False)
    except ValueError:
        logging.error("an answer held NaN or infinity: %r", body)
        text, status_code = '{"error": "the model answered NaN or infinity"}', 500
    return func.HttpResponse(text, status_code=status_code, mimetype="application/json")


@app.route(route="status", methods=["GET"])
def status(req: func.HttpRequest) -> func.HttpResponse:
    """Whether torch computes on the GPU: text by default, JSON with ?format=json."""
    if req.params.get("format") == "json":
        return _json(status_report())
    return func.HttpResponse(status_line(), mimetype="text/plain")


@app.route(route="health", methods=["GET"])
def health(req: func.HttpRequest) -> func.HttpResponse:
    """Ready when the model is loaded; loading it here keeps it off the first user request."""
    try:
        reader = shared_reader()
    except Exception:  # a broken model must fail the probe, not crash the worker
        logging.exception("model failed to load")
        return _json({"status": "model not loaded"}, status_code=503)
    return _json({"status": "ok", "model": MODEL_NAME, "device": reader.device.type})


@app.route(route="answer", methods=["POST"])
def answer(req: func.HttpRequest) -> func.HttpResponse:
    """Answer one query (JSON object) or a batch (JSON array of objects)."""
    try:
        queries, is_batch = parse_queries(req.get_body())
    except BadRequest as error:
        return _json({"error": str(error)}, status_code=400)
    try:
        reader = shared_reader()
    except Exception:  # a broken or missing model: the same 503 the probe gets, not an unhandled error
        logging.exception("model failed to load")
        return _json({"error": "model not loaded"}, status_code=503)
    answers = reader.answer(queries)
    return _json(answers if is_batch else answers[0])
