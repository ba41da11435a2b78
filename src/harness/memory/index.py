"""The memory search index: SQLite FTS5 over every line of the workspace's memory files.

The index lives in ``<base_dir>/memory_index.db`` (the harness passes the workspace's parent).
It is derived data: memory files are the truth, and deleting the database loses nothing, since
:meth:`MemoryIndex.rebuild` (or the next :meth:`MemoryIndex.index_all_from_workspace`) restores
it. Indexed files are ``MEMORY.md``, ``memory/*.md`` (not ``memory/archive/``) and session
transcripts ``agents/*/sessions/*.log.jsonl``, shared and under every ``users/<segment>/``.

Schema (created by the ordered migrations in :mod:`harness.memory._fts`, recorded by name in
``_harness_migrations``)::

    memory_files(path PRIMARY KEY, owner, size, mtime_ns, sha256, rows)   one per indexed file
    memory_lines(id PRIMARY KEY, path, owner, line_number, content, cjk, context)
    memory_lines_fts  FTS5(content, cjk, context), external content = memory_lines,
                      tokenize 'porter unicode61 remove_diacritics 2', rank bm25(1, 1, 0.3)
    memory_vectors(id PRIMARY KEY, vector)      unit float32 per line, only with an embedder
    memory_meta(key PRIMARY KEY, value)         which embedder made the vectors

``owner`` is ``<segment>`` for a path under ``users/<segment>/`` and ``""`` (shared) otherwise;
a search for a user sees that user's rows and shared rows, never another user's. The FTS table
is kept in sync by this class rather than by triggers: FTS5 flushes its pending terms at every
statement savepoint, so a trigger per row writes one index segment per row (measured 7x slower
than the set-based ``INSERT ... SELECT`` used here). A file is re-indexed by deleting its rows
and inserting the new ones, so the cost depends on that file alone; an unchanged file is skipped
by its size and mtime, then by its content hash.

Queries (see :mod:`harness.memory._query`): words minus stop words, irregular forms widened,
CJK runs as bigrams; one clause per term, OR'ed, ranked by BM25. FTS5 scores every row an OR
matches, so when the clauses together match more than ``RANK_BUDGET`` rows, the index estimates
each clause's frequency (cheap capped counts) and ranks with the rarest clauses that fit the
budget; rows that also hold the frequent clauses get those clauses' BM25 idf added afterwards.
If even the rarest clause alone is too frequent, rows holding the two rarest clauses are ranked
first and the newest rows of the rarest clause fill up. With an embedder, the keyword ranking
and a vector ranking are fused by reciprocal rank fusion; there is no score threshold, so a
keyword hit is never dropped for a low similarity.

Concurrency: WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for every write, so readers
in other processes never block and writers queue. One connection per instance, guarded by a
lock, makes an instance safe to share between threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

from harness.errors import StorageError
from harness.memory._fts import FTS_TABLE, MIGRATIONS, Row, rows_for
from harness.memory._query import all_of, analyze, any_of
from harness.memory._vectors import VectorMatrix, pack
from harness.memory.embedding import Embedder, import_optional
from harness.workspace import AGENTS_DIR, MEMORY_DIR, MEMORY_MD, USERS_DIR, normalize, safe_segment

__all__ = ["INDEX_FILE", "RANK_BUDGET", "IndexStats", "MemoryIndex", "SearchHit"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

INDEX_FILE: Final = "memory_index.db"
"""The database file name inside ``base_dir``."""

RANK_BUDGET: Final = 4000
"""At most about this many rows are scored by BM25 per query (about 10 ms); see the module doc."""

_CANDIDATES: Final = 50
_NEWEST_WINDOW: Final = 2000
_BATCH_ROWS: Final = 50_000
_OPTIMIZE_ROWS: Final = 100_000
_RRF_K: Final = 60
_BUSY_TIMEOUT_MS: Final = 10_000
_EMBED_BATCH: Final = 256

_RANK_SQL: Final = f"""SELECT l.id, l.path, l.line_number, l.content, -f.rank
FROM {FTS_TABLE} AS f JOIN memory_lines AS l ON l.id = f.rowid
WHERE {FTS_TABLE} MATCH :query AND f.rowid >= :since AND l.owner IN ('', :owner)
ORDER BY f.rank LIMIT :limit"""

_NOTHING_SQL: Final = "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching line: where it is, what it says, and how well it matched (higher is better)."""

    path: str
    line_number: int
    content: str
    rank: float


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexStats:
    """What one pass over a workspace did (counts of files, except ``rows`` and ``embedded``)."""

    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    rows: int = 0
    embedded: int = 0


