"""Load an OpenAI-compatible LLM endpoint: N concurrent streaming chat requests, reporting time to first token
and tokens per second at the percentiles, and the aggregate throughput.

    python llm_loadtest.py --url http://llm.llm-serving.svc.cluster.local/v1 --model qwen2.5-1.5b-instruct \
        [--concurrency 16] [--requests 64] [--max-tokens 128]

Each request streams (server-sent events) and asks for usage in its last event, so the token count is the
server's, not a guess. Time to first token runs from sending the request to the first event with content;
tokens per second is a request's generated tokens after the first over the time they took (decode speed).
"""

from __future__ import annotations

import http.client
import json
import math
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from jobio import ArgumentParser, http_url, non_negative_float, positive_float, positive_int, shown_url

PROMPTS = [
    "Explain in three sentences what a GPU node pool in Kubernetes is for.",
    "Write a short haiku about spot virtual machines being evicted.",
    "List four things to check when a pod stays Pending for a GPU.",
    "Summarise why a model server needs a startup probe, in two sentences.",
]


@dataclass(frozen=True)
class Result:
    ok: bool
    ttft_s: float = math.nan
    total_s: float = math.nan
    tokens: int = 0
    error: str = ""

    @property
    def decode_tokens_per_s(self) -> float:
        """Generated tokens after the first, per second after the first arrived."""
        decode = self.total_s - self.ttft_s
        return (self.tokens - 1) / decode if self.tokens > 1 and decode > 0 else math.nan


def chat_request(url: str, model: str, prompt: str, max_tokens: int) -> urllib.request.Request:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}, "temperature": 0}
    return urllib.request.Request(f"{url.rstrip('/')}/chat/completions", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json", "Accept": "text/event-stream"})


NETWORK_ERRORS = (urllib.error.URLError, OSError, http.client.HTTPException)
"""What a request to a server that is down, restarting or dying mid-answer raises: refused or reset connections
(OSError), a status line that is not HTTP (BadStatusLine), a body cut short (IncompleteRead)."""


def send(request: urllib.request.Request, timeout: float) -> Result:
    """One streamed answer. It counts only when the stream ends with ``[DONE]``: a server that dies mid-answer closes
    the chunked body, which http.client's line reader ends quietly (its peek swallows the IncompleteRead), and the
    request would pass for a short answer."""
    began = time.perf_counter()
    first = None
    tokens = 0
    done = False
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for raw in response:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if first is None and any(c.get("delta", {}).get("content") for c in event.get("choices", [])):
                    first = time.perf_counter()
                if event.get("usage"):
                    tokens = int(event["usage"]["completion_tokens"])
    except (*NETWORK_ERRORS, ValueError, KeyError) as e:
        return Result(False, error=f"{type(e).__name__}: {e}")
    end = time.perf_counter()
    if not done:
        return Result(False, error="the stream ended before its [DONE] event (the server closed it mid-answer)")
    if first is None:
        return Result(False, error="no content in the stream")
    return Result(True, first - began, end - began, tokens)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0-100) of the finite values; NaN without any."""
    finite = sorted(v for v in values if math.isfinite(v))
    if not finite:
        return math.nan
    return finite[max(0, math.ceil(q / 100 * len(finite)) - 1)]


def _rounded(value: float, digits: int) -> float | None:
    """JSON has no NaN: a statistic of no values is null."""
    return round(value, digits) if math.isfinite(value) else None


def wait_until_ready(url: str, timeout: float) -> None:
    """Poll ``/models`` until the server answers (a replica may still be loading its model)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=10) as response:
                if response.status == 200:
                    return
        except NETWORK_ERRORS:
            pass
        if time.monotonic() > deadline:
            print(f"error: {shown_url(url)} did not answer /models within {timeout:.0f} s", file=sys.stderr)
            raise SystemExit(1)
        time.sleep(5)


def run(url: str, model: str, concurrency: int, requests: int, max_tokens: int, timeout: float = 300.0) -> dict:
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(requests)]
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(lambda p: send(chat_request(url, model, p, max_tokens), timeout), prompts))
    wall = time.perf_counter() - began
    ok = [r for r in results if r.ok]
    ttft = [r.ttft_s for r in ok]
    speed = [r.decode_tokens_per_s for r in ok]
    report = {
        "model": model, "concurrency": concurrency, "requests": requests, "succeeded": len(ok),
        "errors": sorted({r.error for r in results if not r.ok}),
        "ttft_s": {f"p{q}": _rounded(percentile(ttft, q), 4) for q in (50, 90, 99)},
        # The slow tail of a speed is its low percentile.
        "decode_tokens_per_s": {f"p{q}": _rounded(percentile(speed, q), 1) for q in (50, 10)},
        "generated_tokens": sum(r.tokens for r in ok),
        "throughput_tokens_per_s": _rounded(sum(r.tokens for r in ok) / wall, 1) if wall > 0 else None,
        "wall_s": round(wall, 3),
    }
    print(json.dumps(report), flush=True)
    return report


if __name__ == "__main__":
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", type=http_url, required=True, help="the OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--concurrency", type=positive_int, default=16)
    parser.add_argument("--requests", type=positive_int, default=64)
    parser.add_argument("--max-tokens", type=positive_int, default=128)
    parser.add_argument("--timeout", type=positive_float, default=300.0, help="per request, seconds")
    parser.add_argument("--ready-timeout", type=non_negative_float, default=900.0,
                        help="waiting for the server, seconds")
    args = parser.parse_args()
    wait_until_ready(args.url, args.ready_timeout)
    report = run(args.url, args.model, args.concurrency, args.requests, args.max_tokens, args.timeout)
    raise SystemExit(0 if report["succeeded"] == args.requests else 1)
