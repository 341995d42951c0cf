"""Local HTTP stand-ins for what the code under test calls (an API server, inference services, an LLM server):
one way to run a server on a free port in the background and stop it, and a quiet handler that answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing (pytest shows failures, not request lines) and answers in one call."""

    def reply(self, status: int, body: bytes = b"", content_type: str = "application/json") -> None:
        self.send_response(status)
        if body:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def base_url(server: HTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@contextmanager
def running(server: HTTPServer) -> Iterator[HTTPServer]:
    """``server`` answering in a background thread until the block ends (polling fast, so it stops promptly)."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[HTTPServer]:
    """A threading server for ``handler`` on a free local port, running for the block."""
    with running(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield server
