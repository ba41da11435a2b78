"""Optional embeddings for memory search: the :class:`Embedder` protocol and one real backend.

Keyword search needs nothing beyond SQLite. An embedder adds a second, semantic ranking that
:class:`~harness.memory.index.MemoryIndex` fuses with the keyword ranking by reciprocal rank
fusion, so a line can be found by meaning as well as by its words, and a keyword hit is never
thrown away for a low similarity score.

Any object with ``dimensions`` and ``embed`` is an embedder; tests use small deterministic ones.
:class:`SentenceTransformerEmbedder` runs a ``sentence-transformers`` model in-process and needs
the ``embeddings`` extra (``pip install -e '.[embeddings]'`` in the Harness checkout).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

from harness.errors import ConfigError, install_hint

__all__ = ["DEFAULT_MODEL", "INSTALL_HINT", "Embedder", "SentenceTransformerEmbedder"]

DEFAULT_MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2"
"""A small (384-dimension) general-purpose English model."""

INSTALL_HINT: Final = install_hint("embeddings")
"""How to get the optional embedding dependencies."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-size vectors; the index stores one per line."""

    @property
    def dimensions(self) -> int:
        """The length of every vector ``embed`` returns."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Called from worker threads, never on the event loop."""
        ...


def import_optional(module: str) -> Any:
    """Import a module of the ``embeddings`` extra, or raise a ConfigError saying how to get it.

    Raises:
        ConfigError: The module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        msg = f"memory embeddings need the {module!r} package; install it with {INSTALL_HINT}"
        raise ConfigError(msg) from exc


class SentenceTransformerEmbedder:
    """An embedder backed by a ``sentence-transformers`` model (loaded once, in-process).

    Args:
        model: A model name or a local directory holding the model.
        device: ``"cpu"``, ``"cuda"``, ...; None lets the library choose.
        batch_size: Texts encoded per forward pass.

    Raises:
        ConfigError: ``sentence-transformers`` is not installed.
    """

    def __init__(
        self, model: str = DEFAULT_MODEL, *, device: str | None = None, batch_size: int = 64
    ) -> None:
        if batch_size < 1:
            msg = f"batch_size must be at least 1, got {batch_size}"
            raise ValueError(msg)
        library = import_optional("sentence_transformers")
        self.model_name = model
        self.batch_size = batch_size
        self._model = library.SentenceTransformer(model, device=device)
        self._dimensions = int(self._model.get_sentence_embedding_dimension())

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def name(self) -> str:
        """Identifies the model, so an index notices when vectors came from another one."""
        return f"sentence-transformers:{self.model_name}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [[float(x) for x in row] for row in vectors]
