"""Where the command line prints: one console for results, one for messages and errors."""

from __future__ import annotations

import logging
import sys

from rich.console import Console

__all__ = ["err", "out", "setup_logging"]

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


def setup_logging(verbose: bool) -> None:
    """Warnings always reach stderr; ``--verbose`` adds the agent trace and other INFO lines.

    Log records are written as plain lines (not wrapped to the terminal), one per event, so the
    trace can be read by a person and by ``grep`` alike.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("harness")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    root.propagate = False
    # The trace logs a failed call as a WARNING; without --verbose that would repeat, as a
    # multi-line log record, the one "error:" line the command prints for the same failure.
    logging.getLogger("harness.trace").setLevel(logging.NOTSET if verbose else logging.ERROR)
