"""Syntax highlighting of a reply's code blocks for the web page, by Pygments on the server.

Why on the server: the page is one file with no build step that loads nothing from another
origin, and a highlighter is a large, well-kept body of grammars that a hand-written one would
not match. Pygments is installed with ``rich`` already; ``POST /v1/highlight`` runs it here and
answers each block as runs of (class, text), which the page turns into spans.

Trust boundary: the code and its language come from a model's reply, untrusted. The language
only picks one of Pygments' own lexers by name (no file, no plugin by path, no guessing over
every lexer); an unknown one is plain text. Lexing runs in a thread, never on the event loop,
at most :data:`AT_ONCE` requests at a time per server, within :data:`MAX_BLOCKS`,
:data:`MAX_BLOCK_BYTES` and :data:`MAX_TOTAL_BYTES` (refused beyond, 413, before any lexing)
and a time budget (:data:`LEX_SECONDS`, checked between tokens: past it, the rest is plain).
The answer is pairs of (one of Pygments' short standard class names such as ``k`` or ``s2``,
or ``""``; a piece of the code): the page sets each piece as text with that class, never as
HTML, and the pieces of a block always join back to its code exactly (else it is one plain run).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from pygments.lexers import find_lexer_class_by_name  # type: ignore[import-untyped]
from pygments.token import STANDARD_TYPES  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

from harness.errors import RequestRefused

__all__ = [
    "AT_ONCE",
    "LEX_SECONDS",
    "MAX_BLOCKS",
    "MAX_BLOCK_BYTES",
    "MAX_LANGUAGE_CHARS",
    "MAX_TOTAL_BYTES",
    "CodeBlock",
    "HighlightRequest",
    "Highlighter",
    "Run",
    "check_limits",
    "highlight",
]

logger = logging.getLogger("harness.serve")

MAX_BLOCKS: Final = 64
"""The most code blocks one request may hold (a long reply's; the page sends more in turns)."""
MAX_BLOCK_BYTES: Final = 65_536
"""The most UTF-8 bytes of one block's code; the page leaves a larger block plain."""
MAX_TOTAL_BYTES: Final = 262_144
"""The most UTF-8 bytes of code in one request, all blocks together."""
MAX_LANGUAGE_CHARS: Final = 64
LEX_SECONDS: Final = 2.0
"""A request's time for lexing; the blocks (or the rest of one) past it stay plain."""
AT_ONCE: Final = 2
"""Requests lexed at a time in one server process: a burst waits instead of taking the threads
every other route offloads to."""

Run = tuple[str, str]
"""A piece of code and its class: Pygments' short standard name (``k``, ``s2``, ``c1``...), or
``""`` for plain text."""

_PLAIN_NAMES: Final = frozenset({"", "text", "plain", "plaintext", "txt", "none"})


class CodeBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str
    language: str | None = Field(default=None, max_length=MAX_LANGUAGE_CHARS)
    """The fence's language (``python``, ``js``, ``bash``); absent or unknown: plain text."""


class HighlightRequest(BaseModel):
    """The body of ``POST /v1/highlight``: a reply's code blocks, in the order shown."""

    model_config = ConfigDict(extra="forbid")
    blocks: list[CodeBlock]


def check_limits(blocks: Sequence[CodeBlock]) -> None:
    """Refuse a request over the limits, before any lexing.

    Raises:
        RequestRefused: 413 ``too_many_blocks``, ``code_block_too_large`` (naming the block)
            or ``code_too_large``.
    """
    if len(blocks) > MAX_BLOCKS:
        msg = f"the request holds {len(blocks):,} code blocks; at most {MAX_BLOCKS} at a time"
        raise RequestRefused(413, "too_many_blocks", msg)
    total = 0
    for index, block in enumerate(blocks):
        size = len(block.code.encode("utf-8", "surrogatepass"))
        if size > MAX_BLOCK_BYTES:
            msg = f"code block {index} is {size:,} bytes; at most {MAX_BLOCK_BYTES:,} each"
            raise RequestRefused(413, "code_block_too_large", msg)
        total += size
    if total > MAX_TOTAL_BYTES:
        msg = f"the code blocks hold {total:,} bytes; at most {MAX_TOTAL_BYTES:,} together"
        raise RequestRefused(413, "code_too_large", msg)


def highlight(code: str, language: str | None, deadline: float | None = None) -> list[Run]:
    """``code`` as runs of (class, text), neighbours of one class merged, no empty text.

    Plain (one run) for no or an unknown language, a lexer that fails, a ``deadline``
    (:func:`time.monotonic`) passed, or pieces that would not join back to ``code`` (Pygments
    turns CR LF into LF, say). Blocking: call it in a thread.
    """
    plain: list[Run] = [("", code)] if code else []
    lexer_class = _lexer_class((language or "").strip().lower())
    if lexer_class is None or not code:
        return plain
    runs: list[Run] = []
    try:
        lexer = lexer_class(stripnl=False, stripall=False, ensurenl=False, tabsize=0)
        for ttype, text in lexer.get_tokens(code):
            if deadline is not None and time.monotonic() > deadline:
                return plain
            if not text:
                continue
            name = _short_name(ttype)
            if runs and runs[-1][0] == name:
                runs[-1] = (name, runs[-1][1] + text)
            else:
                runs.append((name, text))
    except Exception as exc:  # a lexer's bug on odd text: the code stays readable, plain
        logger.debug("the %s lexer failed: %s", lexer_class.__name__, exc)
        return plain
    if "".join(text for _, text in runs) != code:
        return plain
    return runs


class Highlighter:
    """Highlights requests' blocks in threads, :data:`AT_ONCE` requests at a time.

    One per application (its event loop holds the semaphore).
    """

    def __init__(self, at_once: int = AT_ONCE) -> None:
        self._slots = asyncio.Semaphore(at_once)

    async def highlight(self, blocks: Sequence[CodeBlock]) -> list[list[Run]]:
        """Each block's runs (:func:`highlight`), within the limits (:func:`check_limits`)."""
        check_limits(blocks)
        async with self._slots:
            return await asyncio.to_thread(_highlight_all, list(blocks))


def _highlight_all(blocks: list[CodeBlock]) -> list[list[Run]]:
    deadline = time.monotonic() + LEX_SECONDS
    return [highlight(block.code, block.language, deadline) for block in blocks]


@functools.lru_cache(maxsize=256)
def _lexer_class(name: str) -> Any:
    """The class of Pygments' lexer of that alias (``py``, ``python``, ``js``), or None."""
    if name in _PLAIN_NAMES:
        return None
    try:
        return find_lexer_class_by_name(name)
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=1024)
def _short_name(ttype: Any) -> str:
    """The short standard name of a token type, or of its nearest ancestor that has one."""
    while ttype is not None and ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    name: str = STANDARD_TYPES.get(ttype, "")
    return "" if name == "w" else name  # whitespace: plain, so it merges with its neighbours
