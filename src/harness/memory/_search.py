"""Keyword ranking with a bounded cost, and rank fusion with vector hits.

FTS5's ``bm25()`` costs about 2.5 µs for every row an expression matches, plus, once per query,
about 0.7 µs for every row that holds each of its phrases (it counts them for the idf). An OR of
common words at a million lines would cost hundreds of milliseconds, so a query is planned:

1. Each clause's frequency is probed with a count capped at ``RANK_BUDGET`` rows (below the cap
   exact; above it estimated from how far back the capped scan reached).
2. The rarest clauses whose frequencies add up to at most ``RANK_BUDGET`` are OR'ed and ranked
   by ``bm25()``: exact BM25 over those clauses. This is the whole query in a small index.
3. If even the rarest clause is more frequent than that, the candidates are the newest visible
   rows holding the two rarest clauses (then the rarest alone), and ranking comes from step 4.
4. Clauses left out of the ``bm25()`` expression add their idf to each candidate that holds
   them. Which candidates hold a clause is asked of a small in-memory FTS5 table of just the
   candidates (same tokenizer, same columns), so the answer is exactly FTS5's.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from typing import Final

from harness.memory._fts import COLUMNS, FTS_TABLE, TOKENIZER, scope_token
from harness.memory._query import all_of, any_of

__all__ = [
    "BM25_SQL",
    "NEWEST_SQL",
    "RANK_BUDGET",
    "Hit",
    "Plan",
    "fuse",
    "id_range",
    "keyword_hits",
    "plan",
    "prepare",
    "within",
]

RANK_BUDGET: Final = 4000
"""At most about this many rows are scored by ``bm25()`` per query (about 10 ms)."""

_CANDIDATES: Final = 50
_NEWEST_CANDIDATES: Final = 200
_RRF_K: Final = 60
_PROBE: Final = "memory_probe"

Hit = tuple[int, str, int, str, float]
"""(row id, path, line number, content, score)."""

Plan = tuple[list[tuple[str, str]], list[tuple[int, str]]]
"""(statements to run in order as (SQL, MATCH expression), (frequency, clause) scored later)."""

BM25_SQL: Final = f"""SELECT l.id, l.path, l.line_number, l.content,
    -bm25({FTS_TABLE}, 1.0, 1.0, 0.3, 0.0) AS score
FROM {FTS_TABLE} JOIN memory_lines AS l ON l.id = {FTS_TABLE}.rowid
WHERE {FTS_TABLE} MATCH :query AND l.owner = :owner
ORDER BY score DESC, l.id DESC LIMIT :limit"""
"""Rank rows by BM25 (content and cjk weigh 1, context 0.3, scope 0)."""

NEWEST_SQL: Final = f"""SELECT l.id, l.path, l.line_number, l.content, 0.0 AS score
FROM {FTS_TABLE} JOIN memory_lines AS l ON l.id = {FTS_TABLE}.rowid
WHERE {FTS_TABLE} MATCH :query AND l.owner = :owner
ORDER BY {FTS_TABLE}.rowid DESC LIMIT :limit"""
"""The most recently indexed matching rows (when every clause is too frequent to rank)."""


def prepare(conn: sqlite3.Connection) -> None:
    """Create this connection's in-memory probe table (TEMP objects live per connection)."""
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PROBE} USING fts5({COLUMNS}, "
        f"content='', tokenize='{TOKENIZER}')"
    )


def id_range(conn: sqlite3.Connection) -> tuple[int | None, int | None]:
    """The lowest and highest row id (two index lookups; ``min(), max()`` together would scan)."""
    low, high = conn.execute(
        "SELECT (SELECT min(id) FROM memory_lines), (SELECT max(id) FROM memory_lines)"
    ).fetchone()
    return low, high


def _frequency(conn: sqlite3.Connection, clause: str, low: int, high: int) -> int:
    """How many rows match ``clause``: exact below RANK_BUDGET, estimated above it."""
    count, oldest = conn.execute(
        f"SELECT count(*), min(rowid) FROM (SELECT rowid FROM {FTS_TABLE} "
        f"WHERE {FTS_TABLE} MATCH ? ORDER BY rowid DESC LIMIT ?)",
        (clause, RANK_BUDGET),
    ).fetchone()
    if count < RANK_BUDGET:
        return int(count)
    return max(int(count), round(int(count) * (high - low + 1) / (high - int(oldest) + 1)))


