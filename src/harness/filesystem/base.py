"""The two contracts a backend answers, and the vocabulary they share.

A backend answers two kinds of request, both async and both given the call's
:class:`~harness.context.RuntimeContext` (``ctx``), from which it computes the namespace the
path lives in (see :class:`IsolationScope`); ``ctx=None`` is the whole workspace, which only the
harness itself uses (its own paths already carry ``users/<id>/``):

- :class:`FileTools`, what the model's filesystem tools do: :meth:`~FileTools.ls`,
  :meth:`~FileTools.read` (lines), :meth:`~FileTools.write` (new files only),
  :meth:`~FileTools.edit`, :meth:`~FileTools.grep` (literal), :meth:`~FileTools.glob`,
  :meth:`~FileTools.upload`, :meth:`~FileTools.download`, :meth:`~FileTools.exists`,
  :meth:`~FileTools.delete`, :meth:`~FileTools.move` (and, for a :class:`ShellFilesystem`,
  ``execute``). They never raise for a bad path or a missing file: the result carries an
  :class:`FsError` with one of the original's codes and a message the model can act on;
- :class:`Storage`, what memory, sessions, transcripts, traces and task records need from any
  backend, several workers at once included, through
  :class:`~harness.workspace.WorkspaceManager`: :meth:`~Storage.get` (content and version),
  :meth:`~Storage.put` (atomic replace, optionally only if the version is still the one read:
  compare-and-set), :meth:`~Storage.append` (one whole record, never interleaved or lost),
  :meth:`~Storage.entries` (a listing), :meth:`~Storage.remove` and :meth:`~Storage.rename`.
  These raise :class:`~harness.errors.StorageError` when the storage fails and
  :class:`~harness.errors.PathOutsideWorkspace` for a path that escapes.

:class:`AbstractFilesystem` is both, as every backend of this package is (the model's tools
and the harness then see the same files); a backend that only stores implements
:class:`Storage` alone and serves a :class:`~harness.workspace.WorkspaceManager`, with no file
tools for the model.

Paths are POSIX, relative to the namespace root; a leading ``/`` means that root. ``..``
segments, ``~``, NUL bytes and symbolic links that lead outside are refused everywhere. Text is
UTF-8; a file that is not valid UTF-8 is read as base64 (``FileData.encoding``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final, Literal, Protocol, runtime_checkable

from harness.context import RuntimeContext
from harness.errors import OtherNamespace, PathOutsideWorkspace, StorageError
from harness.layout import USERS_DIR, agent_files_dir, safe_segment
from harness.paths import normalize

__all__ = [
    "DEFAULT_MAX_STORAGE_BYTES",
    "MAX_GREP_MATCHES",
    "MISSING",
    "AbstractFilesystem",
    "Appender",
    "Confinement",
    "EditResult",
    "ExecuteResult",
    "FileData",
    "FileInfo",
    "FileTools",
    "FsError",
    "FsErrorCode",
    "GrepMatch",
    "GrepResult",
    "IsolationScope",
    "ListResult",
    "ManagedFilesystem",
    "OtherNamespace",
    "ReadResult",
    "ShellFilesystem",
    "Storage",
    "TransferResult",
    "Version",
    "WriteResult",
    "check_path",
    "namespace_prefix",
    "sibling",
]

Version = str
"""An opaque token that changes whenever a file's content changes."""

DEFAULT_MAX_STORAGE_BYTES: Final = 128 * 1024 * 1024
"""The most a storage read (:meth:`Storage.get`) reads of one file: 128 MiB.

Bigger than any session, transcript or memory file the harness writes in practice, and small
enough that a sparse or runaway file the model made never takes a worker's memory."""

MAX_GREP_MATCHES: Final = 1_000
"""A grep stops once it has found this many matching lines (the tool shows 200 of them)."""

MISSING: Final = ""
"""The version of a file that does not exist: ``put(..., if_version=MISSING)`` creates only."""


