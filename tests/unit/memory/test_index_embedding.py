from __future__ import annotations

import itertools
import re
import sqlite3
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.memory import _search
from harness.memory.embedding import Embedder, SentenceTransformerEmbedder
from harness.memory.index import INDEX_FILE, MemoryIndex

_SYNONYMS = {"automobile": "car", "vehicle": "car", "feline": "cat"}


class BagOfWords:
    """Hashed bag of words; a few synonyms share a bucket, so meaning beats spelling."""

    def __init__(self, dimensions: int = 64, name: str = "bag") -> None:
        self._dimensions = dimensions
        self.name = name
        self.calls = 0

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        vectors = []
        for text in texts:
            vector = [0.0] * self._dimensions
            for word in re.findall(r"\w+", text.lower()):
                word = _SYNONYMS.get(word, word)
                vector[zlib.crc32(word.encode()) % self._dimensions] += 1.0
            vectors.append(vector)
        return vectors


class Broken(BagOfWords):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")


def _vector_count(base: Path) -> int:
    conn = sqlite3.connect(base / INDEX_FILE)
    try:
        return int(conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0])
    finally:
        conn.close()


def test_the_test_embedder_is_an_embedder() -> None:
    assert isinstance(BagOfWords(), Embedder)


def test_vectors_find_a_line_that_shares_no_word_with_the_query(tmp_path: Path) -> None:
    with MemoryIndex(tmp_path, embedder=BagOfWords()) as index:
        index.index_from_string("MEMORY.md", "- Parked the car on level 3.\n- Bought bread.\n")
        assert MemoryIndex(tmp_path / "plain").open().search("automobile", snippets=False) == []
        hits = index.search("automobile", snippets=False)
        assert hits[0].content == "- Parked the car on level 3."
        assert _vector_count(tmp_path) == 2


def test_every_keyword_hit_survives_fusion(tmp_path: Path) -> None:
    similar = [f"- query words alpha beta gamma delta variant {i}" for i in range(30)]
    keyword = ["- zebra", "- a zebra crossing downtown", "- zebra stripes and alpha"]
    with MemoryIndex(tmp_path, embedder=BagOfWords()) as index:
        index.index_from_string("MEMORY.md", "\n".join(similar + keyword) + "\n")
        plain = MemoryIndex(tmp_path / "plain").open()
        plain.index_from_string("MEMORY.md", "\n".join(similar + keyword) + "\n")
        keyword_only = [
            h.content for h in plain.search("zebra alpha beta gamma delta", limit=3, snippets=False)
        ]
        fused = index.search("zebra alpha beta gamma delta", limit=10, snippets=False)
        assert {h.content for h in fused} >= set(keyword_only)
        zebra = [h.content for h in index.search("zebra", limit=10, snippets=False)]
        assert set(keyword) <= set(zebra)
        assert all(a.rank >= b.rank for a, b in itertools.pairwise(fused))


def test_fusion_respects_user_scopes(tmp_path: Path) -> None:
    with MemoryIndex(tmp_path, embedder=BagOfWords()) as index:
        index.index_from_string("users/bob/MEMORY.md", "- bob parked the car\n")
        index.index_from_string("users/alice/MEMORY.md", "- alice parked the car\n")
        index.index_from_string("MEMORY.md", "- shared bread\n")
        paths = {
            h.path for h in index.search("automobile", limit=10, user_id="alice", snippets=False)
        }
        assert paths == {"users/alice/MEMORY.md"}  # not bob's, not the calls' without a user
        shared = index.search("automobile bread", limit=10, snippets=False)
        assert {h.path for h in shared} == {"MEMORY.md"}


def test_rows_written_without_an_embedder_get_vectors_at_the_next_full_index(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "MEMORY.md").write_text("- parked the car\n- bought bread\n")
    with MemoryIndex(tmp_path) as index:
        index.index_all_from_workspace(workspace)
    assert _vector_count(tmp_path) == 0
    with MemoryIndex(tmp_path, embedder=BagOfWords()) as index:
        stats = index.index_all_from_workspace(workspace)
        assert (stats.indexed, stats.embedded) == (0, 2)
        assert _vector_count(tmp_path) == 2
        assert index.search("vehicle", snippets=False)[0].content == "- parked the car"


def test_another_embedder_replaces_the_stored_vectors(tmp_path: Path, workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("- parked the car\n")
    with MemoryIndex(tmp_path, embedder=BagOfWords(32, "small")) as index:
        index.index_all_from_workspace(workspace)
    with MemoryIndex(tmp_path, embedder=BagOfWords(48, "large")) as index:
        assert _vector_count(tmp_path) == 0
        assert index.index_all_from_workspace(workspace).embedded == 1
        assert index.search("automobile", snippets=False)[0].content == "- parked the car"


def test_a_failing_embedder_writes_nothing_and_keeps_the_old_rows(tmp_path: Path) -> None:
    with MemoryIndex(tmp_path, embedder=BagOfWords()) as index:
        index.index_from_string("MEMORY.md", "- old fact about sailing\n")
        index.embedder = Broken()
        with pytest.raises(RuntimeError, match="embedding service down"):
            index.index_from_string("MEMORY.md", "- new fact about chess\n")
        index.embedder = BagOfWords()
        assert [h.content for h in index.search("sailing", snippets=False)] == [
            "- old fact about sailing"
        ]
        assert index.index_from_string("MEMORY.md", "- new fact about chess\n") == 1


def test_a_wrong_vector_size_is_refused(tmp_path: Path) -> None:
    class Liar(BagOfWords):
        @property
        def dimensions(self) -> int:
            return 10

    with MemoryIndex(tmp_path, embedder=Liar()) as index, pytest.raises(ValueError, match="10"):
        index.index_from_string("MEMORY.md", "- text\n")


def test_sentence_transformers_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ConfigError, match=r"pip install -e '.*\[embeddings\]'"):
        SentenceTransformerEmbedder()


def test_numpy_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ConfigError, match=r"pip install -e '.*\[embeddings\]'"):
        MemoryIndex(tmp_path, embedder=BagOfWords())


def test_fusion_weighs_the_keyword_ranking_above_a_vector_only_row(tmp_path: Path) -> None:
    """Reciprocal-rank fusion put the dense ranking's best row above the second keyword hit."""
    with MemoryIndex(tmp_path) as index:
        index.index_from_string("MEMORY.md", "- one\n- two\n- three\n")
        conn = index._connection()
        ids = [row_id for (row_id,) in conn.execute("SELECT id FROM memory_lines ORDER BY id")]
        keyword = [(ids[0], "MEMORY.md", 1, "- one", 10.0), (ids[1], "MEMORY.md", 2, "- two", 5.0)]
        semantic = [(ids[2], 0.9), (ids[0], 0.1)]
        fused = _search.fuse(conn, keyword, semantic, 3)
    assert [hit[0] for hit in fused] == ids  # one, two (keywords), then three (vectors only)
    assert fused[2][3] == "- three"
