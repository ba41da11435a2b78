"""Keyword ranking with a bounded cost, and rank fusion with vector hits.

FTS5's ``bm25()`` costs about 2.5 µs for every row an expression matches, plus, once per query,
about 0.7 µs for every row that holds each of its phrases (it counts them for the idf). An OR of
common words at a million lines would cost hundreds of milliseconds, so a query is planned:

1. Each clause's frequency is probed with a count capped at ``RANK_BUDGET`` rows (below the cap
   exact; above it estimated from how far back the capped scan reached). A word the memory
   holds fewer times than that may be a compound it writes apart ("roadtrip" as "road trip"),
   so its splits are probed too (see :mod:`harness.memory._query`); probing those of a common
   word ("motiv ated") would cost a read of both halves' rows. A clause no row holds (a typo,
   a split that is no compound) is dropped: it would be the rarest, and make the candidates
   (none) on its own.
2. The rarest clauses whose frequencies add up to at most ``RANK_BUDGET`` are OR'ed and ranked
   by ``bm25()``: exact BM25 over those clauses. This is the whole query in a small index.
3. If even the rarest clause is more frequent than that, the candidates are the newest visible
   rows holding the two rarest clauses in their own text (then the rarest alone), and ranking
   comes from step 4. (Their own text only: with the neighbours' words each posting list is
   three times as long, and intersecting two long lists is what this step costs.)
4. Clauses left out of the ``bm25()`` expression add their idf to each candidate that holds
   them, once for the line's own text and once for its window. Which candidates hold a clause
   is asked of a small in-memory FTS5 table of just the candidates (same tokenizer, same
   columns), so the answer is exactly FTS5's.

Speaker names are labels, not words. Every line of a person's starts with their name, so in
"What did Caroline research?" the word "caroline" matches hundreds of lines and drowns the rare
word. A query word (or two or three in a row) that starts at least ``LABEL_MIN_ROWS`` of the
owner's rows as a label is taken out of the match, as long as something else is left to match,
and the candidates that speaker said get ``SPEAKER_BONUS`` times the best score on top.

A question that names a day ("on 1 February, 2023", "in May 2023"; see
:mod:`harness.memory._dates`) puts the rows of that day first: each row holding a clause
scores the idf of the clauses it holds (twice for its own text, once for its window), and these
rows go ahead of the others. The day is one key token, so its rows are a short posting list;
``bm25()`` is not used there, since it would count every row of the index holding each of the
question's (common) words.

A question that asks for a place ("Which cities has Jon visited?") has one more clause, the
place key every row naming a known place holds in its context (see
:mod:`harness.memory._places`): ranked like any other clause, by its idf.

With an embedder, the two rankings are fused by a weighted sum of their normalized scores with a
small dense weight. Reciprocal-rank fusion lowered recall on conversation logs: it gives the
dense ranking's best row as much as the keyword ranking's, and on short turns the dense ranking
is much the weaker of the two.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from typing import Final

from harness.memory._dates import named_days, without_days
from harness.memory._fts import (
    COLUMNS,
    FTS_TABLE,
    STOP_WORDS,
    TOKENIZER,
    label_key,
    scope_token,
    total_rows,
)
from harness.memory._places import PLACE_KEY, asks_for_place
from harness.memory._query import (
    all_of,
    analyze,
    any_of,
    key_clause,
    own_part,
    split_word,
    without,
)

__all__ = [
    "BM25_SQL",
    "DENSE_WEIGHT",
    "LABEL_MIN_ROWS",
    "NEWEST_SQL",
    "RANK_BUDGET",
    "SCOPED_NEWEST_SQL",
    "SPEAKER_BONUS",
    "Hit",
    "Plan",
    "favour_days",
    "favour_speakers",
    "fuse",
    "id_range",
    "keyword_hits",
    "plan",
    "prepare",
    "terms",
    "within",
]

RANK_BUDGET: Final = 2000
"""At most about this many rows are scored by ``bm25()`` per query (about 5 ms)."""

LABEL_MIN_ROWS: Final = 3
"""A word is a speaker label once at least this many of the owner's rows start with it."""

SPEAKER_BONUS: Final = 0.3
"""What a line of a speaker the query names gains, as a fraction of the best score."""

