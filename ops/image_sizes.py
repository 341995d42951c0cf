"""How big the GPU images' dependency layers are: the sum of the locked wheels' sizes on PyPI (PEP 700 ``size`` in
the simple index's JSON form), for the wheel each hash list picks on linux/amd64 and CPython 3.12. A wheel is a zip,
so the sum is close to what the image's pip layer weighs compressed in a registry, which is what a node downloads.

Regenerate on a networked machine: ``python -m ops image-sizes`` (writes ``offline/estimates/image_sizes.json``,
which the first-GPU-pod estimate reads; the base image is not counted: no container registry answers here).
"""

from __future__ import annotations

import argparse
import json
import re
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from offline.estimates import FOLDER as ESTIMATES
from offline.stack_files import REPO_ROOT

LOCKS = {"function": "docker/function/requirements.txt", "jobs": "docker/jobs/requirements.txt"}
"""Image repository → its hashed requirements lock."""
SIZES = ESTIMATES / "image_sizes.json"
INDEX = "https://pypi.org/simple/{name}/"
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)((?:\s*\\\s*--hash=sha256:[0-9a-f]{64})+)", re.M)
_LINUX_312 = re.compile(r"(cp312-cp312|cp3\d*-abi3|py3-none|py2\.py3-none)-([\w.]*manylinux[\w.]*x86_64|any)\.whl$")

Fetch = Callable[[str], Mapping]


def pypi_files(name: str) -> Mapping:
    request = urllib.request.Request(INDEX.format(name=name),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 (a fixed https address)
        return json.load(answer)


def wheel_bytes(lock_text: str, fetch: Fetch = pypi_files) -> dict[str, int]:
    """Bytes of the wheel pip installs for each pinned package, by ``name==version``; a package whose hashes match no
    linux/amd64 CPython 3.12 wheel is an error (the image could not install it either)."""
    found: dict[str, int] = {}
    for name, version, hashes in _PIN.findall(lock_text):
        wanted = set(re.findall(r"sha256:([0-9a-f]{64})", hashes))
        files = [f for f in fetch(name)["files"]
                 if f["hashes"].get("sha256") in wanted and _LINUX_312.search(f["filename"])]
        if not files:
            raise ValueError(f"{name}=={version}: no linux/amd64 CPython 3.12 wheel among its locked hashes")
        found[f"{name}=={version}"] = max(f["size"] for f in files)
    return found


def measure(root: Path, fetch: Fetch = pypi_files) -> dict[str, dict]:
    """Per image: its wheels' total and the five largest, in bytes."""
    result = {}
    for repository, lock in LOCKS.items():
        wheels = wheel_bytes((root / lock).read_text(), fetch)
        largest = sorted(wheels.items(), key=lambda kv: -kv[1])[:5]
        result[repository] = {"lock": lock, "wheels": len(wheels), "bytes": sum(wheels.values()),
                              "largest": dict(largest)}
    return result


def write(root: Path, path: Path = SIZES, fetch: Fetch = pypi_files) -> dict[str, dict]:
    sizes = measure(root, fetch)
    path.write_text(json.dumps(sizes, indent=1, sort_keys=True) + "\n")
    return sizes


def image_sizes_command(args: argparse.Namespace) -> int:
    del args
    for repository, found in write(REPO_ROOT).items():
        print(f"{repository}: {found['wheels']} wheels, {found['bytes'] / 1e9:.2f} GB")
    print(f"wrote {SIZES.relative_to(REPO_ROOT)}")
    return 0