class FsErrorCode(StrEnum):
    """Why a filesystem operation failed (the original's codes)."""

    FILE_NOT_FOUND = "file_not_found"
    IS_DIRECTORY = "is_directory"
    NOT_A_DIRECTORY = "not_a_directory"
    ALREADY_EXISTS = "already_exists"
    PERMISSION_DENIED = "permission_denied"
    INVALID_PATH = "invalid_path"
    NO_MATCH = "no_match"
    NOT_UNIQUE = "not_unique"
    TOO_LARGE = "too_large"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class FsError:
    """A failed operation: a code for programs, a message for people and models."""

    code: FsErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a listing; directories end without a slash and have ``is_dir``."""

    path: str
    is_dir: bool = False
    size: int = 0
    modified_at: float | None = None


@dataclass(frozen=True, slots=True)
class FileData:
    """What a read returns: text, or base64 for a binary file."""

    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    modified_at: float | None = None
    total_lines: int = 0


@dataclass(frozen=True, slots=True)
class ReadResult:
    data: FileData | None = None
    error: FsError | None = None


@dataclass(frozen=True, slots=True)
class WriteResult:
    path: str = ""
    error: FsError | None = None


@dataclass(frozen=True, slots=True)
class EditResult:
    path: str = ""
    occurrences: int = 0
    error: FsError | None = None


@dataclass(frozen=True, slots=True)
class ListResult:
    """What ``ls`` and ``glob`` return, sorted by path."""

    entries: list[FileInfo] = field(default_factory=list)
    error: FsError | None = None


@dataclass(frozen=True, slots=True)
class GrepMatch:
    path: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class GrepResult:
    """Matching lines, at most :data:`MAX_GREP_MATCHES`.

    ``truncated``: the search stopped there (it does not go on to count the rest).
    """

    matches: list[GrepMatch] = field(default_factory=list)
    error: FsError | None = None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class TransferResult:
    """One file of an upload or a download."""

    path: str
    content: bytes | None = None
    error: FsError | None = None


@dataclass(frozen=True, slots=True)
class ExecuteResult:
    """A shell command's combined output (capped), exit code, and whether it was cut."""

    output: str
    exit_code: int
    truncated: bool = False


class IsolationScope(StrEnum):
    """Which namespace a call's paths live in.

    ``USER`` (the default): the user's own directory, ``users/<id>/`` (the shared root for a call
    without a user, where ``users/`` itself is off limits); ``SESSION``: ``sessions/<id>/``;
    ``AGENT``: the agent's own directory, ``agents/<agent>/files/`` (the context's ``agent``,
    which a ``HarnessAgent`` sets: every user and session of one agent share it, and no other
    agent, subagents included, reaches it; a call that names no agent is refused);
    ``GLOBAL``: the whole workspace.
    """

    USER = "user"
    SESSION = "session"
    AGENT = "agent"
    GLOBAL = "global"


def namespace_prefix(scope: IsolationScope, ctx: RuntimeContext | None) -> str:
    """The workspace-relative directory (``""`` or ending in ``/``) of a call's namespace."""
    if ctx is None:
        return ""
    if scope is IsolationScope.USER and ctx.user_id:
        return f"users/{safe_segment(ctx.user_id)}/"
    if scope is IsolationScope.SESSION and ctx.session_id:
        return f"sessions/{safe_segment(ctx.session_id)}/"
    if scope is IsolationScope.AGENT and ctx.agent:
        return f"{agent_files_dir(ctx.agent)}/"
    return ""


@dataclass(frozen=True, slots=True)
class Confinement:
    """Where a path may lead, links included: its namespace, as a workspace-relative directory.

    A call's namespace comes from its context (:func:`namespace_prefix`). The harness's own
    operations (``ctx=None``) name the namespace in the path itself: a path under
    ``users/<segment>/`` is confined to that directory, so a link a user made from their own
    ``MEMORY.md`` or session file to another user's is refused like any other escape; any other
    path is confined to the shared root, with ``users/`` off limits (``hides_users``); and
    ``users`` itself, the list of namespaces, is a namespace of its own.
    """

    directory: str
    hides_users: bool

    @classmethod
    def of(cls, rel: str, scope: IsolationScope, ctx: RuntimeContext | None) -> Confinement:
        """The confinement of ``rel`` (a normalized path, without the call's prefix)."""
        if ctx is not None:
            prefix = namespace_prefix(scope, ctx)
            return cls(prefix.rstrip("/"), not prefix and scope is IsolationScope.USER)
        parts = rel.split("/", 2)
        if parts[0] == USERS_DIR:
            return cls("/".join(parts[:2]), hides_users=False)
        return cls("", hides_users=True)


