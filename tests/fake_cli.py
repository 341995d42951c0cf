"""A stand-in for kubectl or az in the e2e probe and drill tests: it answers each call from a script of recorded
answers and logs the call, so a test drives the real code paths (subprocesses, timeouts, port-forwards) offline.

``SCRIPT.json``: ``{"rules": [{"match": [word, ...], "answers": [answer, ...]}, ...]}``. A call takes the first rule
whose words all appear among its arguments; each call of a rule takes its next answer, the last one repeating. An
answer: ``stdout``, ``stderr``, ``exit`` (0), ``sleep`` (seconds before answering: a hung tool), or ``serve``
(``{"status": 200, "body": "..."}``: listen on a free local port, say so as ``kubectl port-forward`` does, and answer
every request until stopped). Every call is appended to ``SCRIPT.log`` (one JSON list per line), with the text of a
file passed with ``-f`` and the files under an ``--source`` folder, and every request a server answers to
``SCRIPT.requests``.

The tests run it through ``shim(folder)`` (``fake SCRIPT.json ARG...``): a shell script that hands each call to this
module serving in the test process, and replays its answer (exit status, stdout, stderr; a ``sleep`` as a call that
does not answer, a ``serve`` as a process that forwards until stopped). Each call is still a process of its own, a
shell's instead of a Python interpreter's (about 15 ms of CPU each, the drill's and probes' tests make hundreds).
``shim(folder, name, handler)`` serves another stand-in the same way: ``handler(args)`` gives each call's answer, in
the same shape (with ``stdin_after``, ``handler(args, stdin)``).
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import itertools
import json
import select
import socketserver
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

Answerer = Callable[..., dict[str, Any]]
"""A stand-in's answer to one call's arguments (and its stdin, where its shim reads it): ``stdout``, ``stderr``,
``exit`` and ``sleep`` as above (``serve``, which logs requests beside its script, is a script's only)."""

_HANDLERS: dict[str, tuple[Answerer, bool]] = {}
"""A handler shim's key -> its handler, and whether the call's last field is its stdin."""
_KEYS = itertools.count()


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


def _server(script: Path, answer: dict[str, Any]) -> http.server.ThreadingHTTPServer:
    """An HTTP server on a free local port answering every request with ``answer``, not yet serving."""
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

    return http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def _forwarding(server: http.server.ThreadingHTTPServer, args: list[str]) -> str:
    """kubectl port-forward's line once it listens."""
    remote = next((a for a in args if a.startswith(":")), ":0")
    return f"Forwarding from 127.0.0.1:{server.server_address[1]} -> {remote.lstrip(':')}\n"


class _Calls(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = b""
            while b"\0" not in data or data.count(b"\0") < 1 + int(data.split(b"\0")[0]):
                chunk = self.request.recv(65536)
                if not chunk:
                    return
                data += chunk
            count, *argv = data.decode().split("\0")[:-1]
            script, args = Path(argv[0]), argv[1:int(count)]
            answer = self._answer(argv[0], args)
            if answer.get("sleep") and self._gone(answer["sleep"]):
                return  # a hung tool, killed before it answered
            if "serve" in answer:
                server = _server(script, answer["serve"])
                threading.Thread(target=server.serve_forever, daemon=True).start()
                self.request.sendall(f"hold\0{_forwarding(server, args)}\0\0".encode())
                self._gone(None)  # until the port-forward is stopped
                server.shutdown()
                server.server_close()
                return
            reply = f"{int(answer.get('exit', 0))}\0{answer.get('stdout', '')}\0{answer.get('stderr', '')}\0"
            self.request.sendall(reply.encode())

        @staticmethod
        def _answer(key: str, args: list[str]) -> dict[str, Any]:
            if key not in _HANDLERS:
                _log(Path(key), args)
                return _answer(Path(key), args)
            handler, reads_stdin = _HANDLERS[key]
            try:
                return handler(args[:-1], args[-1]) if reads_stdin else handler(args)
            except Exception:  # noqa: BLE001 - a stand-in's bug fails its call with its traceback, instead of hanging it
                return {"stderr": f"fake: {traceback.format_exc()}", "exit": 98}

        def _gone(self, seconds: float | None) -> bool:
            """Whether the call's process ended (its connection closed) within ``seconds`` (None: ever)."""
            return bool(select.select([self.request], [], [], seconds)[0]) and not self.request.recv(1)


@functools.cache
def _port() -> int:
    calls = _Calls(("127.0.0.1", 0), _Calls.Handler)
    threading.Thread(target=calls.serve_forever, daemon=True).start()
    return calls.server_address[1]


SHIM = """#!/bin/bash
exec 3<>/dev/tcp/127.0.0.1/{port}
{read}printf '%s\\0' {call} >&3
IFS= read -r -d '' code <&3; IFS= read -r -d '' out <&3; IFS= read -r -d '' err <&3
printf '%s' "$out"; printf '%s' "$err" >&2
if [ "$code" = hold ]; then read -r -d '' code <&3; exit 0; fi
exit "$code"
"""
"""``fake SCRIPT.json ARG...``: the call (fields NUL-ended: the count, SCRIPT.json, the arguments) to this module
serving in the test process, and its answer (exit status or ``hold``, stdout, stderr) replayed; ``hold``: a
port-forward, which reads until it is stopped. A handler's shim sends its key in place of SCRIPT.json, and its stdin
last where it reads it."""
STDIN = """input=
if [[ " $* " == *" {flag} - "* ]]; then input=$(cat; printf .); input=${{input%.}}; fi
"""
"""Where the call names its stdin as a flag's value (``gh api --input -``), its stdin, read whole (the trailing
newlines kept); nothing read otherwise, since a caller may leave stdin open."""


def shim(folder: Path, name: str = "fake", handler: Answerer | None = None, stdin_after: str | None = None) -> Path:
    """An executable ``folder/name`` that answers as ``python fake_cli.py`` would, from this process; with
    ``handler``, an executable taking the tool's own arguments that ``handler`` answers, from this process;
    ``stdin_after``: the flag whose value ``-`` has the call read its stdin (``STDIN``), handed to the handler."""
    fake, read = folder / name, ""
    if handler is None:
        call = '"$#" "$@"'
    else:
        key = f"handler-{next(_KEYS)}"
        _HANDLERS[key] = (handler, stdin_after is not None)
        call = f'"$(($# + 1))" {key} "$@"'
        if stdin_after is not None:
            read, call = STDIN.format(flag=stdin_after), f'"$(($# + 2))" {key} "$@" "$input"'
    fake.write_text(SHIM.format(port=_port(), call=call, read=read))
    fake.chmod(0o755)
    return fake

