"""What the job scripts share: their arguments and bad input, and files in mounted volumes.

Arguments and input: a bad argument, or an input folder that is not there (its volume not mounted), ends the script
with one ``error:`` line naming it and exit status ``EXIT_BAD_INPUT``, which the Jobs' pod failure policies fail at
once instead of retrying; a bad item (a request, a checkpoint) is refused with one line and the run goes on. A file
that cannot be read is not a bad item: on a blob volume an I/O error usually means the mount has failed, so the run
writes nothing for it, goes on with the others and ends with ``EXIT_RETRY``, which the Job retries (what is finished
is skipped then).

Files: listing inputs, writing a result atomically, and clearing what a killed attempt left half-written. A blob
volume can lose a pod at any moment (spot eviction), so a result is written to a temporary name and renamed: readers
never see half a file, and a rerun skips what is done. A result is strict JSON: a value JSON cannot hold (NaN) is
refused, never written."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

EXIT_BAD_INPUT = 2
"""Bad arguments or input: retrying cannot help."""
EXIT_RETRY = 1
"""Some input could not be read (an I/O error on a mounted volume): the Job retries the pod, which skips what is
done."""


def fail(message: str) -> NoReturn:
    """End the script: one line on stderr, exit status ``EXIT_BAD_INPUT``."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_BAD_INPUT)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors (argparse prints its usage first) and exit status ``EXIT_BAD_INPUT``."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


def _number(kind: type, low: float, what: str, high: float | None = None):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (value >= low and (high is None or value <= high)):  # also refuses nan
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return parse


positive_int = _number(int, 1, "a whole number >= 1")
non_negative_int = _number(int, 0, "a whole number >= 0")
positive_float = _number(float, 1e-9, "a number > 0", float("inf"))
non_negative_float = _number(float, 0, "a number >= 0", float("inf"))
fraction = _number(float, 1e-9, "a fraction in (0, 1]", 1.0)
port = _number(int, 0, "a TCP port, 0 to 65535", 65535)


def device_name(text: str) -> str:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r}: allowed: auto, cpu, cuda, cuda:N")
    return text


def http_url(text: str) -> str:
    """An http(s) URL with a host."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{shown_url(text)!r} is not an http:// or https:// URL")
    return text


def shown_url(url: str) -> str:
    """``url`` as a message may print it: no password, no query (a function key travels as ``?code=``)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", ":<hidden>@")
    return urlunsplit((parts.scheme, netloc, parts.path, "<hidden>" if parts.query else "", ""))


def input_folder(path: Path, what: str) -> None:
    """An input folder must be there: missing, its volume is not mounted, which no retry mends."""
    if not path.is_dir():
        fail(f"{what} {path} {'is not a folder' if path.exists() else 'does not exist'} (is its volume mounted?)")


def input_files(root: Path) -> list[str]:
    """Every file below ``root`` (hidden ones aside), as sorted relative POSIX paths."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def write_atomic(path: Path, payload: dict) -> None:
    """``payload`` as JSON at ``path``, written under a temporary name and renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, sort_keys=True, allow_nan=False) + "\n"  # ValueError before anything is written
    tmp = path.with_name(f".{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def remove_partials(targets: list[Path]) -> int:
    """Temporary files an earlier, killed attempt at ``targets`` left behind; how many were removed."""
    removed = 0
    for target in targets:
        for leftover in target.parent.glob(f".{target.name}.tmp-*") if target.parent.is_dir() else []:
            leftover.unlink(missing_ok=True)
            removed += 1
    return removed
