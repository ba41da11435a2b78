"""The document side of the memory index: schema, migrations, and the rows a file becomes.

Every non-blank line of a memory file becomes one row of ``memory_lines`` with three texts that
the FTS5 table ``memory_lines_fts`` indexes (see :mod:`harness.memory.index` for the schema):

- ``content``: the stripped line, tokenized by ``porter unicode61 remove_diacritics 2``;
- ``cjk``: overlapping bigrams of every Chinese, Japanese or Korean run in the line, plus the
  run's last character alone, separated by spaces. ``unicode61`` keeps a CJK run as one token,
  so without this column a word inside a sentence could never match; bigrams make two-character
  words match, and the extra last character lets a one-character query run as a prefix query
  (every character of a run starts a bigram except the last one). Latin words written against
  CJK characters ("ABC社") are added too, since ``unicode61`` glues them to the CJK token;
- ``scope``: one token naming the owner (shared, or a user), so that "the newest rows of this
  user that match" is a scan inside the FTS index rather than a lookup per row;
- ``context``: low-weight words about where the line sits — the date of a daily file
  (``March 14 2026 d20260314``: the words, and one key token for the day), the days its
  relative phrases mean ("yesterday" in that file adds ``March 13 2026 d20260313``; see
  :mod:`harness.memory._dates`), a key token when it names a place (see
  :mod:`harness.memory._places`), and the markdown heading above the line — so questions that
  name a date or a topic heading, or ask for a place, can find lines that do not repeat it;
- ``near``: for a turn of a conversation (a line with a speaker, see below), the distinct
  words of the line before and the line after in the same section that the line itself does
  not hold (never across a heading or a file; at most ``NEAR_CHARS`` of each). In a
  conversation the words of a question are often split between a turn and the reply to it
  ("Where did you go?" / "To Rome!"). Other lines (the facts a flush writes, which stand
  alone) have none, and cost nothing more to index.

Each row also records its *speaker*: the label a log line starts with (``- Caroline: ...``)
or the role of a transcript message, casefolded. ``memory_labels`` counts them per file, so a
query that names a speaker can treat the name as a label rather than a word (see
:mod:`harness.memory._search`).

Transcripts (``*.log.jsonl``) contribute only entries of type ``message``; compaction summaries
(type ``summary``) and unparseable lines never become rows.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from typing import Final

from harness.memory._dates import day_words, resolved_days
from harness.memory._files import digest
from harness.memory._places import PLACE_KEY, names_a_place

__all__ = [
    "CJK_CHARS",
    "COLUMNS",
    "FTS_TABLE",
    "MAX_ROW_CHARS",
    "MIGRATIONS",
    "NEAR_CHARS",
    "SPARE_ROWS",
    "STOP_WORDS",
    "TOKENIZER",
    "Pending",
    "Row",
    "Tail",
    "append_rows",
    "bulk_load",
    "cjk_grams",
    "delete_all_rows",
    "delete_rows",
    "label_key",
    "rows_for",
    "scope_token",
    "speaker_of",
    "total_rows",
    "write_rows",
    "write_tail",
]

FTS_TABLE: Final = "memory_lines_fts"
"""The FTS5 table (external content over ``memory_lines``)."""

COLUMNS: Final = "content, cjk, context, near, scope"
"""The FTS columns, in order; ``scope`` holds one token naming the row's owner (see
:func:`scope_token`) so that a scan for one user's rows stays inside the index."""

TOKENIZER: Final = "porter unicode61 remove_diacritics 2"
"""Case- and accent-folding words with English stemming ("moved" and "move" are one term)."""

MAX_ROW_CHARS: Final = 2000
"""A longer line is split into rows of at most this many characters (keeps hits and embedder
inputs bounded; a pasted tool output cannot flood a prompt through search)."""

CJK_CHARS: Final = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
"""Han, kana, Hangul and their compatibility forms: the scripts written without spaces
between words (Korean has spaces, but particles attach to nouns, so it needs bigrams too)."""

