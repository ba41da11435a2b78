"""One call at a time per session, across tasks, processes and workers.

A call loads its session, runs, and saves what it ended with. Two calls on one session that
overlap would each save their own version and one would drop the other's turns, so every call
holds the session's lease from before the load until after the last save. A second caller
waits for it (``wait`` seconds, polling with a growing pause) and then gets
:class:`SessionBusy`, never a silent loss.

- :class:`FileLeases` (a workspace on this machine's disk): an ``flock`` on a file per session
  beside the workspace, in ``<parent>/.<workspace name>.leases/``, out of reach of the file
  tools and the sandbox (a model that could delete the lock file could break the exclusion).
  The kernel releases it when the holder dies, so a crashed process never blocks a session.
- :class:`StoreLeases` (a workspace in a shared store such as Redis): a lease record with an
  expiry, taken and renewed by compare-and-set. The holder renews it every ``ttl / 3``; a
  holder that died is replaced once its lease expires (``ttl``, 30 s by default). A holder
  that cannot renew in time (a store stalled for longer than ``ttl``) loses the lease: that is
  logged, and the exclusion is then no longer guaranteed for its call.
- :class:`ProcessLeases` (any other backend): an ``asyncio`` lock, this process only.

:data:`LEASE_HOLDER` names who holds the leases taken in a context. The durable engine's
activity sets it to its turn, so when a worker dies, the worker that takes the turn over takes
over its store lease at once instead of waiting out the ``ttl`` (Temporal has already decided
that the dead attempt is gone).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import errno
import fcntl
import hashlib
import logging
import os
import secrets
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from harness.errors import SessionBusy, StorageError
from harness.kernel.cancelling import cancel_and_wait

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace import WorkspaceManager

__all__ = [
    "DEFAULT_SESSION_WAIT",
    "LEASE_HOLDER",
    "FileLeases",
    "ProcessLeases",
    "SessionLeases",
    "StoreLeases",
    "leases_for",
]

logger = logging.getLogger(__name__)

LEASE_HOLDER: Final[contextvars.ContextVar[str | None]] = contextvars.ContextVar(
    "harness_lease_holder", default=None
)
"""Who holds the store leases taken in this context; a lease its holder left (a dead attempt of
the same turn) is taken over at once. None: each hold is a holder of its own."""

DEFAULT_SESSION_WAIT: Final = 300.0
"""How long a call waits for a session another call is using, in seconds."""

_T = TypeVar("_T")

_FIRST_PAUSE: Final = 0.01
_LONGEST_PAUSE: Final = 0.25


class SessionLeases(Protocol):
    """Grants one holder per session at a time."""

    def hold(self, key: str, *, wait: float) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the session ``key`` for the block; :class:`SessionBusy` after ``wait`` s."""
        ...


