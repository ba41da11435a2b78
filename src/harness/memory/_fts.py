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
  (``March 14 2026``) and the markdown heading above the line — so questions that name a
  date or a topic heading can find lines that do not repeat it.

Transcripts (``*.log.jsonl``) contribute only entries of type ``message``; compaction summaries
(type ``summary``) and unparseable lines never become rows.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Sequence
from datetime import date
from typing import Final

__all__ = [
    "CJK_CHARS",
    "COLUMNS",
    "FTS_TABLE",
    "MAX_ROW_CHARS",
    "MIGRATIONS",
    "TOKENIZER",
    "Pending",
    "Row",
    "cjk_grams",
    "delete_rows",
    "rows_for",
    "scope_token",
    "write_rows",
]

FTS_TABLE: Final = "memory_lines_fts"
"""The FTS5 table (external content over ``memory_lines``)."""

COLUMNS: Final = "content, cjk, context, scope"
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
_GLUED: Final = re.compile(f"(?<=[{CJK_CHARS}]){_LATIN_WORD}|{_LATIN_WORD}(?=[{CJK_CHARS}])")
_DAILY_NAME: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")
_FLUSH_HEADING: Final = re.compile(r"memory flush\b", re.IGNORECASE)
_MONTHS: Final = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

Row = tuple[int, str, str, str]
"""One row: (1-based line number in the file, content, cjk bigrams, context)."""


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


def _date_words(rel_path: str) -> str:
    name = rel_path.rsplit("/", 1)[-1]
    match = _DAILY_NAME.fullmatch(name)
    if match is None:
        return ""
    try:
        day = date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return ""
    return f"{_MONTHS[day.month - 1]} {day.day} {day.year}"


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


def _append(rows: list[Row], number: int, text: str, context: str) -> None:
    for piece in _pieces(text) if len(text) > MAX_ROW_CHARS else (text,):
        grams = cjk_grams(piece) if _CJK_RUN.search(piece) else ""
        rows.append((number, piece, grams, context))


def _markdown_rows(rel_path: str, text: str) -> list[Row]:
    day = _date_words(rel_path)
    context = day
    rows: list[Row] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            title = line.lstrip("#").strip()
            heading = "" if _FLUSH_HEADING.match(title) else title
            _append(rows, number, line, day)
            context = f"{day} {heading}".strip()
        elif len(line) <= MAX_ROW_CHARS and line.isascii():  # the common case, kept cheap
            rows.append((number, line, "", context))
        else:
            _append(rows, number, line, context)
    return rows


def _transcript_rows(text: str) -> list[Row]:
    rows: list[Row] = []
    for number, raw in enumerate(text.split("\n"), start=1):
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
        context = _date_words(f"{stamp[:10]}.md") if isinstance(stamp, str) else ""
        for line in content.split("\n"):
            if line.strip():
                _append(rows, number, line.strip(), context)
    return rows


def rows_for(rel_path: str, text: str) -> list[Row]:
    """The rows a workspace file becomes (transcripts by entry, everything else by line)."""
    if rel_path.endswith(".jsonl"):
        return _transcript_rows(text)
    return _markdown_rows(rel_path, text)


# --- writing ----------------------------------------------------------------------------

Pending = tuple[str, list[Row], str, int | None, int | None]
"""A file to (re)write: (path, rows, sha256, size, mtime_ns); size and mtime None if unknown."""

_ROWS_OF = (
    "FROM memory_files AS f JOIN memory_lines AS l "
    "ON l.id >= f.first_id AND l.id < f.first_id + f.rows "
    "WHERE f.path IN (SELECT value FROM json_each(?))"
)


def delete_rows(conn: sqlite3.Connection, paths: Sequence[str]) -> None:
    """Delete the rows of ``paths`` from the FTS table, the vectors and the lines.

    A file's rows are the id range recorded in ``memory_files``, so no index on path is needed.
    """
    batch = (json.dumps(list(paths)),)
    columns = ", ".join(f"l.{c}" for c in COLUMNS.split(", "))
    conn.execute(
        f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, {COLUMNS}) "
        f"SELECT 'delete', l.id, {columns} {_ROWS_OF}",
        batch,
    )
    conn.execute(f"DELETE FROM memory_vectors WHERE id IN (SELECT l.id {_ROWS_OF})", batch)
    conn.execute(f"DELETE FROM memory_lines WHERE id IN (SELECT l.id {_ROWS_OF})", batch)


def write_rows(
    conn: sqlite3.Connection,
    files: Sequence[Pending],
    owners: Sequence[str],
    vectors: Sequence[bytes] | None,
) -> int:
    """Replace the rows of ``files`` (inside the caller's transaction); returns rows written.

    FTS5 flushes a segment at every statement that writes it (statement savepoints), so the
    whole batch is one delete and one ``INSERT ... SELECT``, never a statement per row or file.
    """
    delete_rows(conn, [path for path, *_ in files])
    (first,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM memory_lines").fetchone()
    lines: list[tuple[object, ...]] = []
    registry: list[tuple[object, ...]] = []
    for (path, rows, sha, size, mtime), owner in zip(files, owners, strict=True):
        start = first + len(lines)
        registry.append((path, owner, size, mtime, sha, start, len(rows)))
        lines += [(start + i, path, owner, *row) for i, row in enumerate(rows)]
    conn.executemany(
        "INSERT INTO memory_lines (id, path, owner, line_number, content, cjk, context) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        lines,
    )
    conn.execute(
        f"INSERT INTO {FTS_TABLE} (rowid, {COLUMNS}) "
        f"SELECT id, {COLUMNS} FROM memory_lines WHERE id >= ?",
        (first,),
    )
    if vectors is not None:
        conn.executemany(
            "INSERT INTO memory_vectors (id, vector) VALUES (?, ?)",
            [(first + i, blob) for i, blob in enumerate(vectors)],
        )
    conn.executemany(
        "INSERT OR REPLACE INTO memory_files (path, owner, size, mtime_ns, sha256, first_id, "
        "rows) VALUES (?, ?, ?, ?, ?, ?, ?)",
        registry,
    )
    return len(lines)


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
        f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5({COLUMNS}, "
        f"content='memory_lines', content_rowid='id', tokenize='{TOKENIZER}')"
    )


def _m002_vectors(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE memory_vectors (id INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
    conn.execute("CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


Migration = tuple[str, Callable[[sqlite3.Connection], None]]

MIGRATIONS: Final[Sequence[Migration]] = (
    ("m001_lines_and_fts", _m001_lines_and_fts),
    ("m002_vectors", _m002_vectors),
)
"""Schema changes in order; each runs once per database, recorded in ``_harness_migrations``."""
