"""Where the command line prints: one console for results, one for messages and errors."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any, Final

from rich.console import Console

__all__ = ["PLAIN", "err", "out", "prompt_shown", "setup_logging"]

PLAIN: Final[dict[str, Any]] = {"markup": False, "highlight": False, "soft_wrap": True}
"""How text of anyone's (ids, paths, model output) is printed: as it is, whole, never markup."""

out = Console()
"""Results: replies, tables, JSON."""

err = Console(stderr=True)
"""Progress, tool activity, warnings and errors."""


class _OneLine(logging.Formatter):
    """A record as one line: an exception it carries as its type and message, no traceback.

    The library logs a failure of background work with its traceback (``logger.exception``);
    on the command line that is a screenful of Python for what is one event, such as an index
    file that is not a database.
    """

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info[1] if record.exc_info else None
        plain = logging.makeLogRecord(
            {**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None}
        )
        line = super().format(plain)
        if exc is not None:
            line += f": {type(exc).__name__}: {exc}".replace("\n", " ")
        return line


class _Prompt:
    """The prompt drawn on stderr that waits for a line, if any (see :func:`prompt_shown`)."""

    lock = threading.RLock()
    text: str | None = None
    markup = True


@contextlib.contextmanager
def prompt_shown(prompt: str, *, markup: bool = True) -> Iterator[None]:
    """Draw ``prompt`` on stderr, and keep log lines off it while the block waits for input.

    Background work (the memory flush of the turn just answered, an index catch-up) logs while
    the prompt waits; written as it came, a warning continued the prompt's line and the text
    typed next went after it. Meanwhile a record goes out on a line of its own, below the
    prompt, and the prompt is drawn again under it.
    """
    with _Prompt.lock:
        err.print(prompt, end="", markup=markup, highlight=False)
        _Prompt.text, _Prompt.markup = prompt, markup
    try:
        yield
    finally:
        with _Prompt.lock:
            _Prompt.text = None


class _LogLines(logging.Handler):
    """Writes each record as one line to stderr, below a prompt that waits (never into it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            with _Prompt.lock:
                stream = sys.stderr  # as the consoles do: the stderr of the moment
                prompt = _Prompt.text
                stream.write(("\n" if prompt is not None else "") + line + "\n")
                stream.flush()
                if prompt is not None:
                    err.print(prompt, end="", markup=_Prompt.markup, highlight=False)
        except Exception:
            self.handleError(record)


def setup_logging(verbose: bool) -> None:
    """Warnings always reach stderr; ``--verbose`` adds the agent trace and other INFO lines.

    Log records are written as plain lines (not wrapped to the terminal), one per event, so the
    trace can be read by a person and by ``grep`` alike.
    """
    handler = _LogLines()
    handler.setFormatter(_OneLine("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("harness")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    root.propagate = False
    # The trace logs a failed call as a WARNING; without --verbose that would repeat, as a
    # multi-line log record, the one "error:" line the command prints for the same failure.
    logging.getLogger("harness.trace").setLevel(logging.NOTSET if verbose else logging.ERROR)
