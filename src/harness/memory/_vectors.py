"""Line vectors: stored as unit-length float32 blobs, searched exactly over an in-memory matrix.

Similarity is the dot product of unit vectors (cosine). The matrix is loaded once from
``memory_vectors`` and reloaded only when the database changed, so a search costs one
matrix-vector product: about a millisecond per 10,000 lines of 384 dimensions. It is an exact
scan (no approximate index that could silently miss rows); past a few hundred thousand lines
an approximate index would be the next step.
"""

from __future__ import annotations

import math
import sqlite3
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.memory.embedding import Embedder, import_optional

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["VectorCache", "VectorMatrix", "embed_texts", "pack"]

_EMBED_BATCH = 256


def pack(vector: Sequence[float], dimensions: int) -> bytes:
    """A vector as a unit-length float32 blob.

    Raises:
        ValueError: The vector has the wrong length or is not finite.
    """
    if len(vector) != dimensions:
        msg = f"the embedder returned a vector of {len(vector)} numbers, expected {dimensions}"
        raise ValueError(msg)
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not math.isfinite(norm):
        msg = "the embedder returned a vector with a non-finite number"
        raise ValueError(msg)
    scale = 1.0 / norm if norm > 0 else 0.0
    return array("f", [x * scale for x in vector]).tobytes()


class VectorMatrix:
    """Every stored vector with its row id and owner, as one numpy matrix."""

    def __init__(
        self, ids: Sequence[int], owners: Sequence[str], blobs: Sequence[bytes], dimensions: int
    ) -> None:
        numpy = import_optional("numpy")
        self._np = numpy
        self.ids: npt.NDArray[np.int64] = numpy.asarray(ids, dtype=numpy.int64)
        codes = {owner: code for code, owner in enumerate(dict.fromkeys(owners))}
        self._codes = codes
        self._owner_codes: npt.NDArray[np.int32] = numpy.asarray(
            [codes[o] for o in owners], dtype=numpy.int32
        )
        data = numpy.frombuffer(b"".join(blobs), dtype=numpy.float32)
        self._matrix: npt.NDArray[np.float32] = data.reshape(len(ids), dimensions)

    def top(self, query: Sequence[float], owners: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The ``k`` most similar rows among those owned by ``owners``: (row id, cosine)."""
        numpy = self._np
        allowed = [self._codes[o] for o in owners if o in self._codes]
        if not allowed or k <= 0 or len(self.ids) == 0:
            return []
        probe = numpy.asarray(query, dtype=numpy.float32)
        norm = float(numpy.linalg.norm(probe))
        if not math.isfinite(norm) or norm == 0.0:
            return []
        scores = self._matrix @ (probe / norm)
        mask = numpy.isin(self._owner_codes, allowed)
        scores = numpy.where(mask, scores, -numpy.inf)
        count = min(k, int(mask.sum()))
        if count == 0:
            return []
        best = numpy.argpartition(-scores, count - 1)[:count]
        best = best[numpy.argsort(-scores[best], kind="stable")]
        return [(int(self.ids[i]), float(scores[i])) for i in best]


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> list[bytes]:
    """Packed vectors for ``texts``, in batches; computed before any write transaction starts.

    Raises:
        ValueError: The embedder returned the wrong number or size of vectors.
    """
    blobs: list[bytes] = []
    for start in range(0, len(texts), _EMBED_BATCH):
        batch = texts[start : start + _EMBED_BATCH]
        vectors = embedder.embed(batch)
        if len(vectors) != len(batch):
            msg = f"the embedder returned {len(vectors)} vectors for {len(batch)} texts"
            raise ValueError(msg)
        blobs.extend(pack(v, embedder.dimensions) for v in vectors)
    return blobs


class VectorCache:
    """The matrix of one connection, reloaded only when the database changed.

    ``PRAGMA data_version`` changes when another connection commits; the caller's own commit
    count covers this connection's writes.
    """

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._matrix: VectorMatrix | None = None

    def matrix(self, conn: sqlite3.Connection, dimensions: int, commits: int) -> VectorMatrix:
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        key = (int(version), commits)
        if self._matrix is None or self._key != key:
            rows = conn.execute(
                "SELECT v.id, l.owner, v.vector FROM memory_vectors AS v "
                "JOIN memory_lines AS l ON l.id = v.id"
            ).fetchall()
            self._matrix = VectorMatrix(
                [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], dimensions
            )
            self._key = key
        return self._matrix
