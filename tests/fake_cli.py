"""A stand-in for kubectl or az in the e2e probe and drill tests: it answers each call from a script of recorded
answers and logs the call, so a test drives the real code paths (subprocesses, timeouts, port-forwards) offline.

    python tests/fake_cli.py SCRIPT.json ARG...

``SCRIPT.json``: ``{"rules": [{"match": [word, ...], "answers": [answer, ...]}, ...]}``. A call takes the first rule
whose words all appear among its arguments; each call of a rule takes its next answer, the last one repeating. An
answer: ``stdout``, ``stderr``, ``exit`` (0), ``sleep`` (seconds before answering: a hung tool), or ``serve``
(``{"status": 200, "body": "..."}``: listen on a free local port, say so as ``kubectl port-forward`` does, and answer
every request until stopped). Every call is appended to ``SCRIPT.log`` (one JSON list per line), with the text of a
file passed with ``-f`` and the files under an ``--source`` folder, and every request a server answers to
``SCRIPT.requests``.
"""

from __future__ import annotations

import fcntl
import json
import sys
import time
from pathlib import Path
from typing import Any


def _answer(script: Path, argv: list[str]) -> dict[str, Any]:
    rules = json.loads(script.read_text())["rules"]
    state = script.with_suffix(".state")
    with state.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        counts = json.loads(handle.read() or "{}")
        for index, rule in enumerate(rules):
            if all(word in argv for word in rule["match"]):
                taken = counts.get(str(index), 0)
                counts[str(index)] = taken + 1
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps(counts))
                answers = rule["answers"]
                return answers[min(taken, len(answers) - 1)]
    return {"stderr": f"fake: no rule for {' '.join(argv)}", "exit": 97}


def _log(script: Path, argv: list[str]) -> None:
    extra: dict[str, Any] = {}
    if "-f" in argv:
        extra["file"] = Path(argv[argv.index("-f") + 1]).read_text()
    if "--source" in argv and Path(argv[argv.index("--source") + 1]).is_dir():
        source = Path(argv[argv.index("--source") + 1])
        extra["files"] = {p.relative_to(source).as_posix(): p.read_bytes().decode(errors="replace")
                          for p in sorted(source.rglob("*")) if p.is_file()}
    with script.with_suffix(".log").open("a") as log:
        log.write(json.dumps([argv, extra] if extra else [argv]) + "\n")


def _serve(script: Path, answer: dict[str, Any], remote: str) -> None:
    import http.server  # here: its imports (email, ssl) were two thirds of every other call's CPU time

    requests = script.with_suffix(".requests")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            with requests.open("a") as log:
                log.write(json.dumps([self.command, self.path, body]) + "\n")
            data = answer.get("body", "").encode()
            self.send_response(answer.get("status", 200))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _reply

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(f"Forwarding from 127.0.0.1:{server.server_address[1]} -> {remote.lstrip(':')}", flush=True)
    server.serve_forever()


def main(argv: list[str]) -> int:
    script, args = Path(argv[0]), argv[1:]
    _log(script, args)
    answer = _answer(script, args)
    time.sleep(answer.get("sleep", 0))
    if "serve" in answer:
        remote = next((a for a in args if a.startswith(":")), ":0")
        _serve(script, answer["serve"], remote)
    sys.stdout.write(answer.get("stdout", ""))
    sys.stderr.write(answer.get("stderr", ""))
    return int(answer.get("exit", 0))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
