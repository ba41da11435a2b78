"""Reading and writing workspace files, per user, through the workspace's filesystem backend.

:class:`WorkspaceManager` is the one place that turns a workspace path into bytes, and it does
so only through the storage contract, :class:`~harness.filesystem.Storage` (get, put, append,
entries, remove, rename): the local disk by default, or a sandbox, a key-value store shared by
several workers, a composite of them, or any backend that implements just those six methods.
Memory, sessions, transcripts, offloaded tool results and task records all go through it, so
they run unchanged on every backend.

For a call made for a user, reads try the user's namespace (``users/<user>/``) before the shared
file; writes go to the user's namespace. Every path passes the path policy of
:mod:`harness.paths`. Rewrites of shared state are compare-and-set on the backend's
versions (:meth:`WorkspaceManager.replace_text`, :meth:`WorkspaceManager.update_text`), and
appends are whole records, so two workers never lose each other's writes.

:meth:`WorkspaceManager.generation_of` counts, per namespace, the writes made through the
manager to the files a system prompt shows (:data:`PROMPT_FILES`, ``knowledge/`` and the files
registered with :meth:`WorkspaceManager.watch`), so a cache built on reading them (the
workspace context) knows when to look again. Every other write (sessions, transcripts, traces,
state and task records under ``agents/``, the daily logs, offloaded tool results) does not
count, so saving a session at every step, or a call's bookkeeping, does not make the next call
read the prompt's files again. ``generation`` is the total over all namespaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from harness.errors import PathOutsideWorkspace, StorageError, UnusableFile, WorkspaceError
from harness.filesystem._beneath import (
    append,
    directory_beneath,
    locked,
    make_directories,
    remove_stray_temporaries,
    replace,
    sync_directory,
)
from harness.filesystem.base import MISSING, Appender, Storage
from harness.filesystem.local import DEFAULT_MAX_FILE_BYTES, LocalFilesystem
from harness.layout import (
    AGENTS_MD,
    KNOWLEDGE_DIR,
    MEMORY_MD,
    USERS_DIR,
    shared_with_users,
    user_prefix,
)
from harness.paths import normalize, resolve_inside

if TYPE_CHECKING:
    from harness.stores.base import BaseStore

__all__ = [
    "MAX_TEXT_BYTES",
    "PROMPT_FILES",
    "FileInfo",
    "FileText",
    "WorkspaceManager",
    "atomic_write",
    "file_lock",
    "locked_append",
    "scoped",
]

logger = logging.getLogger(__name__)

MAX_TEXT_BYTES: Final = DEFAULT_MAX_FILE_BYTES
"""The most the harness reads of a text file the model can write (memory, prompt files,
declarations): what ``read_file`` would read of it. A bigger one is skipped, with a warning."""

MAX_UNUSABLE_KEPT: Final = 1_000
"""How many skipped files :attr:`WorkspaceManager.unusable` remembers (the newest)."""

MAX_UPDATE_ATTEMPTS: Final = 50
"""Compare-and-set rounds an update tries before it gives up (each lost round means another
writer changed the file in between, so the update is recomputed on the new text)."""


@dataclass(frozen=True, slots=True)
class FileText:
    """A file's text and the workspace path it was actually read from."""

    path: str
    text: str


