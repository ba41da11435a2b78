"""A full index on two cores: batches written on a thread of their own while the next is built.

Building a batch's rows is Python and holds the GIL. Writing it is mostly SQLite tokenizing the
rows for FTS5 inside a few long statements, and the ``sqlite3`` module releases the GIL while a
statement runs, so the two can overlap. What they cannot overlap is the binding of the rows
(``executemany``): it takes the GIL back for every row, and a thread that does so while another
runs Python waits a switch interval (5 ms) each time, a 50,000-row batch then taking minutes. So
the builder waits while the writer binds, and goes on once the writer calls ``on_bound``.

One batch is written at a time, in order, and at most one more is being built: memory holds two
batches. A batch that fails stops the load at the next hand-off or at :meth:`BatchWriter.wait`,
the batches before it committed (each is its own transaction).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["BatchWriter"]

_B = TypeVar("_B")

Write = Callable[[_B, Callable[[], None]], int]
"""Writes one batch, calling its second argument once its rows are bound; returns rows written."""


class BatchWriter(Generic[_B]):
    """Writes batches with ``write`` on one worker thread, one at a time; use as a context.

    Leaving the block waits for the batch being written (an error leaving it is not masked by
    that batch's own) and stops the thread.
    """

    def __init__(self, write: Write[_B]) -> None:
        self._write = write
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="harness-memory-index"
        )
        self._running: concurrent.futures.Future[int] | None = None
        self.rows = 0
        """Rows written by the batches finished so far."""

    def __enter__(self) -> BatchWriter[_B]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._running is not None:
            concurrent.futures.wait([self._running])
        self._pool.shutdown()

    def submit(self, batch: _B) -> None:
        """Write ``batch`` once the one before it is written; return once its rows are bound.

        Raises:
            Exception: Whatever writing the batch before it raised.
        """
        self.wait()
        bound = threading.Event()

        def write() -> int:
            try:
                return self._write(batch, bound.set)
            finally:
                bound.set()

        self._running = self._pool.submit(write)
        bound.wait()

    def wait(self) -> None:
        """Wait for the batch being written, if any.

        Raises:
            Exception: Whatever writing it raised.
        """
        running, self._running = self._running, None
        if running is not None:
            self.rows += running.result()
