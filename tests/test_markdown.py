"""Markdown tables: one helper writes them all, and a cell cannot break its row."""

from __future__ import annotations

import re
import subprocess

import pytest

from offline.stack_files import REPO_ROOT
from program.markdown import cell, table

UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def cells_of(row: str) -> list[str]:
    """A row's cells as a GFM parser splits them: at every pipe not escaped by a backslash."""
    return UNESCAPED_PIPE.split(row.strip())[1:-1]


def test_a_pipe_or_line_break_in_a_cell_stays_in_its_cell():
    lines = table(["command", "why"], [("`a | b`", "first line\nsecond line"), (3, None)])
    assert lines[:2] == ["| command | why |", "|---|---|"]
    assert [len(cells_of(line)) for line in lines] == [2, 2, 2, 2]
    assert lines[2] == "| `a \\| b` | first line<br>second line |" and lines[3] == "| 3 | None |"
    assert cell("x\r\ny") == "x<br>y"


def test_a_row_with_the_wrong_number_of_cells_is_refused():
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 2 columns"):
        table(["a", "b"], [("only one",)])


def test_no_table_is_written_by_hand():
    """Every table goes through program/markdown.py: a delimiter row anywhere else in the Python code is one written
    by hand, which escapes nothing."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
    by_hand = [name for name in tracked if not name.startswith("tests/") and name != "program/markdown.py"
               and "|---|" in (REPO_ROOT / name).read_text()]
    assert by_hand == []
