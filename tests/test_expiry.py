"""Demo stacks expire; long-lived ones never do. Pure helpers, then the tags every stack renders."""

from __future__ import annotations

import datetime as dt

import pytest

from program.config import expiry
from tests.helpers import STACKS

UTC = dt.UTC


@pytest.mark.parametrize(
    "now, ttl, expected",
    [
        (dt.datetime(2026, 11, 22, 10, 30, tzinfo=UTC), 8, "2026-11-23T00:00:00Z"),
        (dt.datetime(2026, 11, 22, 10, 30, tzinfo=UTC), 24, "2026-11-24T00:00:00Z"),
        (dt.datetime(2026, 11, 22, 0, 0, tzinfo=UTC), 24, "2026-11-23T00:00:00Z"),  # exactly midnight stays
        (dt.datetime(2026, 12, 31, 23, 0, tzinfo=UTC), 2, "2027-01-02T00:00:00Z"),
        (dt.datetime(2026, 11, 22, 10, 30, tzinfo=dt.timezone(dt.timedelta(hours=-8))), 1, "2026-11-23T00:00:00Z"),
    ],
)
def test_expiry_is_rounded_up_to_midnight_utc(now, ttl, expected):
    assert expiry.expires_at(now, ttl) == expected


def test_expiry_is_the_same_all_day_so_previews_do_not_churn():
    morning = expiry.expires_at(dt.datetime(2026, 11, 22, 0, 5, tzinfo=UTC), 24)
    evening = expiry.expires_at(dt.datetime(2026, 11, 22, 23, 55, tzinfo=UTC), 24)
    assert morning == evening


NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "tags, expired",
    [
        ({"lifetime": "demo", "expires-at": "2026-11-22T00:00:00Z"}, True),
        ({"lifetime": "demo", "expires-at": "2026-11-23T00:00:00Z"}, False),
        ({"lifetime": "long-lived", "expires-at": "2026-01-01T00:00:00Z"}, False),
        ({"lifetime": "demo"}, False),
        ({"expires-at": "2026-01-01T00:00:00Z"}, False),
        ({"lifetime": "demo", "expires-at": "tomorrow"}, False),
        (None, False),
    ],
    ids=["past", "future", "long-lived", "no-expiry", "no-lifetime", "unreadable", "untagged"],
)
def test_only_a_demo_group_past_its_expiry_is_expired(tags, expired):
    assert expiry.is_expired(tags, NOW) is expired


def test_expired_stacks_come_from_az_group_list_output():
    groups = [
        {"name": "rg-a", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "a", "lifetime": "demo",
                                  "expires-at": "2026-11-21T00:00:00Z"}},
        {"name": "rg-b", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "b", "lifetime": "demo",
                                  "expires-at": "2026-11-30T00:00:00Z"}},
        {"name": "rg-c", "tags": {"pulumi-project": "other", "pulumi-stack": "c", "lifetime": "demo",
                                  "expires-at": "2026-11-21T00:00:00Z"}},
        {"name": "rg-dev", "tags": {"pulumi-project": "aksgpu", "pulumi-stack": "dev", "lifetime": "long-lived"}},
        {"name": "MC_rg-a_aks-a_eastus", "tags": None},
    ]
    assert expiry.expired_stacks(groups, NOW, "aksgpu") == ["a"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_tags_its_resource_group_with_its_lifetime(stack, render_of):
    r = render_of(stack)
    (group,) = r.of_type("azure-native:resources:ResourceGroup")
    tags = group.inputs["tags"]
    assert tags["lifetime"] == r.cfg.lifetime and tags["pulumi-stack"] == stack
    if r.cfg.lifetime == "long-lived":
        assert "expires-at" not in tags
    else:
        due = dt.datetime.strptime(tags["expires-at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        now = dt.datetime.now(UTC)
        assert now + dt.timedelta(hours=r.cfg.ttl_hours) <= due < now + dt.timedelta(hours=r.cfg.ttl_hours + 24)


def test_only_the_resource_group_carries_the_expiry(render_shape):
    r = render_shape("spot-from-zero")
    tagged = [x.name for x in r.resources if "expires-at" in (x.inputs.get("tags") or {})]
    assert tagged == ["net-rg"]


def test_dev_is_long_lived_and_demo_gpu_stacks_expire_the_same_day(render_shape):
    assert render_shape("dev-minimal").cfg.lifetime == "long-lived"
    assert render_shape("function").cfg.ttl_hours == 8 and render_shape("time-slicing").cfg.ttl_hours == 8
