"""Download a model repository's serving files from Hugging Face at one commit (run once, by the image build).

    python fetch_weights.py MODEL REVISION DEST

Only what vLLM loads: the config, tokenizer and safetensors weights, never duplicate PyTorch ``.bin`` copies or
other formats. The revision is a commit, so every build of the same arguments holds the same bytes.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from huggingface_hub import snapshot_download

SERVING_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
"""Configs and the safetensors index (json), weights, tokenizers (merges.txt, SentencePiece .model, tiktoken) and
chat templates."""


def fetch(model: str, revision: str, dest: Path) -> None:
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise SystemExit(f"revision {revision!r}: a commit (40 hex characters) is required; a branch would move")
    snapshot_download(model, revision=revision, local_dir=dest, allow_patterns=SERVING_FILES)
    if not list(dest.glob("*.safetensors")):
        raise SystemExit(f"{model}@{revision}: no safetensors weights; vLLM would have nothing to load")
    shutil.rmtree(dest / ".cache", ignore_errors=True)  # the client's download bookkeeping


if __name__ == "__main__":
    fetch(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
