"""The few Kubernetes API calls the GPU node controllers make (``node_repair_job.py``, ``node_gate_job.py``), as JSON
over HTTPS with the standard library: each runs from a ConfigMap in a pinned Python image, with this file beside it.
A refused connection, a timeout, a 429 or a 5xx is tried again a few times before it counts."""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
RETRIES = 3
"""Tries of a call that failed for a reason a moment may cure."""
TRANSIENT = {429, 500, 502, 503, 504}


class Api:
    """The few Kubernetes API calls this job makes, as JSON over HTTPS."""

    def __init__(self, base: str, token: str | None = None, context: ssl.SSLContext | None = None,
                 backoff: float = 1.0):
        self.base, self.token, self.context, self.backoff = base.rstrip("/"), token, context, backoff

    @classmethod
    def in_cluster(cls) -> Api:
        """The API server as the pod's service account sees it."""
        with open(f"{SERVICE_ACCOUNT}/token", encoding="utf-8") as f:
            token = f.read().strip()
        base = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
        return cls(base, token, ssl.create_default_context(cafile=f"{SERVICE_ACCOUNT}/ca.crt"))

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(self.base + path, method=method,  # noqa: S310 (the API server's https URL)
                                         data=json.dumps(body).encode() if body is not None else None)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        for attempt in range(RETRIES):
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30) as response:  # noqa: S310 (the same request)
                    return response.status, json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                answer = error.read()
                if error.code not in TRANSIENT or attempt == RETRIES - 1:
                    return error.code, json.loads(answer or b"{}") if answer.strip().startswith(b"{") else {
                        "message": answer.decode(errors="replace")[:200]}
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                if attempt == RETRIES - 1:
                    return 0, {"message": f"no answer: {error}"}
            time.sleep(self.backoff * (attempt + 1))
        raise AssertionError("unreachable")

    def get(self, path: str) -> dict[str, Any]:
        status, body = self.call("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {body.get('message', body)}")
        return body

    def patch(self, path: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """A JSON merge patch."""
        return self.call("PATCH", path, body, content_type="application/merge-patch+json")
