"""Nightly batch inference: answer every request file with the newest DigitNet checkpoint, on the GPU if there is one.

A request file is a /predict body (``{"images": [...]}``, the prediction service's format). Its answers go to
``<answers>/<request path>.answers.json``, written atomically, so a run that a spot eviction kills is simply run
again: requests already answered are skipped, and the half-written files of the killed attempt are cleared first.
A request that cannot be read is answered with its error, never retried forever.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from checkpoints import load_newest
from jobio import input_files, remove_partials, write_atomic
from model import BadRequest, DigitNet, parse_images

NO_MODEL_EXIT_CODE = 2
"""No checkpoint to answer with: retrying cannot help, so the Job's pod failure policy fails it at once."""


def answer_path(answers: Path, request: str) -> Path:
    return answers / f"{request}.answers.json"


def load_model(models: Path, device: torch.device) -> tuple[int, DigitNet] | None:
    """The newest checkpoint's step and model, in eval mode on ``device``; None when there is none."""
    loaded = load_newest(models, map_location=device)
    if loaded is None:
        return None
    step, state = loaded
    model = DigitNet().to(device)
    model.load_state_dict(state["model"])
    return step, model.eval()


def answer(model: DigitNet, images: torch.Tensor) -> list[dict]:
    with torch.inference_mode():
        probabilities = torch.softmax(model(images), dim=1)
    confidence, label = probabilities.max(dim=1)
    return [{"label": int(digit), "confidence": round(float(c), 4)}
            for digit, c in zip(label.cpu(), confidence.cpu(), strict=True)]


def run(requests: Path, models: Path, answers: Path, device: torch.device) -> dict:
    """Answer what is not answered yet; a summary of the run."""
    start = time.monotonic()
    pending = [r for r in input_files(requests) if r.endswith(".json")] if requests.is_dir() else []
    cleaned = remove_partials([answer_path(answers, r) for r in pending])
    pending = [r for r in pending if not answer_path(answers, r).exists()]
    summary = {"pending": len(pending), "answered": 0, "refused": 0, "cleaned_partials": cleaned,
               "device": device.type}
    if not pending:
        return {**summary, "seconds": round(time.monotonic() - start, 3)}
    loaded = load_model(models, device)
    if loaded is None:
        raise FileNotFoundError(f"no checkpoint (ckpt-<step>.pt) in {models}: upload one (the uploadModel output)")
    step, model = loaded
    for request in pending:
        try:
            images = parse_images((requests / request).read_bytes())
            result = {"request": request, "step": step, "predictions": answer(model, images.to(device))}
            summary["answered"] += 1
        except BadRequest as error:
            result = {"request": request, "step": step, "error": str(error)}
            summary["refused"] += 1
        write_atomic(answer_path(answers, request), result)
    return {**summary, "step": step, "seconds": round(time.monotonic() - start, 3)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=Path, required=True, help="folder of request files (read-only)")
    parser.add_argument("--models", type=Path, required=True, help="folder of ckpt-<step>.pt checkpoints")
    parser.add_argument("--answers", type=Path, required=True, help="folder the answers are written to")
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto (cuda when there is one)")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    try:
        summary = run(args.requests, args.models, args.answers, device)
    except FileNotFoundError as error:
        print(str(error), file=sys.stderr)
        sys.exit(NO_MODEL_EXIT_CODE)
    print(json.dumps(summary, sort_keys=True), flush=True)
    return summary


if __name__ == "__main__":
    main()