_Hit = tuple[int, str, int, str, float]  # id, path, line_number, content, score
_Pending = tuple[str, list[Row], str, int | None, int | None]  # path, rows, sha256, size, mtime


def _owner(path: str) -> str:
    parts = path.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == USERS_DIR else ""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def _id_range(conn: sqlite3.Connection) -> tuple[int, int]:
    """The lowest and highest row id (two index lookups; ``min(), max()`` together would scan)."""
    low, high = conn.execute(
        "SELECT (SELECT min(id) FROM memory_lines), (SELECT max(id) FROM memory_lines)"
    ).fetchone()
    return low, high


def _scan(workspace: Path) -> dict[str, tuple[int, int]]:
    """Workspace path -> (size, mtime_ns) of every indexable file (symbolic links skipped)."""
    found: dict[str, tuple[int, int]] = {}

    def entries(directory: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as it:
                return [e for e in it if not e.name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def add(rel: str, entry: os.DirEntry[str]) -> None:
        if entry.is_file(follow_symlinks=False):
            stat = entry.stat(follow_symlinks=False)
            found[rel] = (stat.st_size, stat.st_mtime_ns)

    roots = [("", workspace)]
    for user in entries(workspace / USERS_DIR):
        if user.is_dir(follow_symlinks=False):
            roots.append((f"{USERS_DIR}/{user.name}/", Path(user.path)))
    for prefix, root in roots:
        for entry in entries(root):
            if entry.name == MEMORY_MD:
                add(prefix + MEMORY_MD, entry)
        for entry in entries(root / MEMORY_DIR):
            if entry.name.endswith(".md"):
                add(f"{prefix}{MEMORY_DIR}/{entry.name}", entry)
        for agent in entries(root / AGENTS_DIR):
            if agent.is_dir(follow_symlinks=False):
                for entry in entries(Path(agent.path) / "sessions"):
                    if entry.name.endswith(".log.jsonl"):
                        add(f"{prefix}{AGENTS_DIR}/{agent.name}/sessions/{entry.name}", entry)
    return found


class MemoryIndex:
    """Full-text (and optionally vector) search over the lines of a workspace's memory files.

    Args:
        base_dir: Directory holding ``memory_index.db`` (created on :meth:`open`).
        embedder: Adds vector search fused with keyword search; None for keywords only.

    Raises:
        ConfigError: An embedder is given but numpy (``harness[embeddings]``) is missing.
    """

    def __init__(self, base_dir: str | Path, *, embedder: Embedder | None = None) -> None:
        self.path = Path(base_dir).expanduser() / INDEX_FILE
        self.embedder = embedder
        if embedder is not None:
            import_optional("numpy")
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._depth = 0
        self._commits = 0
        self._matrix: tuple[tuple[int, int], VectorMatrix] | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> MemoryIndex:
        """Open the database, creating it and its schema as needed (idempotent).

        Raises:
            StorageError: The file cannot be created or is not a usable database.
        """
        with self._lock:
            if self._conn is not None:
                return self
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    self.path,
                    timeout=_BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except (OSError, sqlite3.Error) as exc:
                msg = f"cannot open the memory index {self.path}: {exc}"
                raise StorageError(msg) from exc
            self._conn = conn
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._migrate()
                self._check_embedder()
            except sqlite3.Error as exc:
                self.close()
                msg = (
                    f"the memory index {self.path} is unusable ({exc}); it is a cache of the "
                    "memory files: delete it and run a re-index"
                )
                raise StorageError(msg) from exc
            return self

    def close(self) -> None:
        """Close the database (idempotent); the instance can be opened again."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA optimize")
                self._conn.close()
                self._conn = None
                self._matrix = None

    def __enter__(self) -> MemoryIndex:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.open()
        assert self._conn is not None
        return self._conn

    @contextlib.contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``), or a savepoint when nested.

        Commits when the block ends, rolls back on any exception. The write lock is taken at
        the start, so a busy database is waited for (busy timeout) instead of failing midway.
        """
        with self._lock:
            conn = self._connection()
            depth = self._depth
            conn.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT atomic_{depth}")
            self._depth += 1
            try:
                yield conn
            except BaseException:
                self._depth -= 1
                if depth == 0:
                    conn.execute("ROLLBACK")
                else:
                    conn.execute(f"ROLLBACK TO atomic_{depth}")
                    conn.execute(f"RELEASE atomic_{depth}")
                raise
            self._depth -= 1
            conn.execute("COMMIT" if depth == 0 else f"RELEASE atomic_{depth}")
            self._commits += 1

    def _migrate(self) -> None:
        with self.atomic() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS _harness_migrations "
                "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {name for (name,) in conn.execute("SELECT name FROM _harness_migrations")}
            for name, migration in MIGRATIONS:
                if name not in done:
                    migration(conn)
                    conn.execute(
                        "INSERT INTO _harness_migrations (name, applied_at) VALUES (?, ?)",
                        (name, datetime.now(UTC).isoformat()),
                    )

    def _check_embedder(self) -> None:
        """Drop stored vectors made by another embedder; the next full index re-embeds."""
        if self.embedder is None:
            return
        name = getattr(self.embedder, "name", type(self.embedder).__qualname__)
        identity = f"{name}/{self.embedder.dimensions}"
        with self.atomic() as conn:
            row = conn.execute("SELECT value FROM memory_meta WHERE key = 'embedder'").fetchone()
            if row is None or row[0] != identity:
                conn.execute("DELETE FROM memory_vectors")
                conn.execute(
                    "INSERT OR REPLACE INTO memory_meta (key, value) VALUES ('embedder', ?)",
                    (identity,),
                )

    # --- writing ---------------------------------------------------------------------------

    def index_from_string(self, rel_path: str, content: str) -> int:
        """Replace the rows of one file with those of ``content``; returns the rows written.

        Blank content removes the file's rows. Content identical to what was indexed last
        (same hash) costs one lookup and writes nothing.
        """
        path = normalize(rel_path)
        digest = _digest(content)
        with self._lock:
            row = self._connection().execute(
                "SELECT sha256 FROM memory_files WHERE path = ?", (path,)
            ).fetchone()
        if row is not None and row[0] == digest:
            return 0
        return self._write([(path, rows_for(path, content), digest, None, None)])

    def remove(self, rel_path: str) -> None:
        """Forget a file's rows."""
        path = normalize(rel_path)
        with self.atomic() as conn:
            self._delete_rows(conn, [path])
            conn.execute("DELETE FROM memory_files WHERE path = ?", (path,))

    def index_all_from_workspace(
        self, workspace: Path, *, progress: Callable[[int, int], None] | None = None
    ) -> IndexStats:
        """Bring the index up to date with a local workspace directory.

        Files whose size and mtime are unchanged are skipped without reading; changed files
        whose content hash is unchanged are not re-indexed; rows of files that no longer exist
        are removed. ``progress(done, total)`` is called after each file.
        """
        root = Path(workspace)
        found = _scan(root)
        with self._lock:
            known = {
                path: (size, mtime, sha)
                for path, size, mtime, sha in self._connection().execute(
                    "SELECT path, size, mtime_ns, sha256 FROM memory_files"
                )
            }
        pending: list[_Pending] = []
        touched: list[tuple[int, int, str]] = []
        indexed = unchanged = rows = pending_rows = 0
        for done, path in enumerate(sorted(found), start=1):
            size, mtime = found[path]
            old = known.get(path)
            if old is not None and old[0] == size and old[1] == mtime:
                unchanged += 1
            else:
                try:
                    text = (root / path).read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    text = ""
                digest = _digest(text)
                if old is not None and old[2] == digest:
                    touched.append((size, mtime, path))
                    unchanged += 1
                else:
                    pending.append((path, rows_for(path, text), digest, size, mtime))
                    pending_rows += len(pending[-1][1])
                    indexed += 1
                    if pending_rows >= _BATCH_ROWS:
                        rows += self._write(pending)
                        pending, pending_rows = [], 0
            if progress is not None:
                progress(done, len(found))
        rows += self._write(pending)
        gone = [p for p in known if p not in found and not (root / p).is_file()]
        with self.atomic() as conn:
            conn.executemany(
                "UPDATE memory_files SET size = ?, mtime_ns = ? WHERE path = ?", touched
            )
            self._delete_rows(conn, gone)
            conn.executemany("DELETE FROM memory_files WHERE path = ?", [(p,) for p in gone])
            if rows >= _OPTIMIZE_ROWS:  # merge the many segments of a big load into one
                conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
        embedded = self._backfill_vectors()
        return IndexStats(
            files=len(found),
            indexed=indexed,
            unchanged=unchanged,
            removed=len(gone),
            rows=rows,
            embedded=embedded,
        )

    def rebuild(self, workspace: Path) -> IndexStats:
        """Drop every row and index the workspace again (the recovery path for a bad index)."""
        with self.atomic() as conn:
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('delete-all')")
            for table in ("memory_lines", "memory_vectors", "memory_files"):
                conn.execute(f"DELETE FROM {table}")
        return self.index_all_from_workspace(workspace)

    def _write(self, files: Sequence[_Pending]) -> int:
        """Replace the rows of several files in one transaction; returns the rows written.

        Each statement that writes the FTS table makes FTS5 flush a segment, so a batch is
        one delete statement and one insert statement for all its files together.
        """
        if not files:
            return 0
        vectors = self._embed([row[1] for _, rows, *_ in files for row in rows])
        lines: list[tuple[Any, ...]] = []
        with self.atomic() as conn:
            self._delete_rows(conn, [path for path, *_ in files])
            (first,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM memory_lines").fetchone()
            for path, rows, *_ in files:
                owner, base = _owner(path), first + len(lines)
                lines += [(base + i, path, owner, n, c, g, x) for i, (n, c, g, x) in enumerate(rows)]
            conn.executemany(
                "INSERT INTO memory_lines (id, path, owner, line_number, content, cjk, context) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                lines,
            )
            conn.execute(
                f"INSERT INTO {FTS_TABLE} (rowid, content, cjk, context) "
                "SELECT id, content, cjk, context FROM memory_lines WHERE id >= ?",
                (first,),
            )
            if vectors is not None:
                conn.executemany(
                    "INSERT INTO memory_vectors (id, vector) VALUES (?, ?)",
                    [(first + i, blob) for i, blob in enumerate(vectors)],
                )
            conn.executemany(
                "INSERT OR REPLACE INTO memory_files (path, owner, size, mtime_ns, sha256, rows) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(p, _owner(p), size, mtime, sha, len(rows)) for p, rows, sha, size, mtime in files],
            )
        return len(lines)

    @staticmethod
    def _delete_rows(conn: sqlite3.Connection, paths: Sequence[str]) -> None:
        """Delete the rows of ``paths`` from the FTS table, the vectors and the lines."""
        selected = "SELECT id FROM memory_lines WHERE path IN (SELECT value FROM json_each(?))"
        batch = json.dumps(list(paths))
        conn.execute(
            f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, content, cjk, context) "
            "SELECT 'delete', id, content, cjk, context FROM memory_lines "
            "WHERE path IN (SELECT value FROM json_each(?))",
            (batch,),
        )
        conn.execute(f"DELETE FROM memory_vectors WHERE id IN ({selected})", (batch,))
        conn.execute(f"DELETE FROM memory_lines WHERE id IN ({selected})", (batch,))

    def _embed(self, texts: Sequence[str]) -> list[bytes] | None:
        """Vectors for ``texts`` (computed before any transaction starts), or None."""
        if self.embedder is None:
            return None
        dims = self.embedder.dimensions
        blobs: list[bytes] = []
        for start in range(0, len(texts), _EMBED_BATCH):
            batch = texts[start : start + _EMBED_BATCH]
            vectors = self.embedder.embed(batch)
            if len(vectors) != len(batch):
                msg = f"the embedder returned {len(vectors)} vectors for {len(batch)} texts"
                raise ValueError(msg)
            blobs.extend(pack(v, dims) for v in vectors)
        return blobs

    def _backfill_vectors(self) -> int:
        """Embed rows that have no vector (written without an embedder, or by another one)."""
        if self.embedder is None:
            return 0
        total = 0
        while True:
            with self._lock:
                missing = self._connection().execute(
                    "SELECT l.id, l.content FROM memory_lines AS l LEFT JOIN memory_vectors "
                    "AS v ON v.id = l.id WHERE v.id IS NULL LIMIT ?",
                    (_EMBED_BATCH * 4,),
                ).fetchall()
            if not missing:
                return total
            blobs = self._embed([content for _, content in missing]) or []
            with self.atomic() as conn:
                conn.executemany(
                    "INSERT OR IGNORE INTO memory_vectors (id, vector) SELECT ?, ? WHERE EXISTS "
                    "(SELECT 1 FROM memory_lines WHERE id = ? AND content = ?)",
                    [(i, blob, i, c) for (i, c), blob in zip(missing, blobs, strict=True)],
                )
            total += len(missing)

    # --- searching -------------------------------------------------------------------------

    def search_sql(
        self, query: str, limit: int = 10, *, user_id: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The SQL and parameters of the main ranking statement ``search`` would run first.

        For inspection and tests; the MATCH expression is always a bound parameter.
        """
        with self._lock:
            stages, _ = self._plan(self._connection(), analyze(query))
        if not stages:
            return _NOTHING_SQL, {}
        expression, since = stages[0]
        owner = safe_segment(user_id) if user_id else ""
        params = {"query": expression, "since": since, "owner": owner, "limit": limit}
        return _RANK_SQL, params

    def search(self, query: str, limit: int = 10, *, user_id: str | None = None) -> list[SearchHit]:
        """The lines that best answer ``query``, best first; ``[]`` when nothing matches.

        Any text is accepted: operators, quotes and punctuation are treated as plain text.

        Args:
            query: What to look for, as a person would ask it.
            limit: At most this many hits.
            user_id: Search this user's rows as well as shared ones; None for shared only.
        """
        if limit <= 0:
            return []
        owner = safe_segment(user_id) if user_id else ""
        probe = None
        if self.embedder is not None and query.strip():
            (probe,) = self.embedder.embed([query[:2000]])
        wanted = limit if probe is None else max(limit, _CANDIDATES)
        with self._lock:
            conn = self._connection()
            keyword = self._keyword(conn, analyze(query), owner, wanted)
            if probe is None:
                return [SearchHit(p, n, c, s) for _, p, n, c, s in keyword[:limit]]
            semantic = self._vectors(conn).top(probe, ("", owner), wanted)
            return self._fuse(conn, keyword, semantic, limit)

    def _frequency(self, conn: sqlite3.Connection, clause: str, span: tuple[int, int]) -> int:
        """How many rows match ``clause``: exact up to RANK_BUDGET, estimated beyond it."""
        count, oldest = conn.execute(
            f"SELECT count(*), min(rowid) FROM (SELECT rowid FROM {FTS_TABLE} "
            f"WHERE {FTS_TABLE} MATCH ? ORDER BY rowid DESC LIMIT ?)",
            (clause, RANK_BUDGET),
        ).fetchone()
        if count < RANK_BUDGET:
            return int(count)
        low, high = span  # rows are spread roughly evenly over ids: scale by the ids covered
        return max(count, round(count * (high - low + 1) / (high - oldest + 1)))

    def _plan(
        self, conn: sqlite3.Connection, clauses: list[str]
    ) -> tuple[list[tuple[str, int]], list[tuple[int, str]]]:
        """Ranking stages (expression, lowest row id) and the (frequency, clause) left over."""
        low, high = _id_range(conn)
        if not clauses or high is None:
            return [], []
        ranked = sorted((self._frequency(conn, c, (low, high)), c) for c in clauses)
        core: list[str] = []
        total = 0
        for frequency, clause in ranked:
            if total + frequency > RANK_BUDGET:
                break
            core.append(clause)
            total += frequency
        if core:
            return [(any_of(core), 0)], ranked[len(core) :]
        pair = [all_of([ranked[0][1], ranked[1][1]])] if len(ranked) > 1 else []
        return [self._newest(conn, e) for e in [*pair, ranked[0][1]]], ranked[1:]

    @staticmethod
    def _newest(conn: sqlite3.Connection, expression: str) -> tuple[str, int]:
        """A stage limited to the newest ``_NEWEST_WINDOW`` rows that match ``expression``."""
        cut = conn.execute(
            f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
            "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (expression, _NEWEST_WINDOW - 1),
        ).fetchone()
        return expression, cut[0] if cut else 0

    def _keyword(
        self, conn: sqlite3.Connection, clauses: list[str], owner: str, limit: int
    ) -> list[_Hit]:
        stages, rest = self._plan(conn, clauses)
        wanted = max(limit, _CANDIDATES) if rest else limit
        hits: dict[int, _Hit] = {}
        for expression, since in stages:
            if len(hits) >= wanted:
                break
            params = {"query": expression, "since": since, "owner": owner, "limit": wanted}
            for hit in conn.execute(_RANK_SQL, params):
                hits.setdefault(hit[0], hit)
        if rest and hits:
            low, high = _id_range(conn)
            total = high - low + 1
            ids = json.dumps(list(hits))
            for frequency, clause in rest:
                idf = max(1e-6, math.log((total - frequency + 0.5) / (frequency + 0.5)))
                for (row_id,) in conn.execute(
                    f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
                    "AND rowid IN (SELECT value FROM json_each(?))",
                    (clause, ids),
                ):
                    i, p, n, c, s = hits[row_id]
                    hits[row_id] = (i, p, n, c, s + idf)
        return sorted(hits.values(), key=lambda h: (-h[4], -h[0]))[:limit]

    def _vectors(self, conn: sqlite3.Connection) -> VectorMatrix:
        """The vector matrix, reloaded when this or another connection changed the database."""
        assert self.embedder is not None
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        key = (int(version), self._commits)
        if self._matrix is None or self._matrix[0] != key:
            rows = conn.execute(
                "SELECT v.id, l.owner, v.vector FROM memory_vectors AS v "
                "JOIN memory_lines AS l ON l.id = v.id"
            ).fetchall()
            matrix = VectorMatrix(
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                self.embedder.dimensions,
            )
            self._matrix = (key, matrix)
        return self._matrix[1]

    @staticmethod
    def _fuse(
        conn: sqlite3.Connection,
        keyword: Sequence[_Hit],
        semantic: Sequence[tuple[int, float]],
        limit: int,
    ) -> list[SearchHit]:
        """Reciprocal rank fusion: each list adds 1 / (60 + rank) to the rows it holds."""
        scores: dict[int, float] = {}
        for rank, hit in enumerate(keyword, start=1):
            scores[hit[0]] = scores.get(hit[0], 0.0) + 1.0 / (_RRF_K + rank)
        for rank, (row_id, _) in enumerate(semantic, start=1):
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
        return [
            SearchHit(known[i][1], known[i][2], known[i][3], scores[i]) for i in best if i in known
        ]

    # --- async facade ----------------------------------------------------------------------

    @staticmethod
    async def _in_thread(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """The one place the index leaves the event loop: SQLite and file I/O block."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def asearch(
        self, query: str, limit: int = 10, *, user_id: str | None = None
    ) -> list[SearchHit]:
        """:meth:`search` in a worker thread."""
        return await self._in_thread(self.search, query, limit, user_id=user_id)

    async def aindex_from_string(self, rel_path: str, content: str) -> int:
        """:meth:`index_from_string` in a worker thread."""
        return await self._in_thread(self.index_from_string, rel_path, content)

    async def aindex_all_from_workspace(
        self, workspace: Path, *, progress: Callable[[int, int], None] | None = None
    ) -> IndexStats:
        """:meth:`index_all_from_workspace` in a worker thread."""
        return await self._in_thread(self.index_all_from_workspace, workspace, progress=progress)
