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
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from harness.errors import StorageError, WorkspaceError
from harness.workspace.layout import user_prefix
from harness.workspace.paths import normalize, resolve_inside

__all__ = ["FileText", "WorkspaceFilesystem", "WorkspaceManager"]


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
        target = user_prefix(user_id) + normalize(path)
        try:
            await asyncio.to_thread(atomic_write, self.local_path(target), text.encode("utf-8"))
        finally:
            self.generation += 1
        return target


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
