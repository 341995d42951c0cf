"""Nothing secret reaches a run's file: every string in it (step details, probe output, leftover ids, sources) passes
through ``Scrubber.text`` before it is written, whatever produced it.

Hidden: what the run knows to be secret (the stack's secret outputs, such as its kubeconfig; the values of the
environment's credential variables; the subscription and tenant ids), anything shaped like a credential
(``program.config.errors.redact``: tokens, keys, connection strings' and SAS URLs' secret parts, passwords in URLs,
JWTs, private keys), and the subscription id of every Azure resource id (``/subscriptions/<subscription>/...``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from offline.runs import Run
from program.config.errors import redact

GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
SUBSCRIPTION_IN_ID = re.compile(rf"(?i)(/subscriptions/){GUID}")
SECRET_VARIABLE = re.compile(r"token|key|secret|password|passphrase|pwd|credential", re.IGNORECASE)
"""Environment variables whose values are taken for secrets (AZURE_CLIENT_SECRET, PULUMI_ACCESS_TOKEN,
PULUMI_CONFIG_PASSPHRASE, ARM_ACCESS_KEY, ...)."""
SHORTEST = 8
"""A known secret shorter than this is not searched for: it would hide ordinary words."""


@dataclass
class Scrubber:
    secrets: set[str] = field(default_factory=set)

    def hide(self, values: Iterable[Any]) -> None:
        """Hide these values (strings of ``SHORTEST`` characters or more; others are ignored) wherever they appear."""
        self.secrets |= {v for v in values if isinstance(v, str) and len(v) >= SHORTEST}

    def hide_environment(self, environ: Mapping[str, str] = os.environ) -> None:
        self.hide(v for k, v in environ.items() if SECRET_VARIABLE.search(k))

    def text(self, text: str) -> str:
        text = SUBSCRIPTION_IN_ID.sub(r"\1<subscription>", text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = re.sub(re.escape(secret), f"<hidden, {len(secret)} characters>", text, flags=re.IGNORECASE)
        return redact(text)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value

    def run(self, run: Run) -> Run:
        """``run`` with every string in it scrubbed."""
        return Run.model_validate(self.value(run.model_dump(mode="json")))
