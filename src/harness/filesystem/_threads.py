"""Worker threads for the file tools: a pool of their own, and a lane per namespace.

A file tool's work is chosen by the model (which tree to walk, which file to read), and it
runs on a worker thread, since the event loop never waits for the disk. On the default
executor, which every other blocking step of the harness shares (saving sessions, reading
memory, the index), a few slow calls of one user would queue every other user's work behind
them. So the file tools get their own pool, and one namespace holds at most ``per_namespace``
of its threads at a time; its further calls wait for their lane, off any thread. A call whose
caller gave up (a cancelled turn, a timeout) keeps its lane until its thread has really
finished, so a namespace can never hold more threads than its lane allows.

Every operation that runs here is bounded by itself (reads by size, walks by a deadline:
:mod:`harness.filesystem.local`), so a thread always comes back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Final, TypeVar

__all__ = ["DEFAULT_PER_NAMESPACE", "DEFAULT_WORKERS", "ToolThreads"]

DEFAULT_WORKERS: Final = 8
"""Threads of the file tools' pool."""

DEFAULT_PER_NAMESPACE: Final = 2
"""Threads of that pool one namespace (a user, or the shared root) may hold at once."""

_R = TypeVar("_R")


class ToolThreads:
    """A thread pool whose threads are shared out by namespace."""

    def __init__(
        self, *, workers: int = DEFAULT_WORKERS, per_namespace: int = DEFAULT_PER_NAMESPACE
    ) -> None:
        if workers < 1 or per_namespace < 1:
            msg = f"workers and per_namespace must be at least 1, got {workers}, {per_namespace}"
            raise ValueError(msg)
        self.workers = workers
        self.per_namespace = per_namespace
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # Per event loop, the lanes in use: namespace -> (its semaphore, calls holding or
        # waiting for it). A lane nobody uses is dropped, so they do not pile up over months.
        self._lanes: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, tuple[asyncio.Semaphore, list[int]]]
        ] = weakref.WeakKeyDictionary()

    async def run(self, namespace: str, work: Callable[[], _R]) -> _R:
        """``work()`` on a thread of the pool, in ``namespace``'s lane."""
        loop = asyncio.get_running_loop()
        lanes = self._lanes.setdefault(loop, {})
        semaphore, users = lanes.setdefault(namespace, (asyncio.Semaphore(self.per_namespace), [0]))
        users[0] += 1
        try:
            await semaphore.acquire()
        except BaseException:
            self._leave(lanes, namespace, users)
            raise

        def done(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits on it any more
                loop.call_soon_threadsafe(release)

        def release() -> None:
            semaphore.release()
            self._leave(lanes, namespace, users)

        try:
            future = self._executor().submit(work)
        except BaseException:
            release()
            raise
        future.add_done_callback(done)  # the lane is given back when the thread is done
        return await asyncio.wrap_future(future)

    def _leave(
        self,
        lanes: dict[str, tuple[asyncio.Semaphore, list[int]]],
        namespace: str,
        users: list[int],
    ) -> None:
        users[0] -= 1
        if users[0] == 0:
            lanes.pop(namespace, None)

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.workers, thread_name_prefix="harness-file-tools"
                )
            return self._pool

    def shutdown(self) -> None:
        """Let the pool's threads end once their work is done (a new call starts a new pool)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