def check_path(path: str, scope: IsolationScope, ctx: RuntimeContext | None) -> str:
    """The workspace-relative path a call means, with its namespace prefix.

    Raises:
        PathOutsideWorkspace: ``..``, ``~``, a NUL byte, (for a call without a user under
            ``USER`` scope) a path into another user's namespace, or (under ``AGENT`` scope) a
            call that names no agent.
    """
    if "\x00" in path:
        msg = f"path {path!r} contains a NUL byte"
        raise PathOutsideWorkspace(msg)
    if ctx is not None and scope is IsolationScope.AGENT and not ctx.agent:
        msg = (
            f"path {path[:80]!r}: under IsolationScope.AGENT a call's files are its agent's; "
            "name the agent in RuntimeContext(agent=...)"
        )
        raise OtherNamespace(msg)
    rel = normalize(path)
    prefix = namespace_prefix(scope, ctx)
    if (
        ctx is not None
        and not prefix
        and scope is IsolationScope.USER
        and (rel == "users" or rel.startswith("users/"))
    ):
        msg = f"path {path!r} is in the users' namespaces, which a call without a user cannot see"
        raise OtherNamespace(msg)
    return f"{prefix}{rel}" if rel else prefix.rstrip("/")


class Storage(ABC):
    """The harness's own storage: what memory, sessions, transcripts, traces and task records need.

    :class:`~harness.workspace.WorkspaceManager` reads and writes the workspace through this
    contract and nothing else, so a backend that only stores (a database, an object store, a
    dict in a test) needs these six methods and no file tools. Each method is here because a
    caller of the manager needs it:

    - :meth:`get` (content and version): every read, and the version a compare-and-set writer
      puts back (MEMORY.md by consolidation, the session index, task records);
    - :meth:`put` (atomic replace, optionally compare-and-set): every rewrite, which must leave
      the old file or the new one and never overwrite a concurrent edit;
    - :meth:`append` (one whole record): sessions, transcripts, traces and daily logs, written
      by several processes or workers at once;
    - :meth:`entries` (a listing): the daily logs, task records, sessions, knowledge, skills and
      subagent declarations are found by listing their directories;
    - :meth:`remove`: old evicted tool results and old history are deleted by maintenance;
    - :meth:`rename`: maintenance archives a daily log; a backend that can move a file in one
      step (a rename on disk) does so, where get, put and remove would be three.

    Paths are POSIX, relative to the namespace root (a leading ``/`` means that root). The
    harness itself calls with ``ctx=None`` and paths that already carry ``users/<id>/``; a call
    with a context lives in its namespace (:attr:`scope`, :func:`namespace_prefix`). Every
    method raises :class:`~harness.errors.PathOutsideWorkspace` for a path that escapes and
    :class:`~harness.errors.StorageError` when the storage fails.
    """

    scope: IsolationScope = IsolationScope.USER

    @abstractmethod
    async def get(
        self, path: str, ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> tuple[bytes, Version] | None:
        """A whole file and its version; None when it does not exist.

        At most ``limit`` bytes are read (and never more than the backend's own cap,
        :data:`DEFAULT_MAX_STORAGE_BYTES` unless it was built with another).

        Raises:
            UnusableFile: What is there is not a regular file (a directory, a FIFO...), or
                holds more than the limit; it is not read.
        """

    async def get_many(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> list[tuple[bytes, Version] | None]:
        """:meth:`get` of each path, in order: in one round trip where the backend can.

        Optional: by default one :meth:`get` after the other. A caller that needs several
        files before it can go on (a session's messages and its state) asks for them at once,
        and the local disk reads them in one worker-thread hop.
        """
        return [await self.get(path, ctx, limit=limit) for path in paths]

    @abstractmethod
    async def put(
        self,
        path: str,
        data: bytes,
        ctx: RuntimeContext | None = None,
        *,
        if_version: Version | None = None,
    ) -> Version | None:
        """Replace a file atomically; returns its new version.

        With ``if_version``, only if the file's version is still that one (:data:`MISSING`: only
        if it does not exist); otherwise nothing is written and None is returned.
        """

    @abstractmethod
    async def append(self, path: str, data: bytes, ctx: RuntimeContext | None = None) -> None:
        """Append one whole record; concurrent appenders never interleave or lose one."""

    @abstractmethod
    async def entries(
        self, directory: str, ctx: RuntimeContext | None = None, *, recursive: bool = False
    ) -> list[FileInfo]:
        """The files and directories directly in ``directory``, sorted by path.

        With ``recursive``, every file below it instead (and no directories). Each path is the
        namespace path (``memory/2026-01-02.md``), never relative to ``directory``. A directory
        that is missing, or that cannot be listed (a file, a path refused), lists as empty.
        """

    @abstractmethod
    async def remove(self, path: str, ctx: RuntimeContext | None = None) -> None:
        """Delete a file; a missing file is not an error.

        Raises:
            StorageError: The file cannot be deleted (it is a directory, the storage fails).
        """

    @abstractmethod
    async def rename(self, source: str, target: str, ctx: RuntimeContext | None = None) -> None:
        """Move a file, replacing the target, creating its directory.

        In one step where the backend can (a rename on local disk).

        Raises:
            StorageError: The source is missing or not a file, or the storage fails.
        """

    async def sync(self, path: str, ctx: RuntimeContext | None = None) -> None:  # noqa: B027
        """Make what was written to a file so far survive a power loss, not only a crash.

        Optional: by default there is nothing more to do. Once :meth:`append` returns, the
        record survives the writer's crash; on local disk it may still wait in the page cache,
        and this writes it to the disk (``fsync``), with the directories that name it (a new
        file's name is on the disk only with its directory). :meth:`put` is on the disk
        already (its atomic replace syncs, new directories included); a store (Redis) follows
        its own persistence settings. A missing file is not an error.
        """

    def appender(self, path: str, ctx: RuntimeContext | None = None) -> Appender:
        """A writer that appends to one file again and again (a session, one record per step).

        Optional: by default each append is an :meth:`append`. A backend that can keep the file
        open between appends does (the local disk: one write instead of a walk from the root),
        with the same guarantees. The caller closes it (:meth:`Appender.aclose`).
        """
        return Appender(self, path, ctx)

    async def aclose(self) -> None:  # noqa: B027 (optional, nothing to release by default)
        """Release what the backend holds (connections, a sandbox)."""


class Appender:
    """Appends records to one file of a :class:`Storage`, with :meth:`Storage.append`'s rules.

    Each record is whole and never interleaved with another writer's; a record appended after
    the file was replaced (an atomic :meth:`Storage.put`) goes to the new file. This one appends
    through :meth:`Storage.append` every time; a backend may return one that holds the file.
    """

    def __init__(self, storage: Storage, path: str, ctx: RuntimeContext | None = None) -> None:
        self.storage = storage
        self.path = path
        self.ctx = ctx

    async def append(self, data: bytes) -> None:
        """Append one whole record (creating the file)."""
        await self.storage.append(self.path, data, self.ctx)

    async def sync(self) -> None:
        """Make the appends so far survive a power loss (:meth:`Storage.sync`)."""
        await self.storage.sync(self.path, self.ctx)

    async def write(
        self,
        data: bytes = b"",
        *,
        replace: Mapping[str, bytes] | None = None,
        sync: bool = True,
        release: bool = False,
        sync_append: bool = False,
    ) -> None:
        """Append ``data`` (if any), then replace files beside this one, in one trip if possible.

        For a writer whose step changes several files of one directory (a session's messages
        and its state): a backend that can do it all in one round trip (the local disk: one
        worker-thread hop) does, so a step costs one hop however many files it touches.

        Args:
            data: One whole record to append, as :meth:`append`; nothing when empty.
            replace: Files of this file's directory, by name (this file's own name too: its
                next append then goes to the new file), each replaced atomically as
                :meth:`Storage.put` does, in the order given.
            sync: Whether the replaced files must be on the disk before this returns. False
                keeps the rename atomic (a crash leaves the old file or the new one) and spares
                the ``fsync`` calls; a power loss may then keep the old file. Backends with
                nothing to sync ignore it (this default one always syncs as ``put`` does).
            release: Let go of the held file afterwards, as :meth:`aclose` (the writer's last
                write: no second round trip to close it).
            sync_append: Then make every append so far survive a power loss, as :meth:`sync`
                does (in the same trip: a writer that syncs each record pays no second one).
        """
        if data:
            await self.append(data)
        for name, blob in (replace or {}).items():
            await self.storage.put(sibling(self.path, name), blob, self.ctx)
        if sync_append:
            await self.sync()
        if release:
            await self.aclose()

    async def aclose(self) -> None:
        """Let go of what is held for the file (a later append takes it again)."""


def sibling(path: str, name: str) -> str:
    """The path of the file ``name`` in ``path``'s directory.

    Raises:
        ValueError: ``name`` is not one plain file name.
    """
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        msg = f"{name!r} is not the name of a file beside {path!r}"
        raise ValueError(msg)
    head, slash, _ = path.rpartition("/")
    return f"{head}{slash}{name}"


class FileTools(ABC):
    """What the model's filesystem tools do (:class:`~harness.tools.FilesystemTools`).

    These never raise for a bad path or a missing file: the result carries an :class:`FsError`
    with one of the original's codes and a message the model can act on. Each call lives in the
    namespace its context gives (:attr:`scope`).
    """

    scope: IsolationScope = IsolationScope.USER

    @abstractmethod
    async def ls(self, path: str = "/", ctx: RuntimeContext | None = None) -> ListResult:
        """The entries directly in a directory; a missing directory lists as empty."""

    @abstractmethod
    async def read(
        self,
        path: str,
        offset: int = 0,
        limit: int | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ReadResult:
        """Lines ``offset`` (0-based) up to ``offset + limit`` of a file.

        A binary file is returned whole, base64; ``total_lines`` is the file's line count.
        """

    @abstractmethod
    async def write(
        self, path: str, content: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Create a new file; an existing file is an ``already_exists`` error."""

    @abstractmethod
    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        replace_all: bool = False,
        ctx: RuntimeContext | None = None,
    ) -> EditResult:
        """Replace the exact text ``old``; it must occur once unless ``replace_all``."""

    @abstractmethod
    async def grep(
        self,
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> GrepResult:
        """Lines containing the literal ``pattern`` in files under ``path``.

        With ``glob``, only files whose name matches it.
        """

    @abstractmethod
    async def glob(
        self, pattern: str, path: str = "/", ctx: RuntimeContext | None = None
    ) -> ListResult:
        """Files under ``path`` matching ``pattern``.

        ``**`` spans directories, and ``**/x`` also matches ``x`` at the search root.
        """

    @abstractmethod
    async def upload(
        self, files: Sequence[tuple[str, bytes]], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """Write files, replacing existing ones, atomically each."""

    @abstractmethod
    async def download(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """The bytes of files."""

    @abstractmethod
    async def exists(self, path: str, ctx: RuntimeContext | None = None) -> bool:
        """Whether a file or directory is there."""

    @abstractmethod
    async def delete(self, path: str, ctx: RuntimeContext | None = None) -> WriteResult:
        """Delete a file; a missing file is not an error."""

    @abstractmethod
    async def move(
        self, source: str, target: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Move a file, replacing the target, creating its directory."""


class AbstractFilesystem(FileTools, Storage):
    """A backend of both contracts: the model's file tools and the harness's own storage.

    Every backend in this package is one, so the model's tools and the harness see the same
    files. It implements the tool operations and :meth:`get`, :meth:`put` and :meth:`append`;
    the rest of the storage contract comes from the tool operations here: :meth:`entries` from
    :meth:`ls` and :meth:`glob`, :meth:`remove` from :meth:`delete`, :meth:`rename` from
    :meth:`move`, their error results raised as :class:`~harness.errors.StorageError`.
    """

    async def entries(
        self, directory: str, ctx: RuntimeContext | None = None, *, recursive: bool = False
    ) -> list[FileInfo]:
        """:meth:`Storage.entries` through :meth:`ls`, or with ``recursive`` :meth:`glob`."""
        where = directory or "/"
        if not recursive:
            listed = await self.ls(where, ctx)
            return [] if listed.error is not None else list(listed.entries)
        found = await self.glob("**/*", where, ctx)
        if found.error is not None:
            return []
        rel = normalize(directory)
        base = f"{rel}/" if rel else ""
        files = []
        for entry in found.entries:
            if entry.is_dir:
                continue
            path = entry.path.lstrip("/")
            path = path if not base or path.startswith(base) else base + path
            files.append(replace(entry, path=path))
        return files

    async def remove(self, path: str, ctx: RuntimeContext | None = None) -> None:
        """:meth:`Storage.remove` through :meth:`delete`."""
        result = await self.delete(path, ctx)
        if result.error is not None:
            msg = f"cannot delete {path}: {result.error.message}"
            raise StorageError(msg)

    async def rename(self, source: str, target: str, ctx: RuntimeContext | None = None) -> None:
        """:meth:`Storage.rename` through :meth:`move`."""
        result = await self.move(source, target, ctx)
        if result.error is not None:
            msg = f"cannot move {source} to {target}: {result.error.message}"
            raise StorageError(msg)


class ShellFilesystem(AbstractFilesystem):
    """A filesystem that can also run shell commands (the ``execute`` tool is offered then)."""

    @abstractmethod
    async def execute(
        self,
        command: str,
        timeout: float | None = None,  # noqa: ASYNC109 (the command's limit, not ours)
        working_directory: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in the namespace's directory (or a subdirectory)."""


@runtime_checkable
class ManagedFilesystem(Protocol):
    """A backend with a per-call lifecycle (``start`` before a call, ``release`` after it)."""

    async def start(self, ctx: RuntimeContext | None = None) -> None: ...

    async def release(self, ctx: RuntimeContext | None = None) -> None: ...
