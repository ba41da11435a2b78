"""The memory search index: SQLite FTS5 over every line of the workspace's memory files.

The index lives beside its workspace, one per workspace (:func:`index_file`):
``<parent>/memory_index.db`` for the workspace that already has it there (where every index
used to be), ``<parent>/.<name>.memory_index.db`` for any other, so any number of workspaces
share a parent directory. It is derived data: memory files are the truth, and deleting the
database loses nothing, since :meth:`MemoryIndex.rebuild` (or the next
:meth:`MemoryIndex.index_all_from_workspace`) restores it. Indexed files
(:mod:`harness.memory._files`): ``MEMORY.md``, ``memory/*.md`` (not the archive) and
transcripts ``agents/*/sessions/*.log.jsonl``, shared and under every ``users/<segment>/``.

Schema (ordered, named migrations in :mod:`harness.memory._fts`, recorded in
``_harness_migrations``)::

    memory_files(path PK, owner, size, mtime_ns, sha256, first_id, rows, capacity, chars)
                                    one per file: its id range and the text its hash covers
    memory_lines(id PK, path, owner, line_number, content, cjk, context, near, speaker,
                 scope GENERATED = 'u' || hex(owner))                      one per line
    memory_lines_fts  FTS5(content, cjk, context, near, scope), external content =
                      memory_lines, tokenize 'porter unicode61 remove_diacritics 2'
    memory_labels(owner PK, label PK, path PK, rows)   the speakers of each file, counted
    memory_vectors(id PK, vector)   unit float32 per line, only with an embedder
    memory_meta(key PK, value)      which embedder made the vectors
    _harness_migrations(name PK, applied_at)           the migrations applied

A row's ``owner`` is ``<segment>`` under ``users/<segment>/`` and ``""`` (shared) otherwise; a
search for a user sees that user's rows only: the shared rows are the memory and transcripts
of calls made without a user, which are not a user's to see. ``cjk`` holds bigrams of
Chinese, Japanese and Korean text and ``context`` the daily file's date, the days the line's
"yesterday" or "last Tuesday" mean (:mod:`harness.memory._dates`), a key when it names a place
(:mod:`harness.memory._places`) and the section heading (weight 0.3); ``near`` and
``speaker`` place a turn of a conversation (:mod:`harness.memory._fts`).
``tests/unit/memory/test_index_schema_doc.py`` holds this list to the database the index
creates. The FTS table is written by this class, set-based, rather than by triggers: FTS5
flushes a segment at every statement savepoint, and a trigger per row made bulk indexing 7x
slower. A file is re-indexed by deleting its id range and inserting its new rows,
so the cost depends on that file alone; an unchanged file is skipped by size and mtime, then by
content hash.

Queries (:mod:`harness.memory._query`): words minus stop words, irregular forms widened, CJK
runs as bigrams; one clause per term, OR'ed and ranked by BM25. The cost of ranking is bounded
(:mod:`harness.memory._search`): only the rarest clauses whose rows fit ``RANK_BUDGET`` go into
``bm25()``, the frequent ones add their idf to the candidates that hold them. A question that
names a day ("on 1 February, 2023", "in May 2023") ranks the rows of that day first; one that
asks for a place ("Which cities…?") also looks for the place key. With an embedder, the
keyword ranking and an exact vector ranking are fused by a weighted sum of their normalized
scores, with no score threshold, so a keyword hit is never dropped for a low similarity. The
hits of a question that asks for a list ("What books has Ann read?") are spread over the files
(:mod:`harness.memory._lists`).

Concurrency: WAL journal, a busy timeout, ``BEGIN IMMEDIATE`` for every write and one read
transaction per search, so readers in other processes never block and see whole files; writers
queue. One connection per instance, behind a lock, makes an instance safe to share by threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

from harness.errors import StorageError
from harness.filesystem._beneath import read_beneath
from harness.memory._batches import BatchWriter
from harness.memory._files import digest, owner_of, read_limit, scan
from harness.memory._fts import (
    FTS_TABLE,
    MIGRATIONS,
    Pending,
    append_rows,
    bulk_load,
    delete_all_rows,
    delete_rows,
    rows_for,
    write_rows,
    write_tail,
)
from harness.memory._lists import asks_for_list, spread
from harness.memory._search import (
    RANK_BUDGET,
    favour_days,
    favour_speakers,
    fuse,
    keyword_hits,
    plan,
    prepare,
    terms,
)
from harness.memory._snippets import snippets as snippets_of
from harness.memory._vectors import VectorCache, embed_texts
from harness.memory.embedding import Embedder, import_optional
from harness.workspace import normalize, safe_segment

__all__ = [
    "INDEX_FILE",
    "RANK_BUDGET",
    "SNIPPET_CHARS",
    "IndexStats",
    "MemoryIndex",
    "SearchHit",
    "index_file",
    "index_owner",
]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")

INDEX_FILE: Final = "memory_index.db"


def index_file(workspace: Path, base_dir: Path | None = None) -> Path:
    """The index file of ``workspace``, in ``base_dir`` (default: beside it).

    Its own ``.<name>.memory_index.db`` when it has one; else ``memory_index.db`` unless
    another workspace has claimed that (the first workspace of a directory keeps the place
    every index used to have); else its own. Two workspaces side by side each have one, with
    nothing to move by hand. Reads the claim (a small SQLite read): call it from a thread.
    """
    directory = base_dir if base_dir is not None else workspace.parent
    own = _own_file(workspace, directory)
    shared = directory / INDEX_FILE
    if own.exists() or index_owner(shared) not in (None, str(workspace.absolute())):
        return own
    return shared


def _own_file(workspace: Path, directory: Path) -> Path:
    return directory / f".{workspace.name}.{INDEX_FILE}"


def index_owner(path: Path) -> str | None:
    """The workspace recorded in the memory index file at ``path``; None when none can be read.

    Read-only, and without the index's own machinery: an index this version cannot open
    (another program's file, a damaged one) is for ``harness memory index`` to replace.
    """
    try:
        if not path.is_file():  # a path the system refuses (too long, say) is check()'s to tell
            return None
        uri = f"{path.absolute().as_uri()}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            row = conn.execute("SELECT value FROM memory_meta WHERE key = 'workspace'").fetchone()
    except (sqlite3.Error, OSError, ValueError):
        return None
    return row[0] if row is not None and isinstance(row[0], str) else None


"""The database file name inside ``base_dir``."""

SNIPPET_CHARS: Final = 300
"""The characters of snippet text a search returns per hit asked for, by default."""

_BATCH_ROWS: Final = 50_000  # rows per write transaction of a full index
_Batch = tuple[Sequence[Pending], Sequence[bytes] | None]  # files to write and their vectors
_CANDIDATES: Final = 50  # per ranking, before fusion
_BUSY_TIMEOUT_MS: Final = 10_000
_OPEN_ATTEMPTS: Final = 10
_NOTHING_SQL: Final = "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0"


class _Claimed(StorageError):
    """The shared index file serves another workspace (a race for it was lost)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One match: where it is, what it says, and how well it matched (higher is better).

    A snippet spans lines ``line_number`` to ``last_line`` of ``path`` (its non-blank lines,
    joined by newlines in ``content``); a one-line hit has ``last_line == line_number``.
    ``rank`` is the BM25 score of its best line (plus a speaker's bonus), or the fused score
    when an embedder is set.
    """

    path: str
    line_number: int
    content: str
    rank: float
    last_line: int = 0

    def __post_init__(self) -> None:
        if self.last_line < self.line_number:
            object.__setattr__(self, "last_line", self.line_number)


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexStats:
    """What one pass over a workspace did.

    Counts of files seen, (re)indexed, skipped as unchanged and removed; of rows written, and of
    rows that got a vector.
    """

    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    rows: int = 0
    embedded: int = 0


class MemoryIndex:
    """Full-text (and optionally vector) search over the lines of a workspace's memory files.

    Args:
        base_dir: Directory holding the index file (created on :meth:`open`).
        embedder: Adds vector search fused with keyword search; None for keywords only.
        workspace: The one workspace the index serves: its file is that workspace's
            (:func:`index_file`), decided when first needed. Opening claims the index for it,
            and an index claimed by another workspace is refused at every operation: two
            workspaces sharing one file would search (and remove) each other's rows, one
            tenant reading another's memory. None: ``base_dir/memory_index.db``.

    Raises:
        ConfigError: An embedder is given but numpy (``harness[embeddings]``) is missing.
    """

    def __init__(
        self,
        base_dir: str | Path,
        *,
        embedder: Embedder | None = None,
        workspace: str | Path | None = None,
    ) -> None:
        self.base_dir = Path(base_dir).expanduser()
        self.embedder = embedder
        self.workspace = Path(workspace) if workspace is not None else None
        self._given = None if self.workspace is not None else self.base_dir / INDEX_FILE
        self._path: Path | None = self._given
        if embedder is not None:
            import_optional("numpy")
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._depth = 0
        self._commits = 0
        self._vectors = VectorCache()

    @property
    def path(self) -> Path:
        """The index file (:func:`index_file` for a workspace's: read once, then kept)."""
        if self._path is None:
            assert self.workspace is not None
            self._path = index_file(self.workspace, self.base_dir)
        return self._path

    @property
    def _chosen(self) -> bool:
        """Whether the file was chosen for a workspace (and another may be taken instead)."""
        return self.workspace is not None and self._given is None

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> MemoryIndex:
        """Open the database, creating it and its schema as needed (idempotent).

        Raises:
            StorageError: The file cannot be created or is not a usable database, or it
                serves another workspace than ``workspace``.
        """
        # Switching a new database to WAL can meet another process doing the same, and SQLite
        # reports that as "locked" at once instead of waiting; a short retry covers it.
        for attempt in range(_OPEN_ATTEMPTS):
            try:
                return self._open()
            except StorageError as exc:
                if "locked" not in str(exc) or attempt == _OPEN_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _open(self) -> MemoryIndex:
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
                # A database made by an unreleased schema of the same migration names fails here.
                conn.execute(
                    "SELECT first_id, near, speaker, label FROM memory_files, memory_lines, "
                    "memory_labels LIMIT 0"
                )
                self._check_embedder()
                prepare(conn)
                if self.workspace is not None:
                    self._claim_workspace(self.workspace)
            except _Claimed:
                # Another workspace claimed the shared file first (both saw none): this
                # workspace's index is its own file, as index_file() says from now on.
                self.close()
                assert self.workspace is not None
                self._path = _own_file(self.workspace, self.base_dir)
                return self._open()
            except StorageError:
                self.close()
                raise
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
                self._vectors = VectorCache()

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

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement of one search sees the same committed state."""
        with self._lock:
            conn = self._connection()
            if self._depth:  # inside atomic(): already one transaction
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

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
        sha = digest(content)
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT sha256 FROM memory_files WHERE path = ?", (path,))
                .fetchone()
            )
        if row is not None and row[0] == sha:
            return 0
        grown = self._grown(path, content, sha, None, None)
        if grown is not None:
            return grown
        return self._write([(path, rows_for(path, content), sha, len(content), None, None)])

    def remove(self, rel_path: str) -> None:
        """Forget a file's rows."""
        path = normalize(rel_path)
        with self.atomic() as conn:
            delete_rows(conn, [path])
            conn.execute("DELETE FROM memory_files WHERE path = ?", (path,))

    def _claim_workspace(self, root: Path) -> None:
        """Record the workspace this index serves; refuse a second one."""
        name = str(root.absolute())
        with self.atomic() as conn:
            query = "SELECT value FROM memory_meta WHERE key = 'workspace'"
            row = conn.execute(query).fetchone()
            if row is None:
                insert = "INSERT INTO memory_meta (key, value) VALUES ('workspace', ?)"
                conn.execute(insert, (name,))
            elif row[0] != name:
                msg = (
                    f"the memory index {self.path} belongs to the workspace {row[0]}, not {name}: "
                    "open the index of this workspace (MemoryIndex(workspace=...)), or delete "
                    "this one if that workspace is gone (a cache, rebuilt by a re-index)"
                )
                shared = self.path == self.base_dir / INDEX_FILE
                raise (_Claimed if shared and self._chosen else StorageError)(msg)

    def index_all_from_workspace(
        self, workspace: Path, *, progress: Callable[[int, int], None] | None = None
    ) -> IndexStats:
        """Bring the index up to date with a local workspace directory.

        Files whose size and mtime are unchanged are skipped without reading; changed files
        whose content hash is unchanged are not re-indexed; rows of files that no longer exist
        are removed. ``progress(done, total)`` is called after each file.

        Raises:
            StorageError: The index already serves another workspace (two workspaces in one
                parent directory would remove each other's rows).
        """
        root = Path(workspace)
        self._claim_workspace(root)
        real_root = root.resolve()

        def read(path: str) -> str:
            # opened where scan() saw it, following no link: a directory swapped for a link to
            # the host since the scan must not pull a host file into a user's search results
            try:
                data = read_beneath(real_root, real_root / path, limit=read_limit(path))
            except (FileNotFoundError, NotADirectoryError):  # removed since the scan
                return ""
            except OSError as exc:
                logger.warning("not indexed: %s: %s", path, exc.strerror or exc)
                return ""
            return data.decode("utf-8", errors="replace")

        return self.index_files(
            scan(root), read, lambda path: (root / path).is_file(), progress=progress
        )

    def known_files(self) -> dict[str, tuple[int, int]]:
        """Workspace path -> (size, mtime_ns) of every file the index holds."""
        with self._lock:
            return {
                path: (size, mtime)
                for path, size, mtime in self._connection().execute(
                    "SELECT path, size, mtime_ns FROM memory_files"
                )
            }

    def index_files(
        self,
        found: dict[str, tuple[int, int]],
        read: Callable[[str], str],
        still_there: Callable[[str], bool],
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> IndexStats:
        """Bring the index up to date with a listing of the indexable files (any backend).

        ``found`` maps each file to its (size, mtime_ns); ``read`` is called only for files
        whose size or mtime changed; rows of files not in ``found`` are removed unless
        ``still_there`` says they exist after all (written after the listing).
        """
        with self._lock:
            known = {
                path: (size, mtime, sha)
                for path, size, mtime, sha in self._connection().execute(
                    "SELECT path, size, mtime_ns, sha256 FROM memory_files"
                )
            }
        pending: list[Pending] = []
        touched: list[tuple[int, int, str]] = []
        indexed = unchanged = rows = pending_rows = 0
        loading = False  # set once a batch is full: see bulk_load
        with BatchWriter[_Batch](self._load) as writer:
            for done, path in enumerate(sorted(found), start=1):
                size, mtime = found[path]
                old = known.get(path)
                if old is not None and old[0] == size and old[1] == mtime:
                    unchanged += 1
                else:
                    text = read(path)
                    sha = digest(text)
                    if old is not None and old[2] == sha:
                        touched.append((size, mtime, path))
                        unchanged += 1
                    elif (
                        old is not None
                        and (grown := self._grown(path, text, sha, size, mtime)) is not None
                    ):
                        rows += grown
                        indexed += 1
                    else:
                        pending.append((path, rows_for(path, text), sha, len(text), size, mtime))
                        pending_rows += len(pending[-1][1])
                        indexed += 1
                        if pending_rows >= _BATCH_ROWS:  # written while the next is built
                            loading = True
                            writer.submit((pending, self._vectors_of(pending)))
                            pending, pending_rows = [], 0
                if progress is not None:
                    progress(done, len(found))
            if loading:  # the last batch of the load
                writer.submit((pending, self._vectors_of(pending)))
                writer.wait()
                rows += writer.rows
            else:
                rows += self._write(pending)
        gone = [p for p in known if p not in found and not still_there(p)]
        with self.atomic() as conn:
            conn.executemany(
                "UPDATE memory_files SET size = ?, mtime_ns = ? WHERE path = ?", touched
            )
            delete_rows(conn, gone)
            conn.executemany("DELETE FROM memory_files WHERE path = ?", [(p,) for p in gone])
            if loading:  # merge the segments of the load into one
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

    def clear(self) -> None:
        """Drop every row: the next catch-up indexes every file again."""
        with self.atomic() as conn:
            delete_all_rows(conn)

    def rebuild(self, workspace: Path) -> IndexStats:
        """Drop every row and index the workspace again (the recovery path for a bad index)."""
        self.clear()
        return self.index_all_from_workspace(workspace)

    def _grown(
        self, path: str, text: str, sha: str, size: int | None, mtime: int | None
    ) -> int | None:
        """Index a file that only grew, in place; the rows written, None to index it anew.

        See ``append_rows``: a flush appending to today's log rewrites a few rows, not all.
        """
        owner = owner_of(path)
        with self._lock, self._snapshot() as conn:
            tail = append_rows(conn, path, text, sha, owner)
        if tail is None:
            return None
        vectors = None
        if self.embedder is not None:  # before the transaction: the embedder may be slow
            vectors = embed_texts(self.embedder, [row[1] for row in tail[2]])
        with self.atomic() as conn:
            if append_rows(conn, path, text, sha, owner) != tail:  # another writer was faster
                return None
            return write_tail(conn, path, owner, tail, (sha, len(text), size, mtime), vectors)

    def _write(self, files: Sequence[Pending]) -> int:
        """Replace the rows of several files in one transaction; returns the rows written."""
        return self._write_batch((files, self._vectors_of(files)))

    def _vectors_of(self, files: Sequence[Pending]) -> list[bytes] | None:
        """The vectors of the rows of ``files``, None without an embedder.

        Called before the write transaction (the embedder may be slow), and only by the thread
        that indexes: the embedder is never called from two threads at once.
        """
        if self.embedder is None or not files:
            return None
        return embed_texts(self.embedder, [r[1] for _, rows, *_ in files for r in rows])

    def _write_batch(
        self,
        batch: _Batch,
        on_bound: Callable[[], None] | None = None,
        *,
        loading: bool = False,
    ) -> int:
        """Write a batch in one transaction; see ``write_rows`` for ``on_bound``.

        ``loading``: part of a load of many batches, merged once at its end (``bulk_load``).
        """
        files, vectors = batch
        if not files:
            return 0
        owners = [owner_of(f[0]) for f in files]
        with self.atomic() as conn, bulk_load(conn) if loading else contextlib.nullcontext():
            return write_rows(conn, files, owners, vectors, on_bound=on_bound)

    def _load(self, batch: _Batch, on_bound: Callable[[], None]) -> int:
        """Write one batch of a load of many (on the ``BatchWriter``'s thread)."""
        return self._write_batch(batch, on_bound, loading=True)

    def _backfill_vectors(self) -> int:
        """Embed rows without a vector (written without an embedder, or by another one)."""
        total = 0
        while self.embedder is not None:
            with self._lock:
                missing = (
                    self._connection()
                    .execute(
                        "SELECT l.id, l.content FROM memory_lines AS l LEFT JOIN memory_vectors "
                        "AS v ON v.id = l.id WHERE v.id IS NULL LIMIT 1024"
                    )
                    .fetchall()
                )
            if not missing:
                break
            blobs = embed_texts(self.embedder, [content for _, content in missing])
            with self.atomic() as conn:  # a row changed meanwhile keeps waiting for its vector
                before = conn.total_changes
                conn.executemany(
                    "INSERT OR IGNORE INTO memory_vectors (id, vector) SELECT ?, ? WHERE EXISTS "
                    "(SELECT 1 FROM memory_lines WHERE id = ? AND content = ?)",
                    [(i, blob, i, c) for (i, c), blob in zip(missing, blobs, strict=True)],
                )
                added = conn.total_changes - before
            total += added
            if added == 0:
                break
        return total

    # --- searching -------------------------------------------------------------------------

    def search_sql(
        self, query: str, limit: int = 10, *, user_id: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The first statement ``search`` would run for ``query``, with its parameters.

        For inspection and tests. The MATCH expression is always a bound parameter.
        """
        owner = safe_segment(user_id) if user_id else ""
        with self._lock, self._snapshot() as conn:
            statements, _ = plan(conn, terms(conn, query, owner)[0], owner)
        if not statements:
            return _NOTHING_SQL, {}
        sql, expression = statements[0]
        return sql, {"query": expression, "owner": owner, "limit": limit}

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        user_id: str | None = None,
        snippets: bool = True,
        budget: int | None = None,
    ) -> list[SearchHit]:
        """What best answers ``query``, best first; ``[]`` when nothing matches.

        Any text is accepted: operators, quotes and punctuation are treated as plain text.

        Args:
            query: What to look for, as a person would ask it.
            limit: At most this many hits.
            user_id: Search this user's rows; None for those of calls without a user.
            snippets: Return runs of consecutive lines around the best rows (one hit each,
                ``line_number`` to ``last_line``); False for one line per hit.
            budget: The characters all snippets together may hold; by default
                ``SNIPPET_CHARS`` per hit asked for. Ignored with ``snippets=False``.
        """
        if limit <= 0:
            return []
        owner = safe_segment(user_id) if user_id else ""
        embedder = self.embedder if query.strip() else None
        probe = embedder.embed([query[:2000]])[0] if embedder is not None else None
        wanted = max(limit, _CANDIDATES)
        with self._lock, self._snapshot() as conn:
            clauses, labels = terms(conn, query, owner)
            hits = keyword_hits(conn, clauses, owner, wanted)
            hits = favour_speakers(conn, favour_days(conn, query, hits, owner, wanted), labels)
            if embedder is not None and probe is not None:
                matrix = self._vectors.matrix(conn, embedder.dimensions, self._commits)
                semantic = matrix.top(probe, (owner,), wanted)
                hits = fuse(conn, hits, semantic, wanted)
            if asks_for_list(query):
                hits = spread(hits)
            if not snippets:
                return [SearchHit(p, n, text, score, n) for _, p, n, text, score in hits[:limit]]
            chars = SNIPPET_CHARS * limit if budget is None else budget
            found = snippets_of(conn, hits, limit, max(chars, 1))
        return [SearchHit(p, first, text, score, last) for p, first, last, text, score in found]

    # --- async facade ----------------------------------------------------------------------

    @staticmethod
    async def _in_thread(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """The one place the index leaves the event loop: SQLite and file I/O block."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def asearch(
        self,
        query: str,
        limit: int = 10,
        *,
        user_id: str | None = None,
        snippets: bool = True,
        budget: int | None = None,
    ) -> list[SearchHit]:
        """:meth:`search` in a worker thread."""
        return await self._in_thread(
            self.search, query, limit, user_id=user_id, snippets=snippets, budget=budget
        )

    async def aindex_from_string(self, rel_path: str, content: str) -> int:
        """:meth:`index_from_string` in a worker thread."""
        return await self._in_thread(self.index_from_string, rel_path, content)

    async def aindex_all_from_workspace(
        self, workspace: Path, *, progress: Callable[[int, int], None] | None = None
    ) -> IndexStats:
        """:meth:`index_all_from_workspace` in a worker thread."""
        return await self._in_thread(self.index_all_from_workspace, workspace, progress=progress)
