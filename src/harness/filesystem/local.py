"""The local backend: a directory on this machine, rooted (nothing outside it is reachable).

Every path a call names, absolute or relative, lives under ``root`` plus the call's namespace
(``users/<id>/`` for a user under :attr:`IsolationScope.USER`; see
:func:`~harness.filesystem.base.namespace_prefix`). A leading ``/`` means the namespace root, so
``/etc/passwd`` is the namespace's ``etc/passwd``, never the host's. ``..`` segments, ``~``, NUL
bytes and names too long for the disk (:data:`MAX_NAME_BYTES`, :data:`MAX_PATH_BYTES`) are
refused before the disk is touched (``invalid_path``, or :class:`PathOutsideWorkspace` from the
storage operations); then the path is resolved and a symbolic link that leads out of the
namespace (or a directory on the way that does) is refused too (``permission_denied``), as is,
for a call without a user, the ``users/`` directory, which such a call does not even see
listed. A name that merely contains dots (``a..b``) is an ordinary name.

Each operation is one hop to a worker thread: the blocking work and the checks run there, so
the event loop never waits for the disk. The storage operations (the harness's own) use the
default executor; the tool operations (the model's) a pool of their own with a lane per
namespace (:mod:`._threads`), so one user's slow searches never queue anyone else's work.

A checked path is then used where it was checked: every read, write, listing, move and delete
walks it from the workspace root one directory descriptor at a time, following no link
(:mod:`._beneath`), so a directory swapped for a link after the check (from the sandbox, or by
another process) is refused, never followed out.

Writes (``write``, ``edit``, ``upload``, ``put``, ``append``) are atomic (temporary file,
``fsync``, rename; a crash leaves the old or the new file) and take the file's sidecar lock
(``.<name>.lock``, the one :class:`~harness.workspace.WorkspaceManager` uses), so
``put(if_version=...)`` is a real compare-and-set against every writer of this workspace,
threads and processes alike, and an append never lands on a file that a concurrent ``put`` is
replacing. Lock and temporary files are bookkeeping: ``ls``, ``glob`` and ``grep`` do not show
them.

A file's version is the SHA-256 of its content (hex), so it is the same for every process and
survives restarts.

The class is composed of three modules, one concern each, which import one way only:
:mod:`._local_paths` (where a path lives and how it is reached: resolution, namespaces, the
checked walks), and above it :mod:`._local_tools` (the model's file tools,
:class:`~harness.filesystem.base.FileTools`) and :mod:`._local_storage` (the harness's own
``get``, ``put`` and ``append``, :class:`~harness.filesystem.base.Storage`). This module only
puts them together and checks the limits it is built with.
"""

from __future__ import annotations

from pathlib import Path

from harness.filesystem._local_paths import MAX_PATH_BYTES
from harness.filesystem._local_storage import LocalStorage
from harness.filesystem._local_tools import DEFAULT_SEARCH_SECONDS, LocalFileTools
from harness.filesystem._semantics import (
    BINARY_EXTENSIONS,
    DEFAULT_MAX_FILE_BYTES,
    MAX_NAME_BYTES,
    size_limit,
)
from harness.filesystem._threads import ToolThreads
from harness.filesystem.base import DEFAULT_MAX_STORAGE_BYTES, AbstractFilesystem, IsolationScope

__all__ = [
    "BINARY_EXTENSIONS",
    "DEFAULT_MAX_FILE_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "LocalFilesystem",
]


class LocalFilesystem(LocalFileTools, LocalStorage, AbstractFilesystem):
    """A workspace directory on local disk, rooted, with per-user namespaces.

    Args:
        root: The workspace directory; created on the first write.
        scope: Which namespace a call's paths live in (default: the user's own).
        max_file_bytes: Files larger than this are not read, edited or searched
            (``too_large``); writes are not limited.
        max_storage_bytes: The most one storage read returns (:meth:`get`); a bigger file
            is :class:`~harness.errors.UnusableFile`, and is not read.
        search_seconds: How long one ``grep`` or ``glob`` may walk before it stops with an
            error (a tree of millions of files); 30 s.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        scope: IsolationScope = IsolationScope.USER,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_storage_bytes: int = DEFAULT_MAX_STORAGE_BYTES,
        search_seconds: float = DEFAULT_SEARCH_SECONDS,
    ) -> None:
        if not str(root):
            msg = "LocalFilesystem root must be a directory path, got an empty string"
            raise ValueError(msg)
        self.root = Path(root).expanduser().absolute()
        self.scope = IsolationScope(scope)
        self.max_file_bytes = size_limit("LocalFilesystem", "max_file_bytes", max_file_bytes)
        self.max_storage_bytes = size_limit(
            "LocalFilesystem", "max_storage_bytes", max_storage_bytes
        )
        if not search_seconds > 0:
            msg = f"LocalFilesystem search_seconds must be positive, got {search_seconds!r}"
            raise ValueError(msg)
        self.search_seconds = search_seconds
        self._real_root = None
        self._plain = {}
        self._threads = ToolThreads()

    def __repr__(self) -> str:
        return f"LocalFilesystem({str(self.root)!r}, scope={self.scope.value!r})"
