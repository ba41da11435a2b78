"""Search results as snippets: runs of consecutive lines, within a budget of characters.

The evidence for a question is often two or three consecutive lines (a question and its
answer in a conversation, a fact and the line that corrects it). So the ranked rows are not
returned one by one:

1. Rows are taken in rank order. A row next to one already taken (the same file, the next or
   previous row) joins its snippet, and so does a row one line away, with the line between
   (unless that is a heading); any other row starts a new one, until there are ``limit``
   snippets. A row that would not fit in the budget is passed over; the best row is always
   returned, cut to the budget if it is longer.
2. What is left of the budget goes to the lines around the snippets, best snippet first, one
   line after and one before each snippet per round, never across a heading or into another
   file. Two snippets that grow into each other become one.

No line is returned twice, and the snippets' text (lines joined by newlines) never exceeds the
budget. Rows of one file have consecutive ids, so "the next line" is the next id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from harness.memory._search import Hit

__all__ = ["Snippet", "snippets"]

_WINDOW: Final = 12
"""Lines around each snippet read for filling (more than a 300-character share ever takes)."""

_Row = tuple[str, int, str]
"""(path, line number, content)."""

Snippet = tuple[str, int, int, str, float]
"""(path, first line number, last line number, text, score)."""


@dataclass(slots=True, eq=False)  # compared and hashed by identity
class _Run:
    path: str
    score: float
    rows: dict[int, tuple[int, str]] = field(default_factory=dict)  # id -> (line, content)

    @property
    def first(self) -> int:
        return min(self.rows)

    @property
    def last(self) -> int:
        return max(self.rows)

    def snippet(self) -> Snippet:
        ordered = [self.rows[i] for i in sorted(self.rows)]
        text = "\n".join(content for _, content in ordered)
        return (self.path, ordered[0][0], ordered[-1][0], text, self.score)


class _Taken:
    """The runs being built and the row ids each holds; the budget they have used."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.runs: list[_Run] = []
        self.owner: dict[int, _Run] = {}

    def beside(self, row_id: int, path: str) -> list[_Run]:
        found = [self.owner.get(row_id - 1), self.owner.get(row_id + 1)]
        return [run for run in dict.fromkeys(found) if run is not None and run.path == path]

    def join(
        self, row_id: int, path: str, line: int, content: str, between: dict[int, _Row]
    ) -> bool:
        """Add a row next to a run, or one line from a run together with the line between.

        True when the row belongs to a run (added, or left out for the budget); False when it
        is not near any.
        """
        runs = self.beside(row_id, path)
        if runs:
            if self.used + len(content) + len(runs) <= self.budget:
                self.add(row_id, line, content, runs)
            return True
        for gap in (row_id - 1, row_id + 1):
            row = between.get(gap)
            if row is None or gap in self.owner or row[0] != path or _is_heading(row[0], row[2]):
                continue
            runs = self.beside(gap, path)
            if runs and self.used + len(row[2]) + len(content) + len(runs) + 1 <= self.budget:
                self.add(gap, row[1], row[2], runs)
                self.add(row_id, line, content, self.beside(row_id, path))
                return True
        return False

    def add(self, row_id: int, line: int, content: str, runs: list[_Run]) -> None:
        """Add a row to the runs beside it (a newline each), which become one run."""
        run = runs[0]
        for other in runs[1:]:  # the row bridges two runs
            self._absorb(run, other)
        run.rows[row_id] = (line, content)
        self.owner[row_id] = run
        self.used += len(content) + len(runs)

    def merge(self, run: _Run, other: _Run) -> None:
        """Join two runs that touch (a newline between them)."""
        self._absorb(run, other)
        self.used += 1

    def _absorb(self, run: _Run, other: _Run) -> None:
        run.rows.update(other.rows)
        run.score = max(run.score, other.score)
        self.runs.remove(other)
        for taken in other.rows:
            self.owner[taken] = run

    def start(self, row_id: int, path: str, line: int, content: str, score: float) -> None:
        run = _Run(path, score, {row_id: (line, content)})
        self.runs.append(run)
        self.owner[row_id] = run
        self.used += len(content)


def snippets(
    conn: sqlite3.Connection, hits: Sequence[Hit], limit: int, budget: int
) -> list[Snippet]:
    """At most ``limit`` snippets of the ranked ``hits``, best first, in ``budget`` characters."""
    taken = _Taken(budget)
    between = _rows(conn, {i + d for i, *_ in hits for d in (-1, 1)})
    for row_id, path, line, content, score in hits:
        if row_id in taken.owner or taken.join(row_id, path, line, content, between):
            continue
        if len(taken.runs) == limit:
            break
        if taken.used + len(content) <= budget:
            taken.start(row_id, path, line, content, score)
        elif not taken.runs:
            taken.start(row_id, path, line, content[:budget], score)
    _fill(conn, taken)
    ordered = sorted(taken.runs, key=lambda run: -run.score)
    return [run.snippet() for run in ordered]


def _fill(conn: sqlite3.Connection, taken: _Taken) -> None:
    """Spend what is left of the budget on the lines around the runs (see the module doc)."""
    if not taken.runs or taken.used >= taken.budget:
        return
    around = _rows(
        conn, {i for run in taken.runs for i in range(run.first - _WINDOW, run.last + _WINDOW + 1)}
    )
    growing = True
    while growing:
        growing = False
        for run in sorted(taken.runs, key=lambda r: -r.score):
            if run not in taken.runs:  # merged into a better run this round
                continue
            for row_id in (run.last + 1, run.first - 1):
                row = around.get(row_id)
                if row is None or row[0] != run.path or _is_heading(row[0], row[2]):
                    continue
                other = taken.owner.get(row_id)
                if other is not None:  # the next run starts there: join the two
                    if other is not run and taken.used + 1 <= taken.budget:
                        taken.merge(run, other)
                        growing = True
                elif taken.used + len(row[2]) + 1 <= taken.budget:
                    taken.add(row_id, row[1], row[2], [run])
                    growing = True


def _rows(conn: sqlite3.Connection, ids: set[int]) -> dict[int, _Row]:
    """Row id -> (path, line number, content) of the rows ``ids`` that exist."""
    return {
        row_id: (path, line, content)
        for row_id, path, line, content in conn.execute(
            "SELECT id, path, line_number, content FROM memory_lines "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(ids)),),
        )
    }


def _is_heading(path: str, content: str) -> bool:
    return content.startswith("#") and not path.endswith(".jsonl")
