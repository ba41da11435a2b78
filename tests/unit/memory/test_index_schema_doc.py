"""The schema drawn in ``harness.memory.index``' docstring is the one the index creates."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import harness.memory.index
from harness.memory.index import INDEX_FILE, MemoryIndex


def _drawn() -> dict[str, list[str]]:
    """Each table of the docstring's schema and its columns, in order."""
    doc = harness.memory.index.__doc__ or ""
    block = doc.split("``_harness_migrations``)::", 1)[1].split("\n\n", 2)[1]
    tables: dict[str, list[str]] = {}
    for start in re.finditer(r"^    (\w+)(?:\s+FTS5)?\(", block, re.M):
        depth, end = 1, start.end()
        while depth:  # to the parenthesis that closes this one
            depth += {"(": 1, ")": -1}.get(block[end], 0)
            end += 1
        columns = block[start.end() : end - 1].split(",")
        tables[start.group(1)] = [column.split()[0] for column in columns]
    return tables


def _created(base: Path) -> dict[str, list[str]]:
    MemoryIndex(base).open().close()
    with sqlite3.connect(base / INDEX_FILE) as conn:
        names = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
            and not re.search(r"_fts_(config|data|docsize|idx)$", name)  # FTS5's own
        ]
        # table_xinfo shows generated columns too; table_info leaves out FTS5's hidden ones.
        return {
            name: [
                info[1]
                for info in conn.execute(
                    f"PRAGMA {'table_info' if name.endswith('_fts') else 'table_xinfo'}('{name}')"
                )
            ]
            for name in names
        }


def test_the_drawn_schema_is_the_created_one(tmp_path: Path) -> None:
    assert _drawn() == _created(tmp_path)
