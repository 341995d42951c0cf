"""The pack's tests run in its own environment (policy/venv, `make install-policy`), from any folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