DENSE_WEIGHT: Final = 0.1
"""The weight of the (normalized) vector similarity beside the keyword score's 0.9."""

_CANDIDATES: Final = 50
_NEWEST_CANDIDATES: Final = 100
_NEWEST_SCAN: Final = 4  # the newest matches of anyone read, per candidate wanted
_LABEL_WORDS: Final = 64  # a pasted paragraph looks for labels among its first words only
_PROBE: Final = "memory_probe"

Hit = tuple[int, str, int, str, float]
"""(row id, path, line number, content, score)."""

Plan = tuple[list[tuple[str, str]], list[tuple[int, str]]]
"""(statements to run in order as (SQL, MATCH expression), (frequency, clause) scored later)."""

BM25_SQL: Final = f"""SELECT l.id, l.path, l.line_number, l.content,
    -bm25({FTS_TABLE}, 1.0, 1.0, 0.3, 1.0, 0.0) AS score
FROM {FTS_TABLE} JOIN memory_lines AS l ON l.id = {FTS_TABLE}.rowid
WHERE {FTS_TABLE} MATCH :query AND l.owner = :owner
ORDER BY score DESC, l.id DESC LIMIT :limit"""
"""Rank rows by BM25: content, cjk and near weigh 1, context 0.3, scope 0.

A clause is a phrase of the line's own text and the same phrase of its window, the line with
its neighbours (see :mod:`harness.memory._query`), so a row's score is the BM25 of the line
plus that of its window: a word the line holds counts twice, a word beside it once."""

NEWEST_SQL: Final = f"""SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :query
ORDER BY rowid DESC LIMIT :limit"""
"""The most recently indexed matching rows, anyone's (when every clause is too frequent to
rank): a bounded scan, kept to the searcher's own rows afterwards."""

SCOPED_NEWEST_SQL: Final = f"""SELECT l.id, l.path, l.line_number, l.content, 0.0 AS score
FROM {FTS_TABLE} JOIN memory_lines AS l ON l.id = {FTS_TABLE}.rowid
WHERE {FTS_TABLE} MATCH :query AND l.owner = :owner
ORDER BY {FTS_TABLE}.rowid DESC LIMIT :limit"""
"""The most recently indexed matching rows of one owner, their scope token in the expression:
for a searcher whose rows are too few among the newest matches for :data:`NEWEST_SQL`. The
scope token is in every row of its owner, so this costs more when the others' rows are few."""

_OWN_ROWS_SQL: Final = """SELECT id, path, line_number, content, 0.0 FROM memory_lines
WHERE id IN (SELECT value FROM json_each(?)) AND owner = ? ORDER BY id DESC LIMIT ?"""


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
    ranked = sorted(_counted(conn, clauses, low, high))
    if not ranked:
        return [], []
    core = _within_budget(ranked)
    if core:
        return [(BM25_SQL, any_of(core))], ranked[len(core) :]
    # Candidates from the lines' own words: the posting lists with the neighbours' are three
    # times as long, and intersecting two of them is what this query costs.
    rarest = [own_part(clause) for _, clause in ranked[:2]]
    pair = [all_of(rarest)] if len(rarest) > 1 else []
    return [(NEWEST_SQL, expression) for expression in [*pair, rarest[0]]], ranked


def _counted(
    conn: sqlite3.Connection, clauses: Sequence[str], low: int, high: int
) -> list[tuple[int, str]]:
    """(frequency, clause) of the clauses worth matching (see the module doc, step 1)."""
    counted: dict[str, int] = {}
    for clause in clauses:
        word = split_word(clause)  # its word comes before it
        if word is None or counted.get(word, RANK_BUDGET) < RANK_BUDGET:
            counted[clause] = _frequency(conn, clause, low, high)
    return [(frequency, clause) for clause, frequency in counted.items() if frequency > 0]


def _within_budget(ranked: Sequence[tuple[int, str]]) -> list[str]:
    """The rarest clauses whose rows add up to at most ``RANK_BUDGET``."""
    core: list[str] = []
    total = 0
    for frequency, clause in ranked:
        if total + frequency > RANK_BUDGET:
            break
        core.append(clause)
        total += frequency
    return core


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
        if sql is NEWEST_SQL:
            found = _newest(conn, expression, owner, wanted)
        else:
            params = {"query": expression, "owner": owner, "limit": wanted}
            found = conn.execute(sql, params).fetchall()
        for hit in found:
            hits.setdefault(hit[0], hit)
    if rest and hits:
        _add_idf(conn, hits, rest)
    return sorted(hits.values(), key=lambda h: (-h[4], -h[0]))[:limit]