class WorkspaceManager:
    """Access to one workspace, through its filesystem backend.

    Args:
        root: The local workspace directory (the default backend's root; the memory index
            lives beside it whatever the backend).
        backend: Where the files live; the local directory ``root`` when None. Any
            :class:`~harness.filesystem.Storage`; the model's file tools need an
            :class:`~harness.filesystem.AbstractFilesystem`, which every built-in backend is.
        store: The store several workers share, when the files are elsewhere (a sandbox, say)
            but the state out of the model's reach (leases, ledgers) must be shared
            (:meth:`out_of_reach`); a workspace kept in a store needs none.
    """

    def __init__(
        self, root: str | Path, backend: Storage | None = None, *, store: BaseStore | None = None
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        if backend is None:
            backend = LocalFilesystem(self.root)
        self.backend: Storage = backend
        self.store = store
        self.generation = 0
        """Writes to the files a prompt shows, in every namespace (see :meth:`generation_of`)."""
        self._generations: dict[str, int] = {}
        self._watched: set[str] = set(PROMPT_FILES)
        self.unusable: dict[str, str] = {}
        """Files a read had to skip (a directory where a file belongs, a FIFO, a link leading out
        of its namespace, a file over its limit) and why, until a read finds them usable."""
        # One read-modify-write of a file at a time in this process (see update_text).
        self._updating: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @property
    def is_local(self) -> bool:
        """Whether the files are the local directory ``root`` (so tools like ``rg`` see them)."""
        backend = self.backend
        return isinstance(backend, LocalFilesystem) and Path(backend.root) == self.root

    def out_of_reach(self, kind: str, store: BaseStore | None = None) -> BaseStore | Path | None:
        """Where state the model must not reach, shared by every process, is kept.

        For the session leases and the ledgers (``kind`` names the directory): the store when
        there is one (given here, given to the workspace, or the one the files are in), else
        the directory ``<parent>/.<workspace name>.<kind>`` beside a workspace on this
        machine's disk, which neither the file tools nor the sandbox reach; None when neither
        exists (a backend of another kind: such state is this process's alone).
        """
        from harness.filesystem.remote import RemoteFilesystem  # the store's backend

        store = store or self.store
        if store is None and isinstance(self.backend, RemoteFilesystem):
            store = self.backend.store
        if store is not None:
            return store
        if self.is_local:
            root = self.root.resolve()
            return root.parent / f".{root.name}.{kind}"
        return None

    def local_path(self, path: str) -> Path:
        """The local path of a workspace path (policy-checked)."""
        return resolve_inside(self.root, path)

    def check(self) -> None:
        """Create the workspace directory if needed and make sure it is usable.

        Raises:
            WorkspaceError: The path is not a directory, or cannot be read and written.
        """
        if self.root.exists() and not self.root.is_dir():
            msg = f"workspace {self.root} is not a directory; pass --workspace DIR"
            raise WorkspaceError(msg)
        try:  # named on the disk at once: what is saved in it may be synced
            made = make_directories(self.root, 0o777)
            if made:
                sync_directory(self.root, made)
        except OSError as exc:
            msg = (
                f"cannot create workspace {self.root}: {exc.strerror or exc}; pass --workspace DIR"
            )
            raise WorkspaceError(msg) from exc
        if not os.access(self.root, os.R_OK | os.W_OK | os.X_OK):
            msg = (
                f"workspace {self.root} is not readable and writable by this user; fix permissions"
            )
            raise WorkspaceError(msg)
        if self.is_local:  # what writers killed in the middle of a write left behind
            for path in remove_stray_temporaries(self.root.resolve()):
                logger.info("removed %s, left by a write that did not finish", path)

    @staticmethod
    def candidates(path: str, user_id: str | None, also_shared: Sequence[str] = ()) -> list[str]:
        """The paths a read of ``path`` tries, most specific first.

        A user's read falls back to the shared file only where :func:`shared_with_users`
        allows it; ``also_shared`` names more files the operator shares with every user.
        """
        rel = normalize(path)
        if not user_id:
            return [rel]
        own = user_prefix(user_id) + rel
        return [own, rel] if shared_with_users(rel, also_shared) else [own]

    # -- reads with the shared fallback ---------------------------------------------------

    async def read_first(
        self, paths: Sequence[str], user_id: str | None = None, also_shared: Sequence[str] = ()
    ) -> dict[str, FileText]:
        """Read several files; absent and empty files are left out.

        Each path is looked up in the user's namespace, then shared (see :meth:`candidates`).
        """
        found: dict[str, FileText] = {}
        for path in paths:
            for candidate in self.candidates(path, user_id, also_shared):
                text = await self._text(candidate)
                if text:
                    found[path] = FileText(candidate, text)
                    break
        return found

    async def read_text(self, path: str, user_id: str | None = None) -> str:
        """The text of a workspace file (user's copy first); ``""`` when it exists nowhere."""
        entry = (await self.read_first([path], user_id)).get(path)
        return entry.text if entry else ""

    async def list_files(self, directory: str, user_id: str | None = None) -> list[str]:
        """Workspace-relative paths of files under ``directory`` (user's and shared), sorted.

        A file the user has in their namespace hides the shared file of the same relative path;
        shared files are listed only where :meth:`candidates` lets a user read them.
        """
        rel_dir = normalize(directory)
        seen: dict[str, None] = {}
        for candidate in self.candidates(rel_dir, user_id):
            prefix = candidate[: len(candidate) - len(rel_dir)]
            for entry in await self.backend.entries(candidate, recursive=True):
                name = entry.path
                seen.setdefault(name[len(prefix) :] if name.startswith(prefix) else name, None)
        return sorted(seen)

    # -- one namespace exactly (no fallback to shared files): memory, transcripts, state -------

    async def read_own(
        self, path: str, user_id: str | None = None, *, limit: int | None = MAX_TEXT_BYTES
    ) -> str | None:
        """The text of the file in the user's own namespace; None when it does not exist.

        Also None, with a warning naming the file, when it cannot be used (see
        :meth:`_text`). ``limit``: the most bytes read (None: the backend's cap), for files
        bigger than a memory file can be (transcripts, traces).
        """
        return await self._text(scoped(path, user_id), limit=limit)

    async def get_bytes(
        self, path: str, user_id: str | None = None, *, limit: int | None = None
    ) -> tuple[bytes, str] | None:
        """A file of the user's namespace and its version (for compare-and-set writers).

        Strict, unlike the text reads: a file that cannot be used raises
        (:class:`~harness.errors.UnusableFile`), for a caller that must not mistake it for a
        missing one (a session, which would otherwise start over and be overwritten).
        """
        return await self.backend.get(scoped(path, user_id), limit=limit)

    async def get_many_bytes(
        self, paths: Sequence[str], user_id: str | None = None, *, limit: int | None = None
    ) -> list[tuple[bytes, str] | None]:
        """:meth:`get_bytes` of several files, in one round trip to the backend where it can.

        (:meth:`~harness.filesystem.Storage.get_many`: one worker-thread hop on the local
        disk, for a caller that needs them all before it goes on, as a call restoring its
        session does.)
        """
        return await self.backend.get_many([scoped(p, user_id) for p in paths], limit=limit)

    def unusable_in(self, user_id: str | None) -> dict[str, str]:
        """The files of the user's namespace a read skipped, by namespace path, and why."""
        prefix = user_prefix(user_id)
        found = {}
        for path, why in list(self.unusable.items()):
            if prefix and path.startswith(prefix):
                found[path[len(prefix) :]] = why
            elif not prefix and not path.startswith(f"{USERS_DIR}/"):
                found[path] = why
        return found

    async def put_bytes(
        self, path: str, data: bytes, user_id: str | None = None, *, if_version: str | None = None
    ) -> str | None:
        """Replace a file atomically (only if still at ``if_version``, when given)."""
        try:
            return await self.backend.put(scoped(path, user_id), data, if_version=if_version)
        finally:
            self._wrote(scoped(path, user_id))

    async def write_text(self, path: str, text: str, user_id: str | None = None) -> str:
        """Write a file atomically in the user's namespace; returns the workspace path written."""
        target = scoped(path, user_id)
        try:
            await self.backend.put(target, text.encode("utf-8"))
        finally:
            self._wrote(target)
        return target

    async def append_text(self, path: str, text: str, user_id: str | None = None) -> str:
        """Append ``text`` as one whole record; returns the workspace path written.

        Concurrent appenders, tasks, processes or workers, never interleave or lose a record.
        """
        return await self.append_bytes(path, text.encode("utf-8"), user_id)

    async def append_bytes(self, path: str, data: bytes, user_id: str | None = None) -> str:
        """:meth:`append_text` for bytes."""
        target = scoped(path, user_id)
        try:
            await self.backend.append(target, data)
        finally:
            self._wrote(target)
        return target

    def appender(self, path: str, user_id: str | None = None) -> Appender:
        """An appender for a file of the user's namespace that no prompt shows (a session).

        Raises:
            ValueError: The file is one the prompt shows: its writes must be counted
                (:meth:`append_text`).
        """
        target = scoped(path, user_id)
        if self._shown(target)[1]:
            msg = f"{path!r} is shown in the prompt; append to it with append_text"
            raise ValueError(msg)
        return self.backend.appender(target)

    async def sync(self, path: str, user_id: str | None = None) -> None:
        """Make the file's appends survive a power loss (:meth:`Storage.sync`)."""
        await self.backend.sync(scoped(path, user_id))

    async def replace_text(
        self, path: str, text: str, *, expected: str, user_id: str | None = None
    ) -> bool:
        """Atomically replace a file, but only if it still holds ``expected`` (``""`` = absent).

        This is the no-clobber rule for rewrites: a writer that read the file, worked on it and
        comes back finds out whether somebody changed it meanwhile, and then re-reads and redoes
        its work instead of overwriting the other edit. Returns False on such a conflict.
        """
        target = scoped(path, user_id)
        current = await self.backend.get(target)
        if (_decode(current[0]) if current else "") != expected:
            return False
        version = current[1] if current else MISSING
        replaced = await self.backend.put(target, text.encode("utf-8"), if_version=version)
        if replaced is not None:
            self._wrote(target)
        return replaced is not None

    async def update_text(
        self, path: str, transform: Callable[[str], str], user_id: str | None = None
    ) -> str:
        """Read, transform and atomically rewrite a file; returns the new text.

        A compare-and-set loop: if another writer changed the file in between, ``transform``
        runs again on the new text (so it must be quick and pure), and no edit is lost. Writers
        in this process take turns first, so only other processes' writes cost a retry (50
        sessions of one user ending at once would otherwise retry their shared index hundreds
        of times).

        Raises:
            StorageError: The file kept changing for :data:`MAX_UPDATE_ATTEMPTS` rounds.
        """
        target = scoped(path, user_id)
        lock = self._updating.get(target)
        if lock is None:
            lock = self._updating[target] = asyncio.Lock()
        async with lock:
            return await self._update_text(target, transform)

    async def _update_text(self, target: str, transform: Callable[[str], str]) -> str:
        try:
            for attempt in range(MAX_UPDATE_ATTEMPTS):
                current = await self.backend.get(target)
                text = transform(_decode(current[0]) if current else "")
                version = current[1] if current else MISSING
                if await self.backend.put(target, text.encode("utf-8"), if_version=version):
                    return text
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        finally:
            self._wrote(target)
        msg = f"{target} changed under {MAX_UPDATE_ATTEMPTS} updates in a row; try again"
        raise StorageError(msg)

    async def list_own(self, directory: str, user_id: str | None = None) -> list[FileInfo]:
        """The files directly in ``directory`` of the user's namespace, sorted by name.

        Paths are relative to the namespace (``memory/2026-01-02.md``), as the other methods
        of this group take them.
        """
        rel_dir = normalize(directory)
        infos = []
        for entry in await self.backend.entries(scoped(rel_dir, user_id)):
            if not entry.is_dir:
                name = entry.path.rstrip("/").rsplit("/", 1)[-1]
                rel = f"{rel_dir}/{name}" if rel_dir else name
                infos.append(FileInfo(rel, entry.size, entry.modified_at or 0.0))
        return sorted(infos, key=lambda info: info.path)

    async def list_dirs(self, directory: str, user_id: str | None = None) -> list[str]:
        """The names of the directories directly in ``directory`` of the user's namespace."""
        entries = await self.backend.entries(scoped(directory, user_id))
        return sorted(e.path.rstrip("/").rsplit("/", 1)[-1] for e in entries if e.is_dir)

    async def move(self, source: str, target: str, user_id: str | None = None) -> None:
        """Move a file within the user's namespace, creating the target's directory."""
        try:
            await self.backend.rename(scoped(source, user_id), scoped(target, user_id))
        finally:
            self._wrote(scoped(source, user_id))
            self._wrote(scoped(target, user_id))

    async def delete(self, path: str, user_id: str | None = None) -> None:
        """Delete a file in the user's namespace; a missing file is not an error."""
        try:
            await self.backend.remove(scoped(path, user_id))
        finally:
            self._wrote(scoped(path, user_id))

    def watch(self, *paths: str) -> None:
        """Count writes to ``paths`` too (in every namespace): files a prompt shows."""
        self._watched.update(normalize(path) for path in paths)

    def generation_of(self, user_id: str | None) -> int:
        """How many writes went to the prompt files a read for ``user_id`` may show.

        The user's own namespace and the shared files it falls back to; it changes exactly when
        one of them was written through this manager.
        """
        shared = self._generations.get("", 0)
        if not user_id:
            return shared
        return shared + self._generations.get(user_prefix(user_id), 0)

    def _wrote(self, path: str) -> None:
        """Count a write to a file a prompt shows, in its namespace (module docs)."""
        namespace, shown = self._shown(path)
        if shown:
            self._generations[namespace] = self._generations.get(namespace, 0) + 1
            self.generation += 1

    def _shown(self, path: str) -> tuple[str, bool]:
        """The namespace of a workspace path, and whether a prompt shows the file."""
        rel = normalize(path)
        namespace = ""
        parts = rel.split("/", 2)
        if parts[0] == USERS_DIR and len(parts) == 3:
            namespace = f"{USERS_DIR}/{parts[1]}/"
            rel = parts[2]
        shown = rel in self._watched or rel.startswith(f"{KNOWLEDGE_DIR}/") or rel == KNOWLEDGE_DIR
        return namespace, shown

    async def _text(self, path: str, *, limit: int | None = MAX_TEXT_BYTES) -> str | None:
        """A text file, or None when it is missing or cannot be used.

        The files read here are the model's to write, so one it broke (a directory where
        ``MEMORY.md`` belongs, a FIFO, a link to another user's file, 600 MB of zeros) must not
        stop the next call: it is skipped with one warning naming it, and kept in
        :attr:`unusable` so the prompt can tell the model what to repair. A storage that fails
        (a disk error, a store that does not answer) still raises.
        """
        try:
            found = await self.backend.get(path, limit=limit)
        except (UnusableFile, PathOutsideWorkspace) as exc:
            why = str(exc)
            if self.unusable.get(path) != why:
                logger.warning("skipped %s: %s", path, why)
            self.unusable.pop(path, None)
            self.unusable[path] = why  # the newest last
            while len(self.unusable) > MAX_UNUSABLE_KEPT:
                del self.unusable[next(iter(self.unusable))]
            return None
        if self.unusable.pop(path, None) is not None:
            logger.info("%s is usable again", path)
        return _decode(found[0]) if found is not None else None


PROMPT_FILES: Final = (AGENTS_MD, MEMORY_MD)
"""Files a system prompt shows, besides ``knowledge/`` and those given to
:meth:`WorkspaceManager.watch`: a write to one counts in :meth:`WorkspaceManager.generation_of`."""


def scoped(path: str, user_id: str | None) -> str:
    """The workspace path of ``path`` in the user's namespace (the shared path for no user)."""
    return user_prefix(user_id) + normalize(path)


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file's workspace path, size in bytes and modification time (epoch seconds)."""

    path: str
    size: int
    modified: float


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on a sidecar lock file (``.<name>.lock``) next to ``path``.

    A sidecar, not the file itself, because atomic rewrites replace the file's inode.

    Raises:
        StorageError: The lock file cannot be created or locked.
    """
    try:
        with _parent_of(path) as (directory, _), locked(directory, path.name):
            yield
    except OSError as exc:
        msg = f"cannot lock {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def locked_append(path: Path, data: bytes) -> None:
    """Append ``data`` with one ``write`` under an exclusive lock on the file.

    Raises:
        StorageError: The file could not be written.
    """
    try:
        with _parent_of(path) as (directory, _):
            append(directory, path.name, data)
    except OSError as exc:
        msg = f"cannot append to {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old file or the new one, never half.

    Raises:
        StorageError: The file could not be written.
    """
    try:
        with _parent_of(path) as (directory, made):
            replace(directory, path.name, data, above=made)
    except OSError as exc:
        msg = f"cannot write {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


@contextlib.contextmanager
def _parent_of(path: Path) -> Iterator[tuple[int, int]]:
    """The directory of an operator-given path, created if missing, held for the operation.

    With how many directories it made (:func:`~harness.filesystem._beneath.make_directories`),
    for the write to name them on the disk.
    """
    parent = path.absolute().parent
    made = make_directories(parent, 0o777)
    with directory_beneath(parent, parent) as directory:
        yield directory, made


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
