"""How big the GPU images' dependency layers are: the sum of the locked wheels' sizes on PyPI (PEP 700 ``size`` in
the simple index's JSON form), for the wheel pip installs from each hash list on linux/amd64 and CPython 3.12: the
most preferred of the compatible tags, as packaging.tags orders them for the platform the locks are compiled for
(Makefile ``lock``: x86_64-manylinux_2_28). A wheel is a zip, so the sum is close to what the image's pip layer
weighs compressed in a registry, which is what a node downloads.

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

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from offline.estimates import FOLDER as ESTIMATES
from offline.stack_files import REPO_ROOT

LOCKS = {"function": "docker/function/requirements.txt", "jobs": "docker/jobs/requirements.txt"}
"""Image repository → its hashed requirements lock."""
SIZES = ESTIMATES / "image_sizes.json"
INDEX = "https://pypi.org/simple/{name}/"
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)((?:\s*\\\s*--hash=sha256:[0-9a-f]{64})+)", re.M)
PYTHON = (3, 12)
GLIBC_MINOR = 28
"""The locks' target, manylinux_2_28 (glibc 2.28), and the images' Python."""


def _platforms() -> list[str]:
    """x86_64 manylinux platforms from glibc 2.28 down, each with its legacy alias (PEP 600), as pip orders them."""
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    found = []
    for minor in range(GLIBC_MINOR, 4, -1):
        found.append(f"manylinux_2_{minor}_x86_64")
        if minor in legacy:
            found.append(f"{legacy[minor]}_x86_64")
    return [*found, "linux_x86_64"]


PREFERENCE: dict[Tag, int] = {tag: rank for rank, tag in enumerate(
    [*cpython_tags(PYTHON, platforms=_platforms()),
     *compatible_tags(PYTHON, interpreter=f"cp{PYTHON[0]}{PYTHON[1]}", platforms=_platforms())])}
"""Every tag the images' pip accepts, most preferred first (what packaging.tags.sys_tags yields there)."""


def _rank(filename: str) -> int | None:
    """How much pip prefers this file (lower is better), or None where it would not install it."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:  # an sdist
        return None
    ranks = [PREFERENCE[t] for t in tags if t in PREFERENCE]
    return min(ranks) if ranks else None

Fetch = Callable[[str], Mapping]


def pypi_files(name: str) -> Mapping:
    request = urllib.request.Request(INDEX.format(name=name),  # noqa: S310 (PyPI's https index)
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 (a fixed https address)
        return json.load(answer)


def wheel_bytes(lock_text: str, fetch: Fetch = pypi_files) -> dict[str, int]:
    """Bytes of the wheel pip installs for each pinned package, by ``name==version``; a package whose hashes match no
    linux/amd64 CPython 3.12 wheel is an error (the image could not install it either)."""
    found: dict[str, int] = {}
    for name, version, hashes in _PIN.findall(lock_text):
        wanted = set(re.findall(r"sha256:([0-9a-f]{64})", hashes))
        files = [(rank, f["size"]) for f in fetch(name)["files"]
                 if f["hashes"].get("sha256") in wanted and (rank := _rank(f["filename"])) is not None]
        if not files:
            raise ValueError(f"{name}=={version}: no linux/amd64 CPython 3.12 wheel among its locked hashes")
        found[f"{name}=={version}"] = min(files)[1]
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