_CJK_RUN: Final = re.compile(f"[{CJK_CHARS}]+")
_LATIN_WORD: Final = f"(?:(?![{CJK_CHARS}])[^\\W_])+"
_GLUED: Final = re.compile(
    f"(?<=[{CJK_CHARS}]){_LATIN_WORD}|(?<![^\\W_]){_LATIN_WORD}(?=[{CJK_CHARS}])"
)
"""A Latin word written against CJK characters. The second branch starts only where a word
starts: tried inside a long word, it ran to the word's end from every position (quadratic in
the word's length: a 20,000-letter word took 18 s of indexing)."""
STOP_WORDS: Final = frozenset(
    str.split(
        """
        a about above after again against all am an and any are aren as at be because been before
        being below between both but by can cannot could couldn d did didn do does doesn doing don
        down during each even ever few for from further had hadn has hasn have haven having he her
        here hers herself him himself his how i if in into is isn it its itself just ll m me might
        more most must mustn my myself no nor not now of off on once only or other ought our ours
        ourselves out over own re s same shan she should shouldn so some such t than that the their
        theirs them themselves then there these they this those through to too under until up us ve
        very was wasn we were weren what whats when where which while who whom whose why will with
        won would wouldn y you your yours yourself yourselves tell remind recall remember know does
        anything something please again also get gets getting got gotten go goes going gone went
        """
    )
)
"""Question and function words that say nothing about which line answers.

With the forms of "get" and "go" (as in the stop lists of SMART and MySQL): a conversation
says them on every other line ("Got it!", "Gotta go"), so "When did John get his dog?" found
every short line that says "got" before the one about the dog."""

NEAR_CHARS: Final = 300
"""At most this many characters of each neighbour go into a row's ``near`` column."""

_LABEL: Final = re.compile(
    r"(?:[-*+]\s+)?([^\W\d_][\w'.-]*(?: [^\W\d_][\w'.-]*){0,2})\s?[:\uff1a]\s"
)  # "- Name: ", "Dr Jane Smith: ", also with a full-width colon
_LABEL_WORD: Final = re.compile(r"[^\W_]+")
_MAX_LABEL: Final = 40
_DAILY_NAME: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")
_FLUSH_HEADING: Final = re.compile(r"memory flush\b", re.IGNORECASE)

Row = tuple[int, str, str, str, str, str]
"""One row: (1-based line number in the file, content, cjk bigrams, context, near, speaker)."""


