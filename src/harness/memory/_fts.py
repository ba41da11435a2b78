"""The document side of the memory index: schema, migrations, and the rows a file becomes.

Every non-blank line of a memory file becomes one row of ``memory_lines`` with three texts that
the FTS5 table ``memory_lines_fts`` indexes (see :mod:`harness.memory.index` for the schema):

- ``content``: the stripped line, tokenized by ``porter unicode61 remove_diacritics 2``;
- ``cjk``: overlapping bigrams of every Chinese, Japanese or Korean run in the line, plus the
  run's last character alone, separated by spaces. ``unicode61`` keeps a CJK run as one token,
  so without this column a word inside a sentence could never match; bigrams make two-character
  words match, and the extra last character lets a one-character query run as a prefix query
  (every character of a run starts a bigram except the last one);
- ``context``: low-weight words about where the line sits — the date of a daily file
  (``2026-03-14 March 14``) and the markdown heading above the line — so questions that name a
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
    "FTS_TABLE",
    "MAX_ROW_CHARS",
    "MIGRATIONS",
    "Row",
    "cjk_grams",
    "rows_for",
]

FTS_TABLE: Final = "memory_lines_fts"
"""The FTS5 table (external content over ``memory_lines``)."""

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
_DAILY_NAME: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")
_FLUSH_HEADING: Final = re.compile(r"memory flush\b", re.IGNORECASE)
_MONTHS: Final = (
    "January February March April May June July August September October November December"
).split()

Row = tuple[int, str, str, str]
"""One row: (1-based line number in the file, content, cjk bigrams, context)."""


def cjk_grams(text: str) -> str:
    """The ``cjk`` column text of a line: bigrams of each CJK run plus the run's last character."""
    grams: list[str] = []
    for run in _CJK_RUN.findall(unicodedata.normalize("NFKC", text)):
        grams.extend(run[i : i + 2] for i in range(len(run) - 1))
        grams.append(run[-1])
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
    return f"{day.isoformat()} {_MONTHS[day.month - 1]} {day.day}"


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


# --- migrations -------------------------------------------------------------------------------


def _m001_lines_and_fts(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE memory_files (path TEXT PRIMARY KEY, owner TEXT NOT NULL, size INTEGER, "
        "mtime_ns INTEGER, sha256 TEXT NOT NULL, rows INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE memory_lines (id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
        "owner TEXT NOT NULL, line_number INTEGER NOT NULL, content TEXT NOT NULL, "
        "cjk TEXT NOT NULL, context TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX memory_lines_path ON memory_lines (path)")
    conn.execute(
        f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(content, cjk, context, "
        "content='memory_lines', content_rowid='id', "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    # content and cjk weigh the same; context (date words, heading) only breaks ties.
    conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('rank', 'bm25(1.0, 1.0, 0.3)')")


def _m002_vectors(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE memory_vectors (id INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
    conn.execute("CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


Migration = tuple[str, Callable[[sqlite3.Connection], None]]

MIGRATIONS: Final[Sequence[Migration]] = (
    ("m001_lines_and_fts", _m001_lines_and_fts),
    ("m002_vectors", _m002_vectors),
)
"""Schema changes in order; each runs once per database, recorded in ``_harness_migrations``."""
