"""A CronJob's ``schedule`` as the API server reads it: robfig/cron v3.0.1 ``ParseStandard`` (kubernetes
pkg/apis/batch/validation ``validateScheduleFormat``; the CronJob controller schedules with the same parser), and no
``TZ`` anywhere in it (the same validation: the time zone goes in ``timeZone``).

Read as robfig/cron reads it (parser.go): a descriptor (``@daily``, ``@every <Go duration>``) or five whitespace-
separated fields; a field is comma-separated ranges (empty ones skipped) of ``*``, ``?``, ``N`` or ``N-M`` with an
optional ``/step``; ``N`` is what Go's ``strconv.Atoi`` reads (ASCII digits, an optional sign) or, in the month and
weekday fields, a name. The checks return the message for a bad schedule, or None.
"""

from __future__ import annotations

import re

MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
"""parser.go ``parseDescriptor``: the named schedules, matched exactly."""
EVERY = "@every "
"""parser.go ``parseDescriptor``: ``@every`` and a Go duration (``time.ParseDuration``), e.g. ``@every 1h30m``."""
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                      "dec"), start=1)}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS))
"""The standard spec's five fields: their names, bounds and the names each accepts (parser.go ``minutes`` ... ``dow``
bounds in spec.go)."""
ALLOWED = ("must be a cron schedule of 5 fields (minute hour day month weekday), such as '0 2 * * *', one of "
           f"{', '.join(MACROS)}, or '{EVERY}<duration>' such as '@every 6h'")
_ATOI = re.compile(r"[+-]?[0-9]+")
"""What Go's strconv.Atoi reads: ASCII digits and an optional sign (no spaces, underscores or other digits)."""
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029" \
            "\u202f\u205f\u3000"
"""Go's unicode.IsSpace, which strings.Fields splits on (Python's str.split also splits on U+001C to U+001F)."""
_DURATION_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9,
                   "m": 60 * 10**9, "h": 3600 * 10**9}
"""Go src/time/format.go ``unitMap``, in nanoseconds."""
_DURATION_NUMBER = re.compile(r"([0-9]+)(?:\.([0-9]*))?|\.([0-9]+)")
"""One number of a duration: digits on at least one side of an optional point (``1``, ``1.``, ``1.5``, ``.5``)."""


def duration_error(text: str) -> str | None:
    """Why Go's ``time.ParseDuration`` refuses ``text`` (src/time/format.go), or None: an optional sign, then ``0``
    or one or more decimal numbers each with a unit (``1h30m``, ``1.5h``, ``90s``), within an int64 of nanoseconds."""
    s = text[1:] if text[:1] in ("+", "-") and text else text
    if s == "0":
        return None
    if not s:
        return "is not a duration"
    total = 0
    while s:
        number = _DURATION_NUMBER.match(s)
        if number is None:
            return "is not a duration (each part is a number and a unit)"
        whole, fraction = number[1] or "", number[2] or number[3] or ""
        s = s[number.end():]
        end = 0
        while end < len(s) and s[end] not in "0123456789.":  # a unit runs to the next number
            end += 1
        unit, s = s[:end], s[end:]
        if not unit:
            return "has a number without a unit (ns, us, ms, s, m, h)"
        if unit not in _DURATION_UNITS:
            return f"has the unknown unit {unit!r} (ns, us, ms, s, m, h)"
        value = int(whole or "0")
        if value > 1 << 63 or value > (1 << 63) // _DURATION_UNITS[unit]:
            return "is longer than Go's durations (about 292 years)"
        value *= _DURATION_UNITS[unit]
        digits, scale = _leading_fraction(fraction)
        if digits:
            value += int(float(digits) * (float(_DURATION_UNITS[unit]) / scale))
        total += value
        if value > 1 << 63 or total > 1 << 63:
            return "is longer than Go's durations (about 292 years)"
    if not text.startswith("-") and total > (1 << 63) - 1:
        return "is longer than Go's durations (about 292 years)"
    return None


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's leadingFraction: the digits after the point and their scale, precision dropped past an int64."""
    x, scale = 0, 1.0
    for c in digits:
        if x > ((1 << 63) - 1) // 10 or x * 10 + int(c) > 1 << 63:
            break
        x, scale = x * 10 + int(c), scale * 10
    return x, scale


def _number(word: str, names: dict[str, int]) -> int:
    """parser.go parseIntOrName / mustParseInt."""
    if word.lower() in names:
        return names[word.lower()]
    if not _ATOI.fullmatch(word):
        raise ValueError(f"{word!r} is not a number{' or a name' if names else ''}")
    if int(word) < 0:
        raise ValueError(f"{word!r} is negative")
    return int(word)


def field_error(text: str, name: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """What robfig/cron's getField refuses in one field, or None."""
    try:
        for part in (p for p in text.split(",") if p):  # strings.FieldsFunc drops empty ranges
            span, *steps = part.split("/")
            bounds = span.split("-")
            if len(steps) > 1:
                return f"{name} {part!r} has too many '/'"
            if bounds[0] in ("*", "?"):  # the rest of the span is not read
                start, end = low, high
            elif len(bounds) > 2:
                return f"{name} {part!r} has too many '-'"
            else:
                start, end = _number(bounds[0], names), _number(bounds[-1], names)
            step = _number(steps[0], {}) if steps else 1  # a step is a number, never a name
            if steps and len(bounds) == 1:
                end = high  # "N/step" runs to the field's end
            if start < low or end > high:
                return f"{name} {part!r} is outside {low}-{high}"
            if start > end or step == 0:
                return f"{name} {part!r} is an empty range or a zero step"
    except ValueError as error:
        return f"{name} {error}"
    return None


def schedule_error(value: str, zone_setting: str) -> str | None:
    """Why the API server refuses ``value`` as a CronJob's schedule, or None; ``zone_setting``: the setting that
    holds its time zone."""
    if "TZ" in value:
        return f"set the time zone in {zone_setting}, not in the schedule (the API server refuses both); {ALLOWED}"
    if value.startswith("@"):
        if value in MACROS:
            return None
        if value.startswith(EVERY):
            problem = duration_error(value[len(EVERY):])
            return None if problem is None else f"{value[len(EVERY):]!r} {problem}: {ALLOWED}"
        return f"{value!r} is not a named schedule: {ALLOWED}"
    fields = re.split(f"[{_GO_SPACE}]+", value.strip(_GO_SPACE))
    if len(fields) != 5 or not fields[0]:
        return ALLOWED
    for text, (name, low, high, names) in zip(fields, FIELDS, strict=True):
        if problem := field_error(text, name, low, high, names):
            return f"{problem}: {ALLOWED}"
    return None
