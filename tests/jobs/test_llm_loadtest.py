"""The LLM load test against a local stand-in for an OpenAI-compatible streaming server."""

from __future__ import annotations

import json
import math
import time

import pytest

from tests.docker_modules import import_from
from tests.local_http import QuietHandler, base_url, serving

llm_loadtest = import_from("jobs", "llm_loadtest")

FIRST_TOKEN_S, TOKEN_S, TOKENS = 0.05, 0.005, 9


class StreamingChat(QuietHandler):
    """Answers /v1/chat/completions as vLLM streams: a role event, content events, a usage event, [DONE]."""

    seen: list = []

    def do_GET(self):
        self.reply(200, b'{"data": [{"id": "tiny"}]}' if self.path == "/v1/models" else b"{}")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body))
        if body["model"] != "tiny":
            self.reply(404, b'{"error": "model not found"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self._event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        time.sleep(FIRST_TOKEN_S)
        for i in range(TOKENS):
            if i:
                time.sleep(TOKEN_S)
            self._event({"choices": [{"index": 0, "delta": {"content": f"t{i} "}}]})
        self._event({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": TOKENS,
                                              "total_tokens": 12 + TOKENS}})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, data: dict) -> None:
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


@pytest.fixture(scope="module")
def server_url():
    with serving(StreamingChat) as server:
        yield f"{base_url(server)}/v1"


def test_every_request_streams_and_reports_first_token_and_decode_speed(server_url):
    StreamingChat.seen.clear()
    report = llm_loadtest.run(server_url, "tiny", concurrency=4, requests=8, max_tokens=16)
    assert report["succeeded"] == 8 and report["errors"] == []
    assert report["generated_tokens"] == 8 * TOKENS  # the server's usage, not a count of events
    assert FIRST_TOKEN_S <= report["ttft_s"]["p50"] < FIRST_TOKEN_S + 0.2
    # 8 tokens after the first, one every 5 ms: about 200 tokens/s (sleeps only ever run long).
    assert 50 < report["decode_tokens_per_s"]["p50"] <= 1 / TOKEN_S * 1.05
    path, body = StreamingChat.seen[0]
    assert path == "/v1/chat/completions" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == 16


def test_a_refused_request_is_an_error_not_a_number(server_url):
    report = llm_loadtest.run(server_url, "missing", concurrency=2, requests=2, max_tokens=8)
    assert report["succeeded"] == 0 and report["errors"] and "HTTPError" in report["errors"][0]
    assert report["ttft_s"]["p50"] is None
    json.dumps(report, allow_nan=False)  # valid JSON for whoever reads the log


def test_the_server_is_awaited_until_it_lists_its_models(server_url, capsys):
    llm_loadtest.wait_until_ready(server_url, timeout=5)
    with pytest.raises(SystemExit) as e:
        llm_loadtest.wait_until_ready("http://127.0.0.1:9/v1?api-key=sk-abc", timeout=0)
    assert e.value.code == 1 and capsys.readouterr().err == (
        "error: http://127.0.0.1:9/v1?<hidden> did not answer /models within 0 s\n")


class CutShort(QuietHandler):
    """A server that dies mid-answer: one chunk of its stream, then the connection closes (no last chunk, no
    [DONE]); or, on /v1/models, a reply that is not HTTP."""

    protocol_version = "HTTP/1.1"  # chunked, as vLLM (uvicorn) streams

    def do_GET(self):
        self.wfile.write(b"SSH-2.0-not-http\r\n\r\n")
        self.close_connection = True

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        data = f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': 't0 '}}]})}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.close_connection = True


def test_a_stream_cut_short_is_a_failed_request_not_a_short_answer():
    """Issue 35 audit NIT (IncompleteRead): a chunked body closed early ends http.client's line reader quietly, so
    the request counted as a success of 0 tokens; a reply that is not HTTP (BadStatusLine) was a traceback."""
    with serving(CutShort) as server:
        url = f"{base_url(server)}/v1"
        report = llm_loadtest.run(url, "tiny", concurrency=2, requests=2, max_tokens=8)
        with pytest.raises(SystemExit) as e:
            llm_loadtest.wait_until_ready(url, timeout=0)
    assert report["succeeded"] == 0 and report["generated_tokens"] == 0
    assert report["errors"] == ["the stream ended before its [DONE] event (the server closed it mid-answer)"]
    assert e.value.code == 1
    assert llm_loadtest.send(llm_loadtest.chat_request("http://127.0.0.1:9/v1", "tiny", "hi", 8), 5).error.startswith(
        "URLError: ")


@pytest.mark.parametrize("values, q, expected", [
    ([3.0, 1.0, 2.0, 4.0], 50, 2.0), ([3.0, 1.0, 2.0, 4.0], 90, 4.0), ([5.0], 99, 5.0),
    ([math.nan, 1.0], 50, 1.0), ([], 50, math.nan),
])
def test_percentiles_are_nearest_rank_over_finite_values(values, q, expected):
    got = llm_loadtest.percentile(values, q)
    assert got == expected or (math.isnan(got) and math.isnan(expected))
