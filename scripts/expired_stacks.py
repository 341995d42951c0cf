"""Print, as a JSON list, the demo stacks whose resource group is past its `expires-at` tag.

    az group list --output json | python scripts/expired_stacks.py [--project aksgpu]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from components.expiry import expired_stacks  # noqa: E402
from stacks.config import PROJECT  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=PROJECT)
    args = parser.parse_args()
    groups = json.load(sys.stdin)
    print(json.dumps(expired_stacks(groups, dt.datetime.now(dt.timezone.utc), args.project)))


if __name__ == "__main__":
    main()