def _newest(conn: sqlite3.Connection, expression: str, owner: str, wanted: int) -> list[Hit]:
    """The newest ``wanted`` rows of ``owner`` matching ``expression``.

    First among the newest matches of anyone (a bounded scan: in a memory mostly the
    searcher's own, that is all it takes), then, when those held too few of the searcher's,
    with the scope token in the expression.
    """
    scan = _NEWEST_SCAN * wanted
    newest = [
        row_id for (row_id,) in conn.execute(NEWEST_SQL, {"query": expression, "limit": scan})
    ]
    own: list[Hit] = conn.execute(_OWN_ROWS_SQL, (json.dumps(newest), owner, wanted)).fetchall()
    if len(own) >= wanted or len(newest) < scan:  # enough, or every match was seen
        return own
    params = {"query": within(expression, owner), "owner": owner, "limit": wanted}
    return conn.execute(SCOPED_NEWEST_SQL, params).fetchall()


def _add_idf(
    conn: sqlite3.Connection, hits: dict[int, Hit], rest: Sequence[tuple[int, str]]
) -> None:
    """Add each left-out clause's BM25 idf to the candidates that hold it."""
    total = max(total_rows(conn), 1)
    conn.execute(f"INSERT INTO temp.{_PROBE} ({_PROBE}) VALUES ('delete-all')")
    conn.execute(
        f"INSERT INTO temp.{_PROBE} (rowid, {COLUMNS}) SELECT id, {COLUMNS} "
        "FROM memory_lines WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(hits)),),
    )
    probe = f"SELECT rowid FROM temp.{_PROBE} WHERE {_PROBE} MATCH ?"
    for frequency, clause in rest:
        idf = _idf(frequency, total)
        own = {row_id for (row_id,) in conn.execute(probe, (own_part(clause),))}
        for (row_id,) in conn.execute(probe, (clause,)):
            i, path, line, content, score = hits[row_id]
            gain = 2 * idf if row_id in own else idf  # the line and its window, or the window
            hits[row_id] = (i, path, line, content, score + gain)


def _idf(frequency: int, total: int) -> float:
    """BM25's idf of a clause ``frequency`` of ``total`` rows hold (an estimate may exceed it)."""
    frequency = min(frequency, total)
    return max(1e-6, math.log((total - frequency + 0.5) / (frequency + 0.5)))


def terms(conn: sqlite3.Connection, query: str, owner: str) -> tuple[list[str], list[str]]:
    """The clauses to match for ``query`` and the speaker labels taken out of them.

    A label is taken out only when something else is left to match: "What did Caroline say?"
    still searches for Caroline. A question that asks for a place also looks for the place key
    (see :mod:`harness.memory._places`).
    """
    clauses, labels = _words_and_labels(conn, query, owner)
    if clauses and asks_for_place(query):
        clauses = [*clauses, key_clause(PLACE_KEY)]
    return clauses, labels


