"""The DigitNet checkpoint the e2e run uploads for batch-inference's probe (ops/e2e/content/), made as the training
Job makes one: docker/jobs/train.py, one step on the CPU on synthetic digits. Committed, so a run needs no torch on
the machine that drives it (the Linux torch wheel with CUDA's libraries is about 3 GB); tests/test_probes.py checks
that the committed file still loads as the batch job loads a checkpoint.

    .venv/bin/python scripts/e2e_checkpoint.py      # needs make install-dev (torch)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ops.e2e.probes import DIGITNET_CHECKPOINT  # noqa: E402  (the repository's own module)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, str(ROOT / "docker/jobs/train.py"), "--checkpoints", folder, "--steps", "1",
                        "--batch-size", "8", "--data", "synthetic", "--device", "cpu"], check=True,
                       capture_output=True, timeout=600)
        (made,) = Path(folder).glob("ckpt-*.pt")
        shutil.copyfile(made, ROOT / DIGITNET_CHECKPOINT)
    print(f"wrote {DIGITNET_CHECKPOINT} ({(ROOT / DIGITNET_CHECKPOINT).stat().st_size} bytes)")


if __name__ == "__main__":
    main()
