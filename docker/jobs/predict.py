"""Serve DigitNet predictions from the newest checkpoint on the volume (seed 004's /predict).

    python predict.py --checkpoints /mnt/checkpoints --port 8080

GET  /healthz  200 with the checkpoint step once a model is loaded, 503 before the first checkpoint
POST /predict  {"images": [[784 floats in 0..1] or 28x28 nested lists, ...]} -> labels and confidences

The service polls the folder and swaps in a newer checkpoint as training writes one.
"""

from __future__ import annotations

import json
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch

from checkpoints import list_checkpoints, load_newest
from jobio import ArgumentParser, port, positive_float
from model import MAX_BODY_BYTES, BadRequest, DigitNet, digitnet_from, parse_images


class Predictor:
    """The model of the newest checkpoint, reloaded when a newer one appears."""

    def __init__(self, folder: Path, poll_seconds: float = 30.0):
        self.folder, self.poll_seconds = folder, poll_seconds
        self.model: DigitNet | None = None
        self.step: int | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    def refresh(self, force: bool = False) -> None:
        with self._lock:
            if not force and time.monotonic() - self._checked < self.poll_seconds:
                return
            self._checked = time.monotonic()
            newest = list_checkpoints(self.folder)
            if not newest or newest[0][0] == self.step:
                return
            loaded = load_newest(self.folder, use=digitnet_from)  # another layout: the next older one
            if loaded is None:
                return
            self.step, self.model = loaded
            print(f"serving checkpoint step {self.step}", flush=True)

    def predict(self, images: torch.Tensor) -> list[dict]:
        self.refresh()
        model = self.model
        if model is None:
            raise LookupError("no checkpoint yet")
        with torch.inference_mode():
            probabilities = torch.softmax(model(images), dim=1)
        confidence, label = probabilities.max(dim=1)
        return [{"label": int(digit), "confidence": round(float(c), 4)}
                for digit, c in zip(label, confidence, strict=True)]


def make_handler(predictor: Predictor) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: HTTPStatus, body: dict) -> None:
            try:  # strict JSON (RFC 8259): an answer holding NaN is a 500 that says so, never invalid JSON
                data = json.dumps(body, allow_nan=False).encode()
            except ValueError:
                status, data = HTTPStatus.INTERNAL_SERVER_ERROR, b'{"error": "the model answered NaN or infinity"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/healthz":
                return self._send(HTTPStatus.NOT_FOUND, {"error": "routes: GET /healthz, POST /predict"})
            predictor.refresh()
            if predictor.model is None:
                return self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"status": "no checkpoint yet"})
            return self._send(HTTPStatus.OK, {"status": "ok", "step": predictor.step})

        def do_POST(self) -> None:
            if self.path != "/predict":
                return self._send(HTTPStatus.NOT_FOUND, {"error": "routes: GET /healthz, POST /predict"})
            length = self.headers.get("Content-Length") or "0"
            if not length.isdigit():
                return self._send(HTTPStatus.BAD_REQUEST, {"error": f"Content-Length {length[:20]!r} is not a "
                                                                    "byte count"})
            try:
                images = parse_images(self.rfile.read(min(int(length), MAX_BODY_BYTES + 1)))
                predictions = predictor.predict(images)
            except BadRequest as error:
                return self._send(HTTPStatus.BAD_REQUEST, {"error": str(error)})
            except LookupError as error:
                return self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(error)})
            return self._send(HTTPStatus.OK, {"step": predictor.step, "predictions": predictions})

        def log_message(self, format: str, *args: object) -> None:  # one line per request on stdout
            print(f"{self.address_string()} {format % args}", flush=True)

    return Handler


def serve(folder: Path, port: int, poll_seconds: float = 30.0) -> ThreadingHTTPServer:
    predictor = Predictor(folder, poll_seconds)
    predictor.refresh(force=True)
    return ThreadingHTTPServer(("0.0.0.0", port), make_handler(predictor))


if __name__ == "__main__":
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=Path, required=True)
    parser.add_argument("--port", type=port, default=8080)
    parser.add_argument("--poll-seconds", type=positive_float, default=30.0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    serve(args.checkpoints, args.port, args.poll_seconds).serve_forever()
