"""Reading and writing workspace files, per user, through an optional filesystem backend.

:class:`WorkspaceManager` is the one place that turns a workspace path into bytes. Reads are
two-layered: a configured :class:`WorkspaceFilesystem` backend is asked first and the local
workspace directory is the fallback, so a remote or sandboxed backend can override files while
a local template still serves defaults. For a call made for a user, the user's namespace
(``users/<user>/``) is tried before the shared file. Every path passes the path policy of
:mod:`harness.workspace.paths`.

Local reads are cached by (modification time, size): a reader that checks the same files again
pays for a ``stat``, not a read. ``generation`` counts the writes made through the manager, so
a cache built on its reads knows when to look again. All file I/O runs in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from harness.errors import StorageError, WorkspaceError
from harness.workspace.layout import user_prefix
from harness.workspace.paths import normalize, resolve_inside

__all__ = [
    "FileInfo",
    "FileText",
    "WorkspaceFilesystem",
    "WorkspaceManager",
    "atomic_write",
    "file_lock",
    "locked_append",
    "scoped",
]


@runtime_checkable
class WorkspaceFilesystem(Protocol):
    """The first read layer: a backend that may hold workspace files (remote store, sandbox)."""

    async def read_text(self, path: str) -> str | None:
        """Return the file's text, or None when the backend does not have it."""
        ...

    async def list_files(self, directory: str) -> list[str]:
        """Return the workspace paths of the files under ``directory``, recursively."""
        ...


@dataclass(frozen=True, slots=True)
class FileText:
    """A file's text and the workspace path it was actually read from."""

    path: str
    text: str


class _StatCache:
    """Local file texts keyed by path, valid while (mtime_ns, size) is unchanged."""

    def __init__(self) -> None:
        self._entries: dict[Path, tuple[int, int, str]] = {}
        self._lock = threading.Lock()

    def read(self, path: Path) -> str | None:
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        key = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            entry = self._entries.get(path)
        if entry is not None and entry[:2] == key:
            return entry[2]
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        with self._lock:
            self._entries[path] = (*key, text)
        return text