class FileLeases:
    """Leases as ``flock`` on one file per session in ``directory``.

    A lock file is opened (and made) on a worker thread the first time; when its holder lets
    go, the descriptor is unlocked and kept, owned by nobody, for the session's next call, which
    then takes the lock on the event loop: ``flock`` with ``LOCK_NB`` is one system call that
    never waits, and no file is opened or looked up. So a session's calls pay no worker-thread
    round trip for their lease after the first. A kept descriptor is owned by one holder at a
    time (two holders sharing one would both get the lock), at most ``keep`` are kept (the
    least recently used is closed), and a process forked from this one opens its own: a child
    sharing its parent's descriptors would share their locks.
    """

    def __init__(self, directory: Path, *, keep: int = 256) -> None:
        self.directory = directory
        self.keep = keep
        self._idle: collections.OrderedDict[Path, int] = collections.OrderedDict()
        self._pid = os.getpid()
        weakref.finalize(self, _close_all, self._idle)  # a dropped FileLeases leaks none

    def close_idle(self) -> None:
        """Close the kept descriptors (none of them holds a lock); a later hold opens anew."""
        _close_all(self._idle)

    @contextlib.asynccontextmanager
    async def hold(self, key: str, *, wait: float) -> AsyncIterator[None]:
        path = self.directory / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.lock"
        fd = await _waiting(key, wait, lambda: self._take(path))
        try:
            yield
        finally:
            self._let_go(path, fd)

    async def _take(self, path: Path) -> int | None:
        if self._pid != os.getpid():  # a forked child: the parent's descriptors are not ours
            _close_all(self._idle)  # its copies: closing them leaves the parent's as they are
            self._pid = os.getpid()
        fd = self._idle.pop(path, None)
        if fd is None:
            return await _flock_off_the_loop(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                return await _flock_off_the_loop(path)
            self._idle[path] = fd  # another process holds the session: try again later
            return None
        return fd

    def _let_go(self, path: Path, fd: int) -> None:
        if path in self._idle or self._pid != os.getpid():
            os.close(fd)  # closing releases the lock
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            os.close(fd)
            return
        self._idle[path] = fd
        while len(self._idle) > self.keep:
            os.close(self._idle.popitem(last=False)[1])


def _close_all(idle: collections.OrderedDict[Path, int]) -> None:
    while idle:
        os.close(idle.popitem()[1])


class StoreLeases:
    """Leases as records with an expiry in a shared store, taken by compare-and-set."""

    def __init__(
        self,
        store: BaseStore,
        *,
        ttl: float = 30.0,
        namespace: tuple[str, ...] = ("coordination", "sessions"),
    ) -> None:
        if ttl <= 0:
            msg = f"a session lease needs a positive ttl, got {ttl}"
            raise ValueError(msg)
        self.store = store
        self.ttl = ttl
        self.namespace = namespace

    @contextlib.asynccontextmanager
    async def hold(self, key: str, *, wait: float) -> AsyncIterator[None]:
        holder = LEASE_HOLDER.get() or secrets.token_hex(8)
        version = await _waiting(key, wait, lambda: self._try_take(key, holder))
        held = [version]  # the version of the record this holder wrote last
        renewing = asyncio.create_task(self._renew(key, holder, held))
        try:
            yield
        finally:
            try:
                await cancel_and_wait(renewing)
            finally:
                await self._give_back(key, held[0])

    async def _try_take(self, key: str, holder: str) -> int | None:
        item = await self.store.get(self.namespace, key)
        held_by = item.value.get("holder") if item is not None else None
        if (
            item is not None
            and held_by
            and held_by != holder
            and item.value["expires"] > time.time()
        ):
            return None
        value = {"holder": holder, "expires": time.time() + self.ttl}
        return await self.store.put_if_version(
            self.namespace, key, value, item.version if item is not None else None
        )

    async def _renew(self, key: str, holder: str, held: list[int]) -> None:
        """Renew the lease every ``ttl / 3`` until cancelled, keeping ``held`` current."""
        while True:
            await asyncio.sleep(self.ttl / 3)
            value = {"holder": holder, "expires": time.time() + self.ttl}
            try:
                renewed = await self.store.put_if_version(self.namespace, key, value, held[0])
            except StorageError as exc:  # a stall: try again, the lease has time left
                logger.warning("could not renew the lease of session %s: %s", key, exc)
                continue
            if renewed is None:
                logger.error(
                    "lost the lease of session %s (the store did not answer for %.0f s); "
                    "another caller may be using the session",
                    key,
                    self.ttl,
                )
                return
            held[0] = renewed

    async def _give_back(self, key: str, version: int) -> None:
        try:
            await self.store.put_if_version(
                self.namespace, key, {"holder": "", "expires": 0.0}, version
            )
        except StorageError as exc:  # it expires by itself
            logger.warning("could not release the lease of session %s: %s", key, exc)


class ProcessLeases:
    """Leases as ``asyncio`` locks: one holder per session in this process only."""

    def __init__(self) -> None:
        self._held: set[str] = set()

    @contextlib.asynccontextmanager
    async def hold(self, key: str, *, wait: float) -> AsyncIterator[None]:
        async def take() -> bool | None:
            if key in self._held:
                return None
            self._held.add(key)
            return True

        await _waiting(key, wait, take)
        try:
            yield
        finally:
            self._held.discard(key)


def leases_for(workspace: WorkspaceManager, store: BaseStore | None = None) -> SessionLeases:
    """The leases that exclude every caller who can reach this workspace's sessions."""
    where = workspace.out_of_reach("leases", store)
    if where is None:
        return ProcessLeases()
    return FileLeases(where) if isinstance(where, Path) else StoreLeases(where)


async def _waiting(key: str, wait: float, attempt: Callable[[], Awaitable[_T | None]]) -> _T:
    """Run ``attempt`` until it returns something, pausing longer each time, for ``wait`` s."""
    deadline = time.monotonic() + wait
    pause = _FIRST_PAUSE
    while (got := await attempt()) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            msg = (
                f"session {key} is in use by another call and stayed busy for {wait:g} s; "
                "try again later, or use another session"
            )
            raise SessionBusy(msg)
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)
    return got


async def _flock_off_the_loop(path: Path) -> int | None:
    """:func:`_try_flock` in a worker thread, never leaving a lock behind.

    A lock the thread takes after its caller was cancelled is let go at once; kept, it would
    hold the session for as long as this process lives.
    """
    attempt = asyncio.get_running_loop().run_in_executor(None, _try_flock, path)
    try:
        return await asyncio.shield(attempt)
    except asyncio.CancelledError:
        attempt.add_done_callback(_close_taken)
        raise


def _close_taken(attempt: asyncio.Future[int | None]) -> None:
    if not attempt.cancelled() and attempt.exception() is None:
        fd = attempt.result()
        if fd is not None:
            os.close(fd)


def _try_flock(path: Path) -> int | None:
    """An open descriptor of ``path`` holding its exclusive ``flock``; None when it is taken."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        msg = f"cannot create the session lock {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        msg = f"cannot lock the session lock {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    return fd
