"""Demo stacks expire: the resource group carries ``expires-at``, and a scheduled workflow destroys
stacks past it. Long-lived stacks carry ``lifetime: long-lived`` and no expiry.

The expiry is rounded up to the next midnight UTC, so it changes at most once a day: a `pulumi preview`
in a pull request does not show a new tag every hour, and each day's first `pulumi up` extends it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

EXPIRES_AT = "expires-at"
"""Tag on the stack's resource group: when the expiry workflow may destroy the stack."""
LIFETIME = "lifetime"
"""Tag on every Azure resource: the stack's lifetime."""
MAX_TTL_HOURS = 720
"""30 days: a stack that should live longer is ``long-lived``."""
RETAINED = "retained"
"""The ``lifetime`` a destroy leaves on a resource group it kept for protected data: no longer a demo to expire
or a live stack to update (ops/lifecycle.py); the stack's next ``pulumi up`` sets its lifetime back."""


class Lifetime(StrEnum):
    DEMO = "demo"
    """Destroyed by the expiry workflow ``ttlHours`` after the latest ``pulumi up``."""
    LONG_LIVED = "long-lived"
    """Never destroyed by the expiry workflow."""


def expires_at(now: dt.datetime, ttl_hours: int) -> str:
    """Midnight UTC at or after ``now + ttl_hours``, as ISO 8601 with a Z."""
    due = now.astimezone(dt.UTC) + dt.timedelta(hours=ttl_hours)
    midnight = due.replace(hour=0, minute=0, second=0, microsecond=0)
    if midnight < due:
        midnight += dt.timedelta(days=1)
    return midnight.strftime("%Y-%m-%dT%H:%M:%SZ")


def is_expired(tags: Mapping[str, str] | None, now: dt.datetime) -> bool:
    """Whether a resource group's tags say its stack may be destroyed now. No tag, no destroy."""
    tags = tags or {}
    if tags.get(LIFETIME) != Lifetime.DEMO or EXPIRES_AT not in tags:
        return False
    try:
        due = dt.datetime.strptime(tags[EXPIRES_AT], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return False  # a hand-edited, unreadable tag never triggers a destroy
    return now >= due


def stack_groups(groups: Iterable[Mapping[str, Any]], project: str) -> dict[str, Mapping[str, str]]:
    """Stack → its resource group's tags, for the groups (``az group list`` JSON) that ``project`` made."""
    found = {}
    for group in groups:
        tags = group.get("tags") or {}
        if tags.get("pulumi-project") == project and tags.get("pulumi-stack"):
            found[tags["pulumi-stack"]] = tags
    return found


def expired_stacks(groups: Iterable[Mapping[str, Any]], now: dt.datetime, project: str) -> list[str]:
    """Stacks of ``project`` whose resource group (``az group list`` JSON) is past its expiry."""
    return sorted(stack for stack, tags in stack_groups(groups, project).items() if is_expired(tags, now))