class WorkspaceManager:
    """Access to one workspace directory (and, optionally, a backend layered over it).

    Args:
        root: The local workspace directory.
        filesystem: A backend read before the local directory; None for local only.
    """

    def __init__(self, root: str | Path, filesystem: WorkspaceFilesystem | None = None) -> None:
        self.root = Path(root).expanduser().absolute()
        self.filesystem = filesystem
        self.generation = 0
        self._cache = _StatCache()

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
        try:
            self.root.mkdir(parents=True, exist_ok=True)
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

    @staticmethod
    def candidates(path: str, user_id: str | None) -> list[str]:
        """The paths a read of ``path`` tries, most specific first."""
        rel = normalize(path)
        return [user_prefix(user_id) + rel, rel] if user_id else [rel]

    async def read_first(
        self, paths: Sequence[str], user_id: str | None = None
    ) -> dict[str, FileText]:
        """Read several files at once (one thread hop); absent files are left out.

        Each path is looked up in the user's namespace, then shared; in the backend, then locally.
        """
        found: dict[str, FileText] = {}
        local_needed: list[str] = []
        if self.filesystem is not None:
            for path in paths:
                for candidate in self.candidates(path, user_id):
                    text = await self.filesystem.read_text(candidate)
                    if text:
                        found[path] = FileText(candidate, text)
                        break
                else:
                    local_needed.append(path)
        else:
            local_needed = list(paths)
        if local_needed:
            found.update(await asyncio.to_thread(self._read_local, local_needed, user_id))
        return found

    async def read_text(self, path: str, user_id: str | None = None) -> str:
        """The text of a workspace file (user's copy first); ``""`` when it exists nowhere."""
        entry = (await self.read_first([path], user_id)).get(path)
        return entry.text if entry else ""

    def _read_local(self, paths: Iterable[str], user_id: str | None) -> dict[str, FileText]:
        found: dict[str, FileText] = {}
        for path in paths:
            for candidate in self.candidates(path, user_id):
                text = self._cache.read(self.local_path(candidate))
                if text:
                    found[path] = FileText(candidate, text)
                    break
        return found

    async def list_files(self, directory: str, user_id: str | None = None) -> list[str]:
        """Workspace-relative paths of files under ``directory`` (user's and shared), sorted.

        A file the user has in their namespace hides the shared file of the same relative path.
        """
        rel_dir = normalize(directory)
        seen: dict[str, None] = {}
        for candidate in self.candidates(rel_dir, user_id):
            prefix = candidate[: len(candidate) - len(rel_dir)]
            names: list[str] = []
            if self.filesystem is not None:
                names.extend(await self.filesystem.list_files(candidate))
            names.extend(await asyncio.to_thread(self._walk_local, candidate))
            for name in names:
                seen.setdefault(name[len(prefix) :] if name.startswith(prefix) else name, None)
        return sorted(seen)

    def _walk_local(self, directory: str) -> list[str]:
        base = self.local_path(directory)
        if not base.is_dir():
            return []
        root = self.root.resolve()
        return [
            path.relative_to(root).as_posix()
            for path in base.rglob("*")
            if path.is_file() and not path.is_symlink()
        ]

    async def write_text(self, path: str, text: str, user_id: str | None = None) -> str:
        """Write a file atomically in the user's namespace; returns the workspace path written."""
        target = scoped(path, user_id)
        try:
            data = text.encode("utf-8")
            await asyncio.to_thread(lambda: atomic_write(self.local_path(target), data))
        finally:
            self.generation += 1
        return target

    # -- one namespace exactly (no fallback to shared files): memory, transcripts, state -------

    async def read_own(self, path: str, user_id: str | None = None) -> str | None:
        """The text of the file in the user's own namespace; None when it does not exist."""
        target = scoped(path, user_id)
        if self.filesystem is not None:
            text = await self.filesystem.read_text(target)
            if text is not None:
                return text
        return await asyncio.to_thread(lambda: _read_or_none(self.local_path(target)))

    async def append_text(self, path: str, text: str, user_id: str | None = None) -> str:
        """Append ``text`` as one whole record; returns the workspace path written.

        Concurrent appenders, threads or processes, never interleave or lose a record.
        """
        target = scoped(path, user_id)
        try:
            data = text.encode("utf-8")
            await asyncio.to_thread(lambda: locked_append(self.local_path(target), data))
        finally:
            self.generation += 1
        return target

    async def replace_text(
        self, path: str, text: str, *, expected: str, user_id: str | None = None
    ) -> bool:
        """Atomically replace a file, but only if it still holds ``expected`` (``""`` = absent).

        This is the no-clobber rule for rewrites: a writer that read the file, worked on it and
        comes back finds out whether somebody changed it meanwhile, and then re-reads and redoes
        its work instead of overwriting the other edit. Returns False on such a conflict.
        """
        rel = scoped(path, user_id)
        replaced = await asyncio.to_thread(
            lambda: _compare_and_replace(self.local_path(rel), expected, text)
        )
        if replaced:
            self.generation += 1
        return replaced

    async def update_text(
        self, path: str, transform: Callable[[str], str], user_id: str | None = None
    ) -> str:
        """Read, transform and atomically rewrite a file under its lock; returns the new text.

        For short read-modify-write edits (``transform`` must be quick and pure): concurrent
        updaters, and :meth:`replace_text`, wait for each other, so no edit is lost.
        """
        rel = scoped(path, user_id)

        def _update() -> str:
            target = self.local_path(rel)
            with file_lock(target):
                text = transform(_read_or_none(target) or "")
                atomic_write(target, text.encode("utf-8"))
                return text

        try:
            return await asyncio.to_thread(_update)
        finally:
            self.generation += 1

    async def list_own(self, directory: str, user_id: str | None = None) -> list[FileInfo]:
        """The files directly in ``directory`` of the user's namespace, sorted by name.

        Paths are relative to the namespace (``memory/2026-01-02.md``), as the other methods
        of this group take them.
        """
        rel_dir = normalize(directory)
        return await asyncio.to_thread(self._list_local, rel_dir, scoped(rel_dir, user_id))

    async def list_dirs(self, directory: str, user_id: str | None = None) -> list[str]:
        """The names of the directories directly in ``directory`` of the user's namespace."""
        rel = scoped(directory, user_id)

        def _dirs() -> list[str]:
            base = self.local_path(rel)
            if not base.is_dir():
                return []
            return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink())

        return await asyncio.to_thread(_dirs)

    def _list_local(self, rel_dir: str, directory: str) -> list[FileInfo]:
        base = self.local_path(directory)
        if not base.is_dir():
            return []
        infos = []
        for path in sorted(base.iterdir()):
            try:
                if not path.is_file() or path.is_symlink():
                    continue
                stat = path.stat()
            except FileNotFoundError:  # a temporary file renamed away by a concurrent writer
                continue
            rel = f"{rel_dir}/{path.name}" if rel_dir else path.name
            infos.append(FileInfo(rel, stat.st_size, stat.st_mtime))
        return infos

    async def move(self, source: str, target: str, user_id: str | None = None) -> None:
        """Move a file within the user's namespace, creating the target's directory."""

        def _move() -> None:
            src = self.local_path(scoped(source, user_id))
            dst = self.local_path(scoped(target, user_id))
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)

        await asyncio.to_thread(_move)
        self.generation += 1

    async def delete(self, path: str, user_id: str | None = None) -> None:
        """Delete a file in the user's namespace; a missing file is not an error."""
        rel = scoped(path, user_id)
        await asyncio.to_thread(lambda: self.local_path(rel).unlink(missing_ok=True))
        self.generation += 1


def scoped(path: str, user_id: str | None) -> str:
    """The workspace path of ``path`` in the user's namespace (the shared path for no user)."""
    return user_prefix(user_id) + normalize(path)


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file's workspace path, size in bytes and modification time (epoch seconds)."""

    path: str
    size: int
    modified: float


def _read_or_none(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on a sidecar lock file (``.<name>.lock``) next to ``path``.

    A sidecar, not the file itself, because atomic rewrites replace the file's inode.

    Raises:
        StorageError: The lock file cannot be created or locked.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = (path.parent / f".{path.name}.lock").open("a")
        fcntl.flock(handle, fcntl.LOCK_EX)
    except OSError as exc:
        msg = f"cannot lock {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    with handle:
        yield


def locked_append(path: Path, data: bytes) -> None:
    """Append ``data`` with one ``write`` under an exclusive lock on the file.

    Raises:
        StorageError: The file could not be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)  # closing releases the lock
    except OSError as exc:
        msg = f"cannot append to {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def _compare_and_replace(path: Path, expected: str, text: str) -> bool:
    with file_lock(path):
        current = _read_or_none(path) or ""
        if current != expected:
            return False
        atomic_write(path, text.encode("utf-8"))
        return True


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old file or the new one, never half.

    Raises:
        StorageError: The file could not be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        msg = f"cannot write {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
