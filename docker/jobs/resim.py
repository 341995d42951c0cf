"""One shard of an AV re-simulation: read recordings from the input volume, do GPU work, write results.

Run as an Indexed Job: pod i of N (``JOB_COMPLETION_INDEX``, ``--shards N``) takes every N-th input
file in sorted order. Each result is written to a temporary file and renamed, and a file whose
result exists is skipped. So a pod evicted from a spot node and retried loses nothing and
duplicates nothing. Any bytes are a recording, so the only file that fails is one that cannot be read: on a blob
volume that means the mount has failed (EIO, ENOTCONN), not that the recording is bad. It is named in one line, the
shard goes on with the others and then exits 1, so the Job retries the index (``backoffLimitPerIndex``) instead of
completing without its results. A missing input folder or a bad index ends the shard with one line and exit status 2,
which the Job does not retry.

    python resim.py --input /mnt/input --output /mnt/output --shards 20 [--index 3]
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import torch

from jobio import (
    EXIT_BAD_INPUT,
    EXIT_RETRY,
    ArgumentParser,
    device_name,
    fail,
    input_files,
    input_folder,
    non_negative_int,
    positive_int,
    remove_partials,
    write_atomic,
)

EXIT_USAGE = EXIT_BAD_INPUT
"""Nothing to retry: missing input folder or a bad index. The Job's pod failure policy fails fast on it."""
FEATURES = 256


def shard(files: list[str], index: int, shards: int) -> list[str]:
    """The files pod ``index`` of ``shards`` owns: every shards-th one of the sorted list."""
    return sorted(files)[index::shards]


def result_path(output: Path, name: str) -> Path:
    return output / f"{name}.result.json"


def simulate(data: bytes, device: torch.device, rounds: int = 8) -> dict:
    """Stand-in for a re-simulation step: the recording as a signal through a fixed random network."""
    signal = torch.frombuffer(bytearray(data or b"\0"), dtype=torch.uint8).to(device).float().div(255)
    signal = torch.nn.functional.pad(signal, (0, (-len(signal)) % FEATURES)).view(-1, FEATURES)
    weights = torch.randn(FEATURES, FEATURES, generator=torch.Generator().manual_seed(7)).to(device) / FEATURES**0.5
    for _ in range(rounds):
        signal = torch.tanh(signal @ weights)
    spectrum = torch.fft.rfft(signal, dim=1).abs().mean(dim=0)
    return {"frames": signal.shape[0], "energy": round(float(signal.pow(2).mean()), 6),
            "spectrum_peak": int(spectrum.argmax())}


def run(input_dir: Path, output: Path, index: int, shards: int, device: torch.device,
        fail_after: int | None = None) -> dict:
    input_folder(input_dir, "input folder")
    if not 0 <= index < shards:
        fail(f"index {index} (--index or JOB_COMPLETION_INDEX) is outside 0..{shards - 1} (--shards {shards})")
    mine = shard(input_files(input_dir), index, shards)
    cleaned = remove_partials([result_path(output, name) for name in mine])
    done = skipped = unread = 0
    for name in mine:
        target = result_path(output, name)
        if target.exists():
            skipped += 1
            continue
        try:
            data = (input_dir / name).read_bytes()
        except OSError as error:  # the others are still simulated; main exits EXIT_RETRY so this one is retried
            print(f"shard {index}: could not read {name}: {error.strerror or error}", flush=True)
            unread += 1
            continue
        began = time.perf_counter()
        result = simulate(data, device)
        write_atomic(target, {"input": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                              "shard": index, **result})
        done += 1
        print(f"shard {index}: {name} in {1000 * (time.perf_counter() - began):.1f} ms", flush=True)
        if fail_after is not None and done >= fail_after:
            raise RuntimeError(f"simulated crash after {done} file(s)")
    summary = {"shard": index, "shards": shards, "files": len(mine), "processed": done, "skipped": skipped,
               "unread": unread, "partials_removed": cleaned, "device": device.type}
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--shards", type=positive_int, required=True)
    parser.add_argument("--index", type=non_negative_int, default=None, help="default: $JOB_COMPLETION_INDEX")
    parser.add_argument("--device", type=device_name, default="auto")
    parser.add_argument("--fail-after", type=positive_int, default=None, help="crash after N files (tests retries)")
    args = parser.parse_args(argv)
    index = args.index
    if index is None:
        given = os.environ.get("JOB_COMPLETION_INDEX", "")
        if not given.isdigit():
            fail(f"JOB_COMPLETION_INDEX={given!r} is not a shard index; run as an Indexed Job or pass --index")
        index = int(given)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    summary = run(args.input, args.output, index, args.shards, device, args.fail_after)
    if summary["unread"]:
        print(f"error: shard {index}: {summary['unread']} recording(s) could not be read (is the input volume "
              f"healthy?); exit {EXIT_RETRY} so the Job retries this index", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_RETRY)
    return summary


if __name__ == "__main__":
    main()