def _words_and_labels(
    conn: sqlite3.Connection, query: str, owner: str
) -> tuple[list[str], list[str]]:
    clauses = analyze(query)
    words = label_key(query).split()[:_LABEL_WORDS]
    grams = {" ".join(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}
    if not grams or not clauses:
        return clauses, []
    labels = [
        label
        for (label,) in conn.execute(
            "SELECT label FROM memory_labels WHERE owner = ? AND label IN "
            "(SELECT value FROM json_each(?)) GROUP BY label HAVING sum(rows) >= ?",
            (owner, json.dumps(sorted(grams)), LABEL_MIN_ROWS),
        )
    ]
    if not labels:
        return clauses, []
    rest = without(query, labels)
    if all(word in STOP_WORDS for word in label_key(rest).split()):
        return clauses, []  # only question words would be left
    return analyze(rest), labels


def favour_days(
    conn: sqlite3.Connection, query: str, hits: list[Hit], owner: str, wanted: int
) -> list[Hit]:
    """``hits`` after the rows of the days ``query`` names, ranked by its other words, go first.

    The day is the question's strongest key: "What did Gina find on 1 February, 2023?" asks
    about that day's lines (see :mod:`harness.memory._dates`). When none of them matches the
    other words, ``hits`` are left as they are.
    """
    days = named_days(query)
    if days is None:
        return hits
    dated = _on_days(conn, terms(conn, without_days(query), owner)[0], owner, days, wanted)
    if not dated:
        return hits
    lead = max(hit[4] for hit in [*dated, *hits])
    first = {hit[0] for hit in dated}
    ahead = [(*hit[:4], hit[4] + lead) for hit in dated]
    return [*ahead, *(hit for hit in hits if hit[0] not in first)][:wanted]


def _on_days(
    conn: sqlite3.Connection, clauses: Sequence[str], owner: str, days: str, wanted: int
) -> list[Hit]:
    """The rows of ``owner`` matching ``days`` that hold a clause, by the idf of those clauses.

    Not ``bm25()``: it counts, for each phrase's idf, every row of the index that holds it,
    and the words of a question about a day are common ones (40 ms at a million rows). A
    day's rows are one short posting list, so which of them hold a clause is cheap to ask;
    the idf comes from the clause's estimated frequency, counted for the query anyway.
    """
    low, high = id_range(conn)
    if low is None or high is None:
        return []
    total = max(total_rows(conn), 1)
    scope = within(days, owner)
    scores: dict[int, float] = {}
    for frequency, clause in _counted(conn, clauses, low, high):
        idf = _idf(frequency, total)
        own = set(_rows_matching(conn, f"({own_part(clause)}) AND {scope}"))
        for row_id in _rows_matching(conn, f"({clause}) AND {scope}"):
            gain = 2 * idf if row_id in own else idf  # the line and its window, or the window
            scores[row_id] = scores.get(row_id, 0.0) + gain
    best = sorted(scores, key=lambda row_id: (-scores[row_id], -row_id))[:wanted]
    found = conn.execute(
        "SELECT id, path, line_number, content FROM memory_lines "
        "WHERE id IN (SELECT value FROM json_each(?)) AND owner = ?",
        (json.dumps(best), owner),
    )
    return sorted(((*row, scores[row[0]]) for row in found), key=lambda hit: (-hit[4], -hit[0]))


def _rows_matching(conn: sqlite3.Connection, expression: str) -> list[int]:
    """The newest ``RANK_BUDGET`` rows matching ``expression`` (a bounded scan)."""
    query = {"query": expression, "limit": RANK_BUDGET}
    return [row_id for (row_id,) in conn.execute(NEWEST_SQL, query)]


def favour_speakers(conn: sqlite3.Connection, hits: list[Hit], labels: Sequence[str]) -> list[Hit]:
    """``hits`` re-ranked after the lines said by a speaker in ``labels`` gain the bonus."""
    if not hits or not labels:
        return hits
    bonus = SPEAKER_BONUS * max(hit[4] for hit in hits)
    said = {
        row_id
        for (row_id,) in conn.execute(
            "SELECT id FROM memory_lines WHERE id IN (SELECT value FROM json_each(?)) "
            "AND speaker IN (SELECT value FROM json_each(?))",
            (json.dumps([hit[0] for hit in hits]), json.dumps(list(labels))),
        )
    }
    favoured = [(*hit[:4], hit[4] + bonus) if hit[0] in said else hit for hit in hits]
    return sorted(favoured, key=lambda h: (-h[4], -h[0]))


def fuse(
    conn: sqlite3.Connection,
    keyword: Sequence[Hit],
    semantic: Sequence[tuple[int, float]],
    limit: int,
) -> list[Hit]:
    """A weighted sum of the keyword score and the vector similarity, each divided by its best.

    Every keyword hit takes part whatever its similarity; nothing is cut by a threshold.
    """
    top = max((hit[4] for hit in keyword), default=0.0)
    closest = max((similarity for _, similarity in semantic), default=0.0)
    scores: dict[int, float] = {}
    for hit in keyword:
        scores[hit[0]] = (1 - DENSE_WEIGHT) * (hit[4] / top if top > 0 else 1.0)
    for row_id, similarity in semantic:
        if closest > 0 and similarity > 0:
            dense = DENSE_WEIGHT * similarity / closest
            scores[row_id] = scores.get(row_id, 0.0) + dense
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
