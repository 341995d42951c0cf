"""Nightly batch inference: answer every request file with the newest DigitNet checkpoint, on the GPU if there is one.

A request file is a /predict body (``{"images": [...]}``, the prediction service's format). Its answers go to
``<answers>/<request path>.answers.json``, written atomically, so a run that a spot eviction kills is simply run
again: requests already answered are skipped, and the half-written files of the killed attempt are cleared first.
A bad request (not a /predict body) is answered with its error (and one line in the log), so it is not refused again
every night. A request file that cannot be read (an I/O error: the blob mount, not the request) gets no answer, so a
later run reads it again; the run answers the others and exits 1, which the Job retries. A run that refused every
request it read and answered none exits 2 (a format change upstream must not look like a good night; the refusals are
answered, so a retry would find nothing to do and succeed: the Job fails at once instead). A
checkpoint that does not load, or holds another model, is skipped for the next older one. A missing requests folder
(its volume not mounted) or no usable checkpoint ends the run with one line and exit status 2, which the Job does
not retry.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from checkpoints import load_newest
from jobio import (
    EXIT_BAD_INPUT,
    EXIT_RETRY,
    ArgumentParser,
    device_name,
    fail,
    input_files,
    input_folder,
    remove_partials,
    write_atomic,
)
from model import BadRequest, DigitNet, digitnet_from, parse_images

NO_MODEL_EXIT_CODE = EXIT_BAD_INPUT
"""No checkpoint to answer with: retrying cannot help, so the Job's pod failure policy fails it at once."""


def answer_path(answers: Path, request: str) -> Path:
    return answers / f"{request}.answers.json"


def load_model(models: Path, device: torch.device) -> tuple[int, DigitNet] | None:
    """The newest usable checkpoint's step and model, in eval mode on ``device``; None when there is none."""
    loaded = load_newest(models, map_location=device, use=digitnet_from)
    if loaded is None:
        return None
    step, model = loaded
    return step, model.to(device)


def answer(model: DigitNet, images: torch.Tensor) -> list[dict]:
    with torch.inference_mode():
        probabilities = torch.softmax(model(images), dim=1)
    confidence, label = probabilities.max(dim=1)
    return [{"label": int(digit), "confidence": round(float(c), 4)}
            for digit, c in zip(label.cpu(), confidence.cpu(), strict=True)]


def run(requests: Path, models: Path, answers: Path, device: torch.device) -> dict:
    """Answer what is not answered yet; a summary of the run."""
    start = time.monotonic()
    input_folder(requests, "requests folder")
    pending = [r for r in input_files(requests) if r.endswith(".json")]
    cleaned = remove_partials([answer_path(answers, r) for r in pending])
    pending = [r for r in pending if not answer_path(answers, r).exists()]
    summary = {"pending": len(pending), "answered": 0, "refused": 0, "unread": 0, "cleaned_partials": cleaned,
               "device": device.type}
    if not pending:
        return {**summary, "seconds": round(time.monotonic() - start, 3)}
    loaded = load_model(models, device)
    if loaded is None:
        fail(f"no usable checkpoint (ckpt-<step>.pt, a DigitNet) in {models}: upload one (the uploadModel output)")
    step, model = loaded
    for request in pending:
        try:
            body = (requests / request).read_bytes()
        except OSError as error:  # no answer: the next run (the Job's retry) reads it again
            print(f"could not read {request}: {error.strerror or error}", flush=True)
            summary["unread"] += 1
            continue
        try:
            images = parse_images(body)
            result = {"request": request, "step": step, "predictions": answer(model, images.to(device))}
            summary["answered"] += 1
        except BadRequest as error:  # this request only: the others are still answered
            print(f"refused {request}: {error}", flush=True)
            result = {"request": request, "step": step, "error": str(error)}
            summary["refused"] += 1
        write_atomic(answer_path(answers, request), result)
    return {**summary, "step": step, "seconds": round(time.monotonic() - start, 3)}


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=Path, required=True, help="folder of request files (read-only)")
    parser.add_argument("--models", type=Path, required=True, help="folder of ckpt-<step>.pt checkpoints")
    parser.add_argument("--answers", type=Path, required=True, help="folder the answers are written to")
    parser.add_argument("--device", type=device_name, default="auto", help="cuda, cpu or auto (cuda when there is one)")
    args = parser.parse_args(argv)
    on = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                      "cpu" if args.device == "auto" else args.device)
    summary = run(args.requests, args.models, args.answers, on)
    print(json.dumps(summary, sort_keys=True), flush=True)
    if summary["unread"]:
        print(f"error: {summary['unread']} request file(s) could not be read (is the requests volume healthy?); "
              f"exit {EXIT_RETRY} so the Job retries them", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_RETRY)
    if summary["refused"] and not summary["answered"]:
        fail(f"every request read was refused ({summary['refused']}), none answered: has the request format changed?")
    return summary


if __name__ == "__main__":
    main()
