"""A full index of many batches: each written on a thread of its own while the next is built.

Shrinking ``_BATCH_ROWS`` makes a workspace of a few small files a load of many batches. What
must hold: the batches overlap with building the next, a failure on either side stops the load
with the batches before it committed and no thread left behind, and the embedder and the
in-place update of a grown file stay on the indexing thread.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

import harness.memory.index as module
from harness.memory._fts import rows_for as real_rows_for
from harness.memory._fts import write_rows as real_write_rows
from harness.memory.index import MemoryIndex

_THREAD = "harness-memory-index"
_USUAL = {"hashsize": 1 << 20, "automerge": 4, "crisismerge": 16}


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryIndex]:
    monkeypatch.setattr(module, "_BATCH_ROWS", 20)  # three 8-line files make a batch
    with MemoryIndex(tmp_path / "index") as opened:
        yield opened


def _days(workspace: Path, count: int, word: str = "topic") -> None:
    for day in range(1, count + 1):
        lines = "".join(f"- note {day} {n} about {word}{day * 100 + n}\n" for n in range(8))
        path = workspace / f"memory/2026-03-{day:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(lines, encoding="utf-8")


def _no_writer_thread() -> bool:
    return not any(t.name.startswith(_THREAD) for t in threading.enumerate())


def _found(index: MemoryIndex, word: str) -> bool:
    return bool(index.search(word, snippets=False))


def _merge_setting(index: MemoryIndex) -> dict[str, int]:
    rows = index._connection().execute("SELECT k, v FROM memory_lines_fts_config").fetchall()
    return {k: v for k, v in rows if k in ("automerge", "crisismerge", "hashsize")}


def test_a_load_of_many_batches_is_whole_and_leaves_the_usual_merge_setting(
    index: MemoryIndex, workspace: Path
) -> None:
    _days(workspace, 10)
    stats = index.index_all_from_workspace(workspace)
    assert stats.rows == 80
    conn = index._connection()
    conn.execute(
        "INSERT INTO memory_lines_fts (memory_lines_fts, rank) VALUES ('integrity-check', 1)"
    )
    assert _merge_setting(index) == _USUAL
    for word in ("topic105", "topic507", "topic1003"):
        assert [h.content for h in index.search(word, snippets=False)] == [
            f"- note {int(word[5:]) // 100} {int(word[5:]) % 100} about {word}"
        ]


def test_the_next_batch_is_built_while_one_is_written(
    index: MemoryIndex, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _days(workspace, 9)  # three batches
    built: list[str] = []
    next_built = threading.Event()
    overlapped: list[bool] = []

    def rows_for(path: str, text: str, **kwargs: object) -> object:
        built.append(path)
        if len(built) == 4:  # the first file of the second batch
            next_built.set()
        return real_rows_for(path, text)

    def write_rows(*args: object, on_bound: Callable[[], None], **kwargs: object) -> int:
        def bound() -> None:
            on_bound()
            if not overlapped:  # the first batch waits here for the second to be built
                overlapped.append(next_built.wait(timeout=10))

        return real_write_rows(*args, on_bound=bound, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "rows_for", rows_for)
    monkeypatch.setattr(module, "write_rows", write_rows)
    stats = index.index_all_from_workspace(workspace)
    assert overlapped == [True]
    assert stats.rows == 72
    assert all(_found(index, f"topic{day * 100 + 7}") for day in range(1, 10))
    assert _no_writer_thread()


def test_a_batch_that_fails_stops_the_load_at_the_next_hand_off(
    index: MemoryIndex, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _days(workspace, 12)  # four batches
    calls = 0

    def failing(*args: object, **kwargs: object) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return real_write_rows(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "write_rows", failing)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        index.index_all_from_workspace(workspace)
    assert calls == 2  # nothing written after the failed batch
    assert _merge_setting(index) == _USUAL
    assert _found(index, "topic301")
    assert not _found(index, "topic401")
    assert _no_writer_thread()
    monkeypatch.setattr(module, "write_rows", real_write_rows)
    assert index.index_all_from_workspace(workspace).rows == 96 - 24


def test_a_failure_while_building_waits_for_the_batch_being_written(
    index: MemoryIndex, workspace: Path
) -> None:
    _days(workspace, 9)

    def progress(done: int, total: int) -> None:
        if done == 5:  # the first batch was handed off at file 3
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        index.index_all_from_workspace(workspace, progress=progress)
    assert _no_writer_thread()
    assert _found(index, "topic301")  # the batch being written was committed, not cut
    assert not _found(index, "topic401")
    assert index.index_all_from_workspace(workspace).indexed == 6


class _ThreadRecordingEmbedder:
    name = "length"
    dimensions = 2

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        return [[float(len(text)), 1.0] for text in texts]


def test_the_embedder_is_called_on_the_indexing_thread_only(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "_BATCH_ROWS", 20)
    _days(workspace, 9)
    embedder = _ThreadRecordingEmbedder()
    with MemoryIndex(tmp_path / "index", embedder=embedder) as index:
        stats = index.index_all_from_workspace(workspace)
        (vectors,) = index._connection().execute("SELECT count(*) FROM memory_vectors").fetchone()
    assert embedder.threads == {threading.get_ident()}
    assert (stats.rows, stats.embedded, vectors) == (72, 0, 72)


def test_a_grown_file_is_updated_in_place_while_a_batch_is_written(
    index: MemoryIndex, workspace: Path
) -> None:
    last = workspace / "memory/2026-03-31.md"  # sorted after the days of the load
    last.parent.mkdir(parents=True)
    last.write_text("".join(f"- old note {n} about kept{n}\n" for n in range(8)), "utf-8")
    index.index_all_from_workspace(workspace)
    where = "SELECT first_id FROM memory_files WHERE path = 'memory/2026-03-31.md'"
    (first_id,) = index._connection().execute(where).fetchone()
    _days(workspace, 12)  # four batches, the last one written as the grown file is read
    last.write_text(last.read_text("utf-8") + "- a new note about zebras\n", "utf-8")
    stats = index.index_all_from_workspace(workspace)
    assert stats.indexed == 13
    assert index._connection().execute(where).fetchone() == (first_id,)  # in place
    assert all(_found(index, word) for word in ("zebras", "kept0", "topic1207"))
    assert _no_writer_thread()
