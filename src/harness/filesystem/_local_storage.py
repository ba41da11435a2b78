"""The storage operations of the local backend: ``get``, ``put``, ``append`` and ``sync``.

What the harness's own files need (:class:`~harness.filesystem.base.Storage`); the rest of that
contract (``entries``, ``remove``, ``rename``) comes from the tool operations
(:class:`~harness.filesystem.base.AbstractFilesystem`). Each operation is one hop to the default
executor, with the path resolved and checked there (:mod:`._local_paths`; a path whose
directories held no link keeps its resolution, and every use still walks to it following no
link: ``LocalPaths._storage_target``). ``put`` and
``append`` take the file's sidecar lock, so ``put(if_version=...)`` is a real compare-and-set
against every writer of this workspace, threads and processes alike, and an append never lands
on a file that a concurrent ``put`` is replacing. A file's version is the SHA-256 of its content
(hex), so it is the same for every process and survives restarts.

They raise: :class:`~harness.errors.PathOutsideWorkspace` for a path that escapes,
:class:`~harness.errors.UnusableFile` for a directory, a FIFO or a file over the limit, and
:class:`~harness.errors.StorageError` when the disk fails.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from harness.context import RuntimeContext
from harness.errors import StorageError, UnusableFile
from harness.filesystem._beneath import (
    HeldFile,
    Made,
    NotAFile,
    TooLarge,
    append,
    replace,
    sync,
    sync_up,
)
from harness.filesystem._local_paths import (
    LocalPaths,
    Target,
    checked_read,
    checked_stat,
    held_directory,
    is_directory,
    locked_file,
)
from harness.filesystem._semantics import shown_path, too_large_message
from harness.filesystem.base import MISSING, Appender, Storage, Version, sibling

__all__ = ["LocalStorage"]

_R = TypeVar("_R")


class LocalStorage(LocalPaths, Storage):
    """``get``, ``put`` and ``append`` on a workspace directory (see the module doc)."""

    max_storage_bytes: int

    async def get(
        self, path: str, ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> tuple[bytes, Version] | None:
        """A whole file and its version (SHA-256 hex); None when it does not exist.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            UnusableFile: The path is a directory, a FIFO or the like, or the file holds more
                than ``limit`` (or ``max_storage_bytes``) bytes.
            StorageError: The file cannot be read.
        """
        cap = self.max_storage_bytes if limit is None else min(limit, self.max_storage_bytes)
        return await asyncio.to_thread(
            _storage, path, lambda: self._retry_fresh(path, ctx, lambda t: self._get(t, path, cap))
        )

    async def get_many(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> list[tuple[bytes, Version] | None]:
        """:meth:`get` of each path, all in one worker-thread hop (:meth:`Storage.get_many`)."""
        cap = self.max_storage_bytes if limit is None else min(limit, self.max_storage_bytes)

        def read(path: str) -> tuple[bytes, Version] | None:
            return _storage(
                path, lambda: self._retry_fresh(path, ctx, lambda t: self._get(t, path, cap))
            )

        return await asyncio.to_thread(lambda: [read(path) for path in paths])

    def _get(self, target: Target, path: str, limit: int) -> tuple[bytes, Version] | None:
        data = _storage_read(target, path, limit)
        return None if data is None else (data, _version(data))

    async def put(
        self,
        path: str,
        data: bytes,
        ctx: RuntimeContext | None = None,
        *,
        if_version: Version | None = None,
    ) -> Version | None:
        """Replace a file atomically (creating directories); returns its new version.

        With ``if_version`` the check and the write happen under the file's lock, so of two
        writers that read the same version exactly one wins; the other gets None.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            StorageError: The file cannot be written.
        """
        blob = bytes(data)
        return await asyncio.to_thread(
            _storage,
            path,
            lambda: self._retry_fresh(path, ctx, lambda t: self._put(t, path, blob, if_version)),
        )

    def _put(
        self, target: Target, path: str, data: bytes, if_version: Version | None
    ) -> Version | None:
        _storage_check_file(target, path)
        name = target.path.name
        made = Made()
        with locked_file(target, path, made=made) as directory:
            if if_version is not None:
                current = _storage_read(target, path, self.max_storage_bytes)
                if (MISSING if current is None else _version(current)) != if_version:
                    return None
            replace(directory, name, data, above=made.levels)
        return _version(data)

    async def append(self, path: str, data: bytes, ctx: RuntimeContext | None = None) -> None:
        """Append one whole record (creating the file); concurrent appenders lose nothing.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            StorageError: The file cannot be written.
        """
        blob = bytes(data)
        await asyncio.to_thread(
            _storage,
            path,
            lambda: self._retry_fresh(path, ctx, lambda t: self._append(t, path, blob)),
        )

    def _append(self, target: Target, path: str, data: bytes) -> None:
        if not target.rel:
            _storage_check_file(target, path)
        name = target.path.name  # a directory there fails the append itself (EISDIR)
        with locked_file(target, path) as directory:  # also excludes a put replacing the file
            append(directory, name, data)

    def appender(self, path: str, ctx: RuntimeContext | None = None) -> Appender:
        """An appender that keeps the file open between appends (:class:`_HeldAppender`)."""
        return _HeldAppender(self, path, ctx)

    def _hold(self, target: Target, path: str) -> HeldFile:
        if not target.rel:
            _storage_check_file(target, path)
        made = Made()
        with held_directory(target, target.path.parent, path, create=True, made=made) as directory:
            return HeldFile(directory, target.path.name, made=made.levels)

    async def sync(self, path: str, ctx: RuntimeContext | None = None) -> None:
        """``fsync`` the file, so its appends survive a power loss (:meth:`Storage.sync`).

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            StorageError: The file cannot be synced.
        """
        await asyncio.to_thread(
            _storage, path, lambda: self._retry_fresh(path, ctx, lambda t: self._sync(t, path))
        )

    def _sync(self, target: Target, path: str) -> None:
        if not target.rel:
            return
        try:
            with held_directory(target, target.path.parent, path) as directory:
                sync(directory, target.path.name)
                # Which of the file and the directories on its way an append made is not known
                # here (appends do not wait for the disk): every directory up to the root's
                # parent is synced. An appender (a call's session) knows, and syncs once.
                sync_up(directory, len(target.path.parent.relative_to(target.root).parts) + 1)
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing written, nothing to sync


_REOPENS = 3
"""How often one append opens the file afresh when it keeps being replaced under it."""


class _HeldAppender(Appender):
    """Appends to a file held open, so each append is one write, not a walk from the root.

    The first append walks to the file as :meth:`LocalStorage.append` does (following no
    link, confined to the namespace) and keeps the descriptors; the file is then used where
    that walk found it, so nothing swapped into its path later can redirect a write. Each
    append takes the sidecar lock (a concurrent ``put`` cannot be replacing the file) and
    checks that the path still names the held file; a file replaced meanwhile (a rewrite of
    the session) is opened afresh, through the walk again. :meth:`aclose` closes the
    descriptors on a worker thread without waiting for it.
    """

    def __init__(self, storage: LocalStorage, path: str, ctx: RuntimeContext | None) -> None:
        super().__init__(storage, path, ctx)
        self._local = storage
        self._held: HeldFile | None = None

    async def append(self, data: bytes) -> None:
        blob = bytes(data)
        await asyncio.to_thread(_storage, self.path, lambda: self._append(blob))

    def _append(self, data: bytes) -> None:
        for _ in range(_REOPENS):
            held = self._held
            if held is None:
                held = self._held = self._local._retry_fresh(
                    self.path, self.ctx, lambda target: self._local._hold(target, self.path)
                )
            if held.append(data):
                return
            self._held = None
            held.close()
        msg = f"cannot append to {shown_path(self.path)}: it was replaced at every attempt"
        raise StorageError(msg)

    async def sync(self) -> None:
        held = self._held
        if held is None:
            await super().sync()
        else:
            await asyncio.to_thread(_storage, self.path, held.sync)

    async def write(
        self,
        data: bytes = b"",
        *,
        replace: Mapping[str, bytes] | None = None,
        sync: bool = True,
        release: bool = False,
        sync_append: bool = False,
    ) -> None:
        """:meth:`Appender.write` in one worker-thread hop: append, replacements, sync.

        The files beside the held one are replaced through the directory the held file was
        reached by (no second walk from the root), each under its sidecar lock, as
        :meth:`LocalStorage.put` replaces it.
        """
        blob = bytes(data)
        names = {name: bytes(value) for name, value in (replace or {}).items()}
        for name in names:
            sibling(self.path, name)  # a plain name, or ValueError before anything is written
        try:
            await asyncio.to_thread(
                _storage,
                self.path,
                lambda: self._write(
                    blob, names, sync=sync, release=release, sync_append=sync_append
                ),
            )
        except BaseException:
            if release:
                await self.aclose()
            raise

    def _write(
        self,
        data: bytes,
        names: Mapping[str, bytes],
        *,
        sync: bool,
        release: bool,
        sync_append: bool,
    ) -> None:
        if data:
            self._append(data)
        if names:
            held = self._held
            if held is None:
                held = self._held = self._local._retry_fresh(
                    self.path, self.ctx, lambda target: self._local._hold(target, self.path)
                )
            for name, blob in names.items():
                held.replace(name, blob, sync=sync)
            if held.name in names:  # its own file was replaced: the next append opens the new one
                self._held = None
                held.close()
        if sync_append:
            if self._held is not None:
                self._held.sync()
            else:  # its own file was just replaced (and synced): sync the new one by its path
                self._local._retry_fresh(
                    self.path, self.ctx, lambda target: self._local._sync(target, self.path)
                )
        if release and self._held is not None:  # closed here, not in a second hop
            held, self._held = self._held, None
            held.close()

    async def aclose(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        try:
            asyncio.get_running_loop().run_in_executor(None, held.close)
        except RuntimeError:  # the executor is shut down: close here (no I/O waits on it)
            held.close()


def _storage(path: str, operation: Callable[[], _R]) -> _R:
    """Run a storage operation; a file-system error becomes a :class:`StorageError`.

    One that says what is at the path cannot be used (a directory, a FIFO, a lock file that
    is not a file) is an :class:`UnusableFile`: the storage works, that file does not.
    """
    try:
        return operation()
    except (NotAFile, IsADirectoryError) as exc:
        msg = f"cannot use {shown_path(path)}: {exc.strerror or exc}"
        raise UnusableFile(msg) from exc
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # opening a FIFO that nobody reads, to write
            msg = f"cannot use {shown_path(path)}: it is not a regular file (a FIFO)"
            raise UnusableFile(msg) from exc
        msg = f"cannot access {shown_path(path)}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def _version(data: bytes) -> Version:
    return hashlib.sha256(data).hexdigest()


def _storage_read(target: Target, shown: str, limit: int) -> bytes | None:
    try:
        return checked_read(target, shown, limit)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError as exc:
        msg = f"cannot read {shown!r}: it is a directory, not a file"
        raise UnusableFile(msg) from exc
    except NotAFile as exc:
        msg = f"cannot read {shown!r}: it {exc.strerror}"
        raise UnusableFile(msg) from exc
    except TooLarge as exc:
        raise UnusableFile(too_large_message(shown, exc.size, exc.limit)) from exc
    except OSError as exc:
        msg = f"cannot read {shown!r}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def _storage_check_file(target: Target, shown: str) -> None:
    if not target.rel or is_directory(checked_stat(target, target.path, shown)):
        msg = f"cannot write {shown!r}: it is a directory, not a file"
        raise UnusableFile(msg)