@functools.lru_cache(maxsize=4096)  # a log has few speakers, named on every line
def label_key(text: str) -> str:
    """The form a speaker label is stored and looked up in: casefolded words, one space apart.

    ``O'Brien`` and a query's ``o'brien`` or ``O Brien`` all become ``o brien``.
    """
    return " ".join(_LABEL_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def speaker_of(line: str) -> str:
    """The label key of a log line that starts with ``Name:`` (after a bullet), else ``""``."""
    match = _LABEL.match(line)
    if match is None or len(match[1]) > _MAX_LABEL:
        return ""
    return label_key(match[1])


def scope_token(owner: str) -> str:
    """The ``scope`` column token of an owner (``u`` + hex of its UTF-8; ``u`` when shared).

    The same as the SQL ``'u' || hex(owner)`` of the generated column ``memory_lines.scope``.
    """
    return "u" + owner.encode("utf-8").hex().upper()


def cjk_grams(text: str) -> str:
    """The ``cjk`` column text of a line: bigrams of each CJK run plus the run's last character.

    Latin words written against CJK characters ("ABC社") are added as well: ``unicode61``
    glues them into the CJK token in ``content``, where a search for "ABC" could not find them.
    """
    normalized = unicodedata.normalize("NFKC", text)
    grams: list[str] = []
    for run in _CJK_RUN.findall(normalized):
        grams.extend(run[i : i + 2] for i in range(len(run) - 1))
        grams.append(run[-1])
    grams.extend(_GLUED.findall(normalized))
    return " ".join(grams)


def _day_of(rel_path: str) -> date | None:
    """The day of a daily file (``memory/2026-03-14.md``), else None."""
    match = _DAILY_NAME.fullmatch(rel_path.rsplit("/", 1)[-1])
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def _words_of(day: date | None) -> str:
    """A day as a row's context holds it (:func:`day_words`), or "" for a file without one."""
    return "" if day is None else day_words(day)


def _keyed(context: str, line: str, day: date | None) -> str:
    """``context`` with the keys of the line, if any.

    The days its relative phrases mean ("yesterday"), and the place key when it names a place
    (see :mod:`harness.memory._places`).
    """
    days = resolved_days(line, day) if day else ""
    if days:
        context = f"{context} {days}"
    return f"{context} {PLACE_KEY}" if names_a_place(line) else context


def _pieces(line: str) -> list[str]:
    """Split an over-long line at whitespace into pieces of at most MAX_ROW_CHARS."""
    pieces: list[str] = []
    while len(line) > MAX_ROW_CHARS:
        cut = line.rfind(" ", MAX_ROW_CHARS // 2, MAX_ROW_CHARS)
        cut = cut if cut > 0 else MAX_ROW_CHARS
        pieces.append(line[:cut].strip())
        line = line[cut:].strip()
    if line:
        pieces.append(line)
    return pieces


_Piece = tuple[int, str, str, str, str, int]
"""A row before its neighbours are known: (line number, content, cjk, context, speaker,
section), where ``section`` numbers the runs of lines between headings (-1 for a heading)."""


def _append(
    pieces: list[_Piece], number: int, text: str, context: str, speaker: str, section: int
) -> None:
    for piece in _pieces(text) if len(text) > MAX_ROW_CHARS else (text,):
        grams = cjk_grams(piece) if _CJK_RUN.search(piece) else ""
        pieces.append((number, piece, grams, context, speaker, section))


_ASCII_SPACES: Final = bytes(
    byte if 0x30 <= byte <= 0x39 or 0x61 <= byte <= 0x7A else 0x20 for byte in range(256)
)  # lowercase ASCII with every byte but a-z and 0-9 made a space: what _LABEL_WORD splits at


def _near_words(content: str) -> frozenset[str]:
    """The words of a line a query can look for (no stop words: a query never does)."""
    text = content[:NEAR_CHARS]
    if text.isascii():  # the common case; a byte translation is several times a regex's speed
        words = text.lower().encode("ascii").translate(_ASCII_SPACES).decode("ascii").split()
        return frozenset(words) - STOP_WORDS
    return frozenset(_LABEL_WORD.findall(text.casefold())) - STOP_WORDS


_NONE: Final[frozenset[str]] = frozenset()


def _with_neighbours(pieces: list[_Piece]) -> list[Row]:
    """The rows of ``pieces``, a turn's ``near`` holding its neighbours' words (see above).

    The words are a set, joined in its order: the same within a process for the same text
    (all that ``append_rows`` compares), and the order means nothing to ranking.
    """
    words: list[frozenset[str] | None] = [None] * len(pieces)

    def words_of(i: int) -> frozenset[str]:
        found = words[i]
        if found is None:
            found = words[i] = _near_words(pieces[i][1])
        return found

    rows: list[Row] = []
    last = len(pieces) - 1
    for i, (number, content, grams, context, speaker, section) in enumerate(pieces):
        near = ""
        if speaker and section >= 0:
            before = words_of(i - 1) if i > 0 and pieces[i - 1][5] == section else _NONE
            after = words_of(i + 1) if i < last and pieces[i + 1][5] == section else _NONE
            near = " ".join((before | after) - words_of(i))
        rows.append((number, content, grams, context, near, speaker))
    return rows


def _under(day: str, heading: str) -> str:
    """The context of the lines under ``heading`` in a file of ``day`` (day words or "")."""
    title = heading.lstrip("#").strip()
    return f"{day} {'' if _FLUSH_HEADING.match(title) else title}".strip()


def _context_at(rel_path: str, lines: Sequence[str], number: int) -> str:
    """The context line ``number`` (1-based) starts with: its day and the heading above it.

    Without the days any line's own phrases add (see :func:`append_rows`).
    """
    day = _words_of(_day_of(rel_path))
    for raw in reversed(lines[: number - 1]):
        line = raw.strip()
        if line.startswith("#"):
            return _under(day, line)
    return day


def _markdown_rows(rel_path: str, text: str, first_line: int, context: str | None) -> list[Row]:
    when = _day_of(rel_path)
    day = _words_of(when)
    context = day if context is None else context
    section = 0
    pieces: list[_Piece] = []
    for number, raw in enumerate(text.split("\n"), start=first_line):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            _append(pieces, number, line, day, "", -1)
            context = _under(day, line)
            section += 1
        elif len(line) <= MAX_ROW_CHARS and line.isascii():  # the common case, kept cheap
            said = _keyed(context, line, when)
            pieces.append((number, line, "", said, speaker_of(line), section))
        else:
            _append(pieces, number, line, _keyed(context, line, when), speaker_of(line), section)
    return _with_neighbours(pieces)


def _transcript_rows(text: str, first_line: int) -> list[Row]:
    pieces: list[_Piece] = []
    for number, raw in enumerate(text.split("\n"), start=first_line):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("type") != "message":
            continue
        content = entry.get("content")
        if not isinstance(content, str):
            continue
        stamp = entry.get("timestamp")
        when = _day_of(f"{stamp[:10]}.md") if isinstance(stamp, str) else None
        context = _words_of(when)
        role = entry.get("role")
        speaker = label_key(role) if isinstance(role, str) else ""
        for line in content.split("\n"):
            if line.strip():
                _append(pieces, number, line.strip(), _keyed(context, line, when), speaker, 0)
    return _with_neighbours(pieces)


def rows_for(
    rel_path: str, text: str, *, first_line: int = 1, context: str | None = None
) -> list[Row]:
    """The rows a workspace file becomes (transcripts by entry, everything else by line).

    ``text`` may be the end of a file from line ``first_line`` on, ``context`` being the
    context of the rows above it (see :func:`append_rows`).
    """
    if rel_path.endswith(".jsonl"):
        return _transcript_rows(text, first_line)
    return _markdown_rows(rel_path, text, first_line, context)


# --- writing ----------------------------------------------------------------------------

Pending = tuple[str, list[Row], str, int, int | None, int | None]
"""A file to (re)write: (path, rows, sha256, characters, size, mtime_ns); size and mtime None
if unknown."""

SPARE_ROWS: Final = 32
"""Row ids kept free after a file's rows (at least; half its rows for a bigger file), so the
lines appended to it later (a flush, a new turn of a transcript) are indexed in place."""

_LAST_ROWS: Final = 64  # the rows read back to find where an appended file starts to differ

_ROWS_OF = (
    "FROM memory_files AS f JOIN memory_lines AS l "
    "ON l.id >= f.first_id AND l.id < f.first_id + f.rows "
    "WHERE f.path IN (SELECT value FROM json_each(?))"
)


def delete_all_rows(conn: sqlite3.Connection) -> None:
    """Delete every row and file record, inside the caller's transaction.

    The next catch-up indexes every file again.
    """
    conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('delete-all')")
    for table in ("memory_lines", "memory_vectors", "memory_files", "memory_labels"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("INSERT OR REPLACE INTO memory_meta (key, value) VALUES ('rows', '0')")


def delete_rows(conn: sqlite3.Connection, paths: Sequence[str]) -> None:
    """Delete the rows of ``paths`` from the FTS table, the vectors and the lines.

    A file's rows are the id range recorded in ``memory_files``, so no index on path is needed.
    """
    batch = (json.dumps(list(paths)),)
    (gone,) = conn.execute(
        "SELECT coalesce(sum(rows), 0) FROM memory_files WHERE path IN (SELECT value FROM "
        "json_each(?))",
        batch,
    ).fetchone()
    _delete_lines(conn, f"id IN (SELECT l.id {_ROWS_OF})", batch, gone)
    conn.execute("DELETE FROM memory_labels WHERE path IN (SELECT value FROM json_each(?))", batch)


def _delete_lines(
    conn: sqlite3.Connection, where: str, params: Sequence[object], count: int
) -> None:
    """Delete the ``count`` lines ``where`` selects from the FTS table, the vectors and the lines.

    ``where`` is an SQL condition on ``id``, evaluated against ``memory_lines`` before the lines
    go (an external-content FTS5 table is told the old values of what it deletes).
    """
    conn.execute(
        f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, {COLUMNS}) "
        f"SELECT 'delete', id, {COLUMNS} FROM memory_lines WHERE {where}",
        params,
    )
    conn.execute(f"DELETE FROM memory_vectors WHERE {where}", params)
    conn.execute(f"DELETE FROM memory_lines WHERE {where}", params)
    _count_rows(conn, -count)


def write_rows(
    conn: sqlite3.Connection,
    files: Sequence[Pending],
    owners: Sequence[str],
    vectors: Sequence[bytes] | None,
    *,
    on_bound: Callable[[], None] | None = None,
) -> int:
    """Replace the rows of ``files`` (inside the caller's transaction); returns rows written.

    FTS5 flushes a segment at every statement that writes it (statement savepoints), so the
    whole batch is one delete and one ``INSERT ... SELECT``, never a statement per row or file.
    ``on_bound`` is called once every Python value is handed to SQLite: what remains (the
    tokenizing, most of the cost) is a few statements that run without the GIL, so a caller
    may go on building the next batch in another thread meanwhile.
    """
    delete_rows(conn, [path for path, *_ in files])
    (first,) = conn.execute(
        "SELECT coalesce(max(first_id + capacity), 0) + 1 FROM memory_files"
    ).fetchone()
    lines: list[tuple[object, ...]] = []
    registry: list[tuple[object, ...]] = []
    start = first
    for (path, rows, sha, chars, size, mtime), owner in zip(files, owners, strict=True):
        capacity = len(rows) + max(SPARE_ROWS, len(rows) // 2)
        registry.append((path, owner, size, mtime, sha, start, len(rows), capacity, chars))
        lines += [(start + i, path, owner, *row) for i, row in enumerate(rows)]
        start += capacity
    _insert_lines(conn, lines, vectors)
    conn.executemany(
        "INSERT OR REPLACE INTO memory_files (path, owner, size, mtime_ns, sha256, first_id, "
        "rows, capacity, chars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        registry,
    )
    if on_bound is not None:
        on_bound()
    _index_lines(conn, lines)
    _count_labels(conn, [path for path, *_ in files])
    return len(lines)


Tail = tuple[int, int, list[Row]]
"""How a grown file is indexed in place: (its first row id, rows kept, the rows after them)."""


def append_rows(
    conn: sqlite3.Connection, path: str, text: str, sha: str, owner: str
) -> Tail | None:
    """The rows of ``text`` that differ from those indexed for ``path``, if only its end does.

    That is so when the text indexed last is the start of ``text`` (lines appended, the last
    one perhaps extended) and the file's spare row ids hold what was added. The last two lines
    indexed are indexed again (their neighbours changed), read with the line before them.
    None when the file must be indexed anew.
    """
    known = conn.execute(
        "SELECT first_id, rows, capacity, chars, sha256, owner FROM memory_files WHERE path = ?",
        (path,),
    ).fetchone()
    if known is None:
        return None
    first, count, capacity, chars, old_sha, old_owner = known
    if old_owner != owner or not 0 < chars < len(text) or digest(text[:chars]) != old_sha:
        return None
    last = conn.execute(
        "SELECT id, line_number FROM memory_lines WHERE id >= ? AND id < ? ORDER BY id",
        (max(first, first + count - _LAST_ROWS), first + count),
    ).fetchall()
    numbers = sorted({number for _, number in last})
    if len(numbers) < 3:
        return None
    before, redo = numbers[-3], numbers[-2]  # read from `before`, replaced from `redo` on
    kept = next(i for i, number in last if number == redo) - first
    lines = text.split("\n")
    # The context from the text, not from the row stored for `before`: that one also holds
    # the days its own "yesterday" means, which are not the next lines'.
    context = None if path.endswith(".jsonl") else _context_at(path, lines, before)
    rows = rows_for(path, "\n".join(lines[before - 1 :]), first_line=before, context=context)
    tail = [row for row in rows if row[0] >= redo]
    if kept + len(tail) > capacity:
        return None
    return first, kept, tail


def write_tail(
    conn: sqlite3.Connection,
    path: str,
    owner: str,
    tail: Tail,
    file: tuple[str, int, int | None, int | None],
    vectors: Sequence[bytes] | None,
) -> int:
    """Replace the rows after the kept ones (inside the caller's transaction); rows written."""
    first, kept, rows = tail
    sha, chars, size, mtime = file
    (count,) = conn.execute("SELECT rows FROM memory_files WHERE path = ?", (path,)).fetchone()
    _delete_lines(conn, "id >= ? AND id < ?", (first + kept, first + count), count - kept)
    lines = [(first + kept + i, path, owner, *row) for i, row in enumerate(rows)]
    _insert_lines(conn, lines, vectors)
    _index_lines(conn, lines)
    conn.execute(
        "UPDATE memory_files SET rows = ?, sha256 = ?, chars = ?, size = ?, mtime_ns = ? "
        "WHERE path = ?",
        (kept + len(rows), sha, chars, size, mtime, path),
    )
    _count_labels(conn, [path])
    return len(rows)


_BULK_CONFIG: Final = (("hashsize", 64 << 20), ("automerge", 0), ("crisismerge", 64))
_USUAL_CONFIG: Final = (("hashsize", 1 << 20), ("automerge", 4), ("crisismerge", 16))
_CONFIG_SQL: Final = f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rank) VALUES (?, ?)"


@contextlib.contextmanager
def bulk_load(conn: sqlite3.Connection) -> Iterator[None]:
    """Write many rows with FTS5 merging set aside (inside the caller's transaction).

    FTS5 writes its in-memory terms out as a new segment whenever they pass ``hashsize``
    (1 MiB) and, by default, merges every four segments of a level into one as it goes, so a
    load of a million rows rewrites each entry several times. Inside this block a batch's terms
    make one segment and nothing is merged; the loader's ``'optimize'`` at the end writes every
    entry once more, about a third less work in all. The usual setting is put back before the
    block ends, so nothing outlives the transaction (a rollback undoes both).
    """
    for key, value in _BULK_CONFIG:
        conn.execute(_CONFIG_SQL, (key, value))
    yield
    for key, value in _USUAL_CONFIG:  # a statement: the batch's terms are written out first
        conn.execute(_CONFIG_SQL, (key, value))


def _insert_lines(
    conn: sqlite3.Connection,
    lines: Sequence[tuple[object, ...]],
    vectors: Sequence[bytes] | None,
) -> None:
    """Insert lines (and their vectors) into their tables; the FTS entries come next."""
    conn.executemany(
        "INSERT INTO memory_lines (id, path, owner, line_number, content, cjk, context, near, "
        "speaker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        lines,
    )
    if vectors is not None:
        conn.executemany(
            "INSERT INTO memory_vectors (id, vector) VALUES (?, ?)",
            zip((line[0] for line in lines), vectors, strict=True),
        )


def _index_lines(conn: sqlite3.Connection, lines: Sequence[tuple[object, ...]]) -> None:
    """Add the FTS entries of inserted lines: one statement (FTS5 flushes per statement)."""
    if not lines:
        return
    conn.execute(  # the ids are new, in a range that holds nothing else
        f"INSERT INTO {FTS_TABLE} (rowid, {COLUMNS}) "
        f"SELECT id, {COLUMNS} FROM memory_lines WHERE id >= ? AND id <= ?",
        (lines[0][0], lines[-1][0]),
    )
    _count_rows(conn, len(lines))


def _count_labels(conn: sqlite3.Connection, paths: Sequence[str]) -> None:
    """Recount the speaker labels of ``paths`` from their rows."""
    batch = (json.dumps(list(paths)),)
    conn.execute("DELETE FROM memory_labels WHERE path IN (SELECT value FROM json_each(?))", batch)
    conn.execute(
        "INSERT INTO memory_labels (owner, label, path, rows) "
        f"SELECT l.owner, l.speaker, l.path, count(*) {_ROWS_OF} AND l.speaker != '' "
        "GROUP BY l.path, l.speaker",
        batch,
    )


def _count_rows(conn: sqlite3.Connection, change: int) -> None:
    """Keep ``memory_meta.rows``, the number of rows: ids have gaps (``SPARE_ROWS``)."""
    if change:
        conn.execute(
            "UPDATE memory_meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'rows'",
            (change,),
        )


def total_rows(conn: sqlite3.Connection) -> int:
    """How many rows the index holds (kept in ``memory_meta`` as rows come and go)."""
    found = conn.execute("SELECT value FROM memory_meta WHERE key = 'rows'").fetchone()
    return int(found[0]) if found is not None else 0


# --- migrations -------------------------------------------------------------------------------


def _m001_lines_and_fts(conn: sqlite3.Connection) -> None:
    # A file's rows have consecutive ids [first_id, first_id + rows): no index on path needed.
    conn.execute(
        "CREATE TABLE memory_files (path TEXT PRIMARY KEY, owner TEXT NOT NULL, size INTEGER, "
        "mtime_ns INTEGER, sha256 TEXT NOT NULL, first_id INTEGER NOT NULL, rows INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE memory_lines (id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
        "owner TEXT NOT NULL, line_number INTEGER NOT NULL, content TEXT NOT NULL, "
        "cjk TEXT NOT NULL, context TEXT NOT NULL, "
        "scope TEXT GENERATED ALWAYS AS ('u' || hex(owner)) VIRTUAL)"
    )
    conn.execute(
        f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(content, cjk, context, scope, "
        f"content='memory_lines', content_rowid='id', tokenize='{TOKENIZER}')"
    )


def _m002_vectors(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE memory_vectors (id INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
    conn.execute("CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def _m003_neighbours_and_speakers(conn: sqlite3.Connection) -> None:
    # The index is derived data: the rows are dropped and every file is indexed again at the
    # next catch-up (its registry entry goes too), now with the near column and a speaker.
    conn.execute(f"DROP TABLE {FTS_TABLE}")
    conn.execute("DROP TABLE memory_lines")
    conn.execute("DELETE FROM memory_files")
    conn.execute("DELETE FROM memory_vectors")
    conn.execute(
        "CREATE TABLE memory_lines (id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
        "owner TEXT NOT NULL, line_number INTEGER NOT NULL, content TEXT NOT NULL, "
        "cjk TEXT NOT NULL, context TEXT NOT NULL, near TEXT NOT NULL, speaker TEXT NOT NULL, "
        "scope TEXT GENERATED ALWAYS AS ('u' || hex(owner)) VIRTUAL)"
    )
    conn.execute(
        f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5({COLUMNS}, "
        f"content='memory_lines', content_rowid='id', tokenize='{TOKENIZER}')"
    )
    # How many rows of each file a speaker label starts: a query's word is a label when the
    # owner's files hold it often enough (see harness.memory._search.labels_in).
    conn.execute(
        "CREATE TABLE memory_labels (owner TEXT NOT NULL, label TEXT NOT NULL, "
        "path TEXT NOT NULL, rows INTEGER NOT NULL, PRIMARY KEY (owner, label, path))"
    )
    conn.execute("CREATE INDEX memory_labels_path ON memory_labels (path)")
    # Each file owns ids [first_id, first_id + capacity): its rows, then room to grow.
    conn.execute("ALTER TABLE memory_files ADD COLUMN capacity INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE memory_files ADD COLUMN chars INTEGER NOT NULL DEFAULT 0")
    conn.execute("INSERT OR REPLACE INTO memory_meta (key, value) VALUES ('rows', '0')")


def _m004_resolved_days(conn: sqlite3.Connection) -> None:
    # A dated line's context now holds its day's key and the days its "yesterday" or "last
    # Tuesday" means: every file is indexed again at the next catch-up (same schema).
    delete_all_rows(conn)


def _m005_place_keys(conn: sqlite3.Connection) -> None:
    # A line that names a place now holds the place key in its context: every file is indexed
    # again at the next catch-up (same schema).
    delete_all_rows(conn)


def _m006_named_regions(conn: sqlite3.Connection) -> None:
    # The gazetteer now holds the places GeoNames lists as no country or city (England, Europe,
    # the East Coast): every file is indexed again at the next catch-up (same schema).
    delete_all_rows(conn)


Migration = tuple[str, Callable[[sqlite3.Connection], None]]

MIGRATIONS: Final[Sequence[Migration]] = (
    ("m001_lines_and_fts", _m001_lines_and_fts),
    ("m002_vectors", _m002_vectors),
    ("m003_neighbours_and_speakers", _m003_neighbours_and_speakers),
    ("m004_resolved_days", _m004_resolved_days),
    ("m005_place_keys", _m005_place_keys),
    ("m006_named_regions", _m006_named_regions),
)
"""Schema changes in order; each runs once per database, recorded in ``_harness_migrations``."""
