"""Parsing and validating `POST /api/answer` bodies.

Every way a body can be wrong ends in `BadRequest` with a message that names the
field and the limit, so the route answers 400 and never 500 for bad input.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

FIELDS = ("question", "context")
MAX_BODY_BYTES = 1024 * 1024
MAX_QUESTION_CHARS = 1_000
MAX_BATCH = 32


def max_context_chars() -> int:
    """Longest context accepted; `MRC_MAX_CONTEXT_CHARS` raises or lowers it per deployment."""
    return int(os.environ.get("MRC_MAX_CONTEXT_CHARS", "20000"))


class BadRequest(ValueError):
    """The body cannot be answered; the message is returned to the caller as is."""


@dataclass(frozen=True)
class Query:
    """One question about one context."""

    question: str
    context: str


def _query(item: object, where: str) -> Query:
    if not isinstance(item, dict):
        raise BadRequest(f"{where} must be a JSON object with fields {', '.join(FIELDS)}")
    unknown = sorted(set(item) - set(FIELDS))
    if unknown:
        raise BadRequest(f"{where} has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}")
    values = {}
    for field, limit in (("question", MAX_QUESTION_CHARS), ("context", max_context_chars())):
        if field not in item:
            raise BadRequest(f"{where} is missing field '{field}'")
        value = item[field]
        if not isinstance(value, str):
            raise BadRequest(f"{where}.{field} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise BadRequest(f"{where}.{field} is empty")
        if len(value) > limit:
            raise BadRequest(f"{where}.{field} has {len(value)} characters; the limit is {limit}")
        values[field] = value
    return Query(**values)


def parse_queries(body: bytes) -> tuple[list[Query], bool]:
    """The queries in a body, and whether it was a batch (a JSON array) or a single object."""
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"body has {len(body)} bytes; the limit is {MAX_BODY_BYTES}")
    if not body.strip():
        raise BadRequest('body is empty; send {"question": "...", "context": "..."}')
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"body is not valid JSON: {error}") from None
    if isinstance(data, list):
        if not data:
            raise BadRequest("batch is empty")
        if len(data) > MAX_BATCH:
            raise BadRequest(f"batch has {len(data)} items; the limit is {MAX_BATCH}")
        return [_query(item, f"item[{index}]") for index, item in enumerate(data)], True
    return [_query(data, "body")], False
