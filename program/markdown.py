"""Markdown tables, the one way every generated page, report and step summary writes them.

A cell is escaped as GitHub-flavoured Markdown needs it (GFM spec, Tables extension): an unescaped ``|`` ends the
cell even inside a code span, so it is written ``\\|``; a line break ends the row, so it is written ``<br>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object) -> str:
    """``value`` as the text of one table cell."""
    return "<br>".join(str(value).replace("|", "\\|").splitlines())


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A table, one line per item: the header row, the delimiter row, then a row per item of ``rows``, each with
    as many cells as ``headers``."""
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(headers)} columns: {row!r}")
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return lines
