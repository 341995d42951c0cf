"""What a bad stack file gets back: one line per problem, naming the key, the bad value and what is allowed.

The program turns a ``ConfigError`` into a ``pulumi.RunError`` (printed without a traceback); the offline tools print
it. A stack file with several mistakes hears about all of them at once (``ConfigError.several``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """One bad config value, or (``several``) every bad value of a stack file, one line each."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        self.problems: list[ConfigError] = [self]
        super().__init__(f"invalid config {key}={show(masked(value, key))}: {redact(allowed)}")

    @classmethod
    def several(cls, problems: Sequence[ConfigError]) -> ConfigError:
        """All of ``problems`` as one error: the first one's key and value, every problem's line in its text."""
        if len(problems) == 1:
            return problems[0]
        error = cls(problems[0].key, problems[0].value, problems[0].allowed)
        error.problems = [p for problem in problems for p in problem.problems]
        error.args = ("\n".join(str(p) for p in error.problems),)
        return error


class StackFileError(ConfigError):
    """A stack file that is not YAML, or not a mapping: ``FILE:LINE:COLUMN: what is wrong``."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem, "not a readable stack file")
        self.args = (f"{where}: {problem}",)


def show(value: Any) -> str:
    """A value as the error prints it: JSON, so strings are quoted and lists read as lists."""
    return json.dumps(value, sort_keys=True, default=str)


SENSITIVE_NAME = re.compile(r"token|key|secret|password", re.IGNORECASE)
"""Names whose values an error never prints: whatever is under them is taken for a credential."""
_CREDENTIAL = re.compile("|".join((
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,})",  # GitHub tokens (docs.github.com: token formats)
    r"\bpul-[0-9a-f]{40}\b",  # Pulumi access tokens
    r"\bhf_[A-Za-z0-9]{20,}",  # Hugging Face tokens
    r"\bxox[abpors]-[\w-]{10,}",  # Slack tokens
    # A Slack incoming webhook's path (detect-secrets v1.5.0 plugins/slack.py; gitleaks v8.30.0 slack-webhook-url)
    r"(?:(?<=hooks\.slack\.com/services/)|(?<=hooks\.slack\.com/workflows/)|(?<=hooks\.slack\.com/triggers/))"
    r"[\w+/-]{8,}",
    # GitLab tokens: the prefixes of detect-secrets v1.5.0 plugins/gitlab_token.py and gitleaks v8.30.0 (glffct;
    # routable tokens carry a '.'), and runner registration tokens
    r"\b(?:glpat|gloas|gldt|glrt|glcbt|glptt|glft|glimt|glagent|glsoat|glffct)-[\w.-]{20,}|\bGR1348941[\w-]{20,}",
    r"\bAIza[\w-]{35}(?![\w-])",  # Google API keys (gitleaks v8.30.0 gcp-api-key)
    # Azure DevOps personal access tokens in the legacy format: 52 of [2-7a-z] (microsoft/security-utilities
    # SEC101/102 AdoLegacyPat, which also checks an embedded checksum; hiding more costs nothing here)
    r"(?<![2-7a-z])[2-7a-z]{52}(?![2-7a-z])",
    # A legacy Azure AI services (Cognitive Services, Azure OpenAI) key: 32 lowercase hex characters alone
    # (microsoft/security-utilities SEC000/002 Unclassified16ByteHexadecimalString); commits (40) and digests (64)
    # are longer runs. The current 84-character keys are caught by the key-like rule below.
    r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])",
    r"\b(?:sk|rk)-[\w-]{20,}",  # OpenAI-style API keys
    r"\bA[KS]IA[0-9A-Z]{16}\b",  # AWS access key ids
    r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*",  # JSON Web Tokens (Entra ID, GitHub OIDC)
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*(?:-----END [A-Z ]*PRIVATE KEY-----)?",
    # A connection string's or SAS URL's secret part: AccountKey=..., SharedAccessKey=..., sig=...
    r"(?i:\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig|password|pwd|client_secret|code)=)[^;&\s\"']+",
    r"(?<=://)[^/@\s:]+:[^/@\s]+(?=@)",  # user:password@ in a URL
    # Key-like: 32+ base64 characters mixing upper, lower case and digits (an Azure storage key), not plain hex
    # (commit and image digests), a path or a resource id; or an Entra ID client secret (gitleaks'
    # azure-ad-client-secret rule: three characters, a digit, Q~, 31-34 more).
    r"(?<![\w+/=~.-])(?!/)(?=[\w+/=]*[A-Z])(?=[\w+/=]*[a-z])(?=[\w+/=]*\d)[A-Za-z0-9+/]{32,}={0,2}(?![\w+/=~.-])",
    r"(?<![\w~.-])[\w~.]{3}\dQ~[\w~.-]{31,34}",
)))


def _hidden(text: str) -> str:
    return f"<hidden, {len(text)} character{'s' if len(text) != 1 else ''}>"


def looks_like_credential(text: str) -> bool:
    """``text`` holds something shaped like a token, key, password or private key."""
    return bool(_CREDENTIAL.search(text))


def redact(text: str) -> str:
    """``text`` with every credential-shaped part replaced by ``<hidden, N characters>`` (a connection string
    keeps its ``AccountKey=``, a URL its user name)."""
    def hide(match: re.Match[str]) -> str:
        found = match.group(0)
        name, sep, secret = found.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_]+", name):
            return f"{name}={_hidden(secret)}"
        user, sep, secret = found.partition(":")
        if sep and "://" not in found and not found.startswith("-----"):
            return f"{user}:{_hidden(secret)}"
        return _hidden(found)
    return _CREDENTIAL.sub(hide, text)


def masked(value: Any, name: str = "") -> Any:
    """``value`` as a message may show it: everything under a name that says token, key, secret or password
    hidden, and every credential-shaped string hidden wherever it is."""
    if isinstance(value, dict):
        return {k: masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v, name) for v in value]
    leaf = re.split(r"[.:\[\]]", name.rstrip("]"))[-1] if name else ""
    if value not in (None, "", True, False) and SENSITIVE_NAME.search(leaf):
        return _hidden(str(value))
    return redact(value) if isinstance(value, str) else value


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``did you mean X?`` for the closest of ``choices`` (case-insensitive), or nothing."""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return f"did you mean {by_lower[close[0]]}? " if close else ""


def validated(value: T | None, key: str) -> T:
    """``value``, which the stack's checks required before any resource was declared (their error names ``key``):
    None here is a bug in those checks, not a config mistake."""
    if value is None:
        raise AssertionError(f"{key} was not validated: the stack's checks let a config without it through")
    return value