def within(expression: str, owner: str) -> str:
    """Restrict an expression to the rows of ``owner``, the only ones it may see.

    Every indexed file is memory or a transcript of one scope: the shared rows are those of
    calls made without a user, which no user sees (:data:`~harness.workspace.SHARED_WITH_USERS`).
    """
    return f'({expression}) AND (scope : ("{scope_token(owner)}"))'


def plan(conn: sqlite3.Connection, clauses: Sequence[str], owner: str) -> Plan:
    """Decide how to rank ``clauses`` for ``owner`` within the budget (see the module doc)."""
    low, high = id_range(conn)
    if not clauses or low is None or high is None:
        return [], []
    ranked = sorted((_frequency(conn, clause, low, high), clause) for clause in clauses)
    core: list[str] = []
    total = 0
    for frequency, clause in ranked:
        if total + frequency > RANK_BUDGET:
            break
        core.append(clause)
        total += frequency
    if core:
        return [(BM25_SQL, any_of(core))], ranked[len(core) :]
    pair = [all_of([ranked[0][1], ranked[1][1]])] if len(ranked) > 1 else []
    return [(NEWEST_SQL, within(e, owner)) for e in [*pair, ranked[0][1]]], ranked


def keyword_hits(
    conn: sqlite3.Connection, clauses: Sequence[str], owner: str, limit: int
) -> list[Hit]:
    """The best ``limit`` rows for ``clauses`` visible to ``owner``, best first."""
    statements, rest = plan(conn, clauses, owner)
    if not statements:
        return []
    newest = statements[0][0] is NEWEST_SQL
    wanted = max(limit, _NEWEST_CANDIDATES if newest else _CANDIDATES) if rest else limit
    hits: dict[int, Hit] = {}
    for sql, expression in statements:
        if len(hits) >= wanted:
            break
        params = {"query": expression, "owner": owner, "limit": wanted}
        for hit in conn.execute(sql, params):
            hits.setdefault(hit[0], hit)
    if rest and hits:
        _add_idf(conn, hits, rest)
    return sorted(hits.values(), key=lambda h: (-h[4], -h[0]))[:limit]


def _add_idf(
    conn: sqlite3.Connection, hits: dict[int, Hit], rest: Sequence[tuple[int, str]]
) -> None:
    """Add each left-out clause's BM25 idf to the candidates that hold it."""
    low, high = id_range(conn)
    total = (high or 0) - (low or 0) + 1
    conn.execute(f"INSERT INTO temp.{_PROBE} ({_PROBE}) VALUES ('delete-all')")
    conn.execute(
        f"INSERT INTO temp.{_PROBE} (rowid, {COLUMNS}) SELECT id, {COLUMNS} "
        "FROM memory_lines WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(hits)),),
    )
    for frequency, clause in rest:
        idf = max(1e-6, math.log((total - frequency + 0.5) / (frequency + 0.5)))
        for (row_id,) in conn.execute(
            f"SELECT rowid FROM temp.{_PROBE} WHERE {_PROBE} MATCH ?", (clause,)
        ):
            i, path, line, content, score = hits[row_id]
            hits[row_id] = (i, path, line, content, score + idf)


def fuse(
    conn: sqlite3.Connection,
    keyword: Sequence[Hit],
    semantic: Sequence[tuple[int, float]],
    limit: int,
) -> list[Hit]:
    """Reciprocal rank fusion: each ranking adds ``1 / (60 + rank)`` to the rows it holds.

    Every keyword hit takes part whatever its score; nothing is cut by a threshold.
    """
    scores: dict[int, float] = {}
    for ranking in ([hit[0] for hit in keyword], [row_id for row_id, _ in semantic]):
        for rank, row_id in enumerate(ranking, start=1):
            scores[row_id] = scores.get(row_id, 0.0) + 1.0 / (_RRF_K + rank)
    best = sorted(scores, key=lambda i: (-scores[i], -i))[:limit]
    known = {hit[0]: hit for hit in keyword}
    missing = [i for i in best if i not in known]
    if missing:
        for hit in conn.execute(
            "SELECT id, path, line_number, content, 0.0 FROM memory_lines "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        ):
            known[hit[0]] = hit
    return [(*known[i][:4], scores[i]) for i in best if i in known]
