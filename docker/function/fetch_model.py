"""Download the function's model from its authoritative source, Hugging Face, at a pinned commit, and check every
file against its sha256 before anything uses it (run once, by the image build).

    python fetch_model.py DEST
"""

from __future__ import annotations

import hashlib
import sys
import urllib.request
from pathlib import Path

REPO = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""The repository's commit: a branch would move."""
FILES = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
"""What reader.py loads (the BERT config and weights, the Rust tokenizer), each with its sha256 at REVISION."""
HUB = "https://huggingface.co"


def fetch(dest: Path, hub: str = HUB) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name, expected in FILES.items():
        url = f"{hub}/{REPO}/resolve/{REVISION}/{name}"
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            raise SystemExit(f"{url}: sha256 {digest}, expected {expected}; refusing the model")
        (dest / name).write_bytes(data)


if __name__ == "__main__":
    fetch(Path(sys.argv[1]))
