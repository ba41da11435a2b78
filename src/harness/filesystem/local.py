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
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Final, TypeVar

from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace, StorageError, UnusableFile
from harness.filesystem._beneath import (
    LinkSwapped,
    NotAFile,
    TooLarge,
    append,
    directory_beneath,
    locked,
    lstat,
    read_beneath,
    replace,
    stat_beneath,
)
from harness.filesystem._semantics import (
    BINARY_EXTENSIONS,
    DEFAULT_MAX_FILE_BYTES,
    MAX_NAME_BYTES,
    BadName,
    Fail,
    Glob,
    SymlinkEscape,
    check_names,
    clean_pattern,
    edited,
    exists_message,
    grep_filter,
    grep_result,
    matching_lines,
    read_result,
    refusal,
    shown_path,
    size_limit,
    text_of,
    too_large_message,
)
from harness.filesystem._threads import ToolThreads
from harness.filesystem.base import (
    DEFAULT_MAX_STORAGE_BYTES,
    MAX_GREP_MATCHES,
    MISSING,
    AbstractFilesystem,
    Confinement,
    EditResult,
    FileInfo,
    FsError,
    FsErrorCode,
    GrepMatch,
    GrepResult,
    IsolationScope,
    ListResult,
    ReadResult,
    TransferResult,
    Version,
    WriteResult,
    check_path,
    namespace_prefix,
)
from harness.layout import USERS_DIR
from harness.paths import normalize

__all__ = [
    "BINARY_EXTENSIONS",
    "DEFAULT_MAX_FILE_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "LocalFilesystem",
]


DEFAULT_SEARCH_SECONDS: Final = 30.0
"""How long a ``grep`` or ``glob`` walks before it stops (see ``search_seconds``)."""

MAX_PATH_BYTES: Final = 4096
"""The longest whole path (root included, in bytes) Linux takes."""

_LOCK_OR_TEMP = re.compile(r"\..+\.lock|\..+\.[A-Za-z0-9_]{8}\.tmp")
"""Names of the sidecar lock files and in-flight temporary files of atomic writes."""

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a path lives on disk.

    ``leaf`` has its directories resolved but not its last component (so a symbolic link
    itself can be deleted or moved); ``path`` is resolved all the way (what reads and writes
    use). Both are inside ``namespace``, which is inside ``root`` (the workspace directory,
    resolved), where every walk to them starts.
    """

    rel: str
    leaf: Path
    path: Path
    namespace: Path
    root: Path
    hidden: Path | None = None
    """A directory inside the namespace the call must not see (``users/`` for a no-user call)."""

    def allows(self, path: Path) -> bool:
        """Whether a resolved path is part of what this call may see."""
        return _inside(path, self.namespace) and (
            self.hidden is None or not _inside(path, self.hidden)
        )


@dataclass(frozen=True, slots=True)
class _Found:
    """A file met by a walk: where its bytes are (a link's target), its path below, its stat."""

    source: Path
    below: str
    stat: os.stat_result


class LocalFilesystem(AbstractFilesystem):
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
        self._real_root: Path | None = None
        self._threads = ToolThreads()

    def _resolve_root(self) -> Path:
        """The root with its links resolved, once it exists (it is the operator's choice)."""
        real = self.root.resolve()
        if real.is_dir():
            self._real_root = real
        return real

    def __repr__(self) -> str:
        return f"LocalFilesystem({str(self.root)!r}, scope={self.scope.value!r})"

    # -- path resolution (worker thread) ---------------------------------------------------

    def _resolve(self, path: str, ctx: RuntimeContext | None) -> _Target:
        """Where ``path`` lives for this call.

        Raises:
            PathOutsideWorkspace: The path escapes (``..``, ``~``, NUL, another namespace, a
                symbolic link leading out) or names something the disk cannot hold.
        """
        if not isinstance(path, str):
            msg = f"a path must be a string, got {type(path).__name__}"
            raise TypeError(msg)
        check_path(path, self.scope, ctx)
        rel = normalize(path)
        check_names(path, rel)
        prefix = namespace_prefix(self.scope, ctx)
        root = self._real_root or self._resolve_root()
        base = root / prefix if prefix else root
        lexical = base / rel if rel else base
        confinement = Confinement.of(rel, self.scope, ctx)
        namespace = root / confinement.directory if confinement.directory else root
        if len(os.fsencode(lexical)) >= MAX_PATH_BYTES:
            msg = (
                f"path {shown_path(path)} is too long for the disk ({len(rel.encode())} bytes); "
                "use a shorter path with fewer directories"
            )
            raise BadName(msg)
        try:
            parent = lexical.parent.resolve() if rel else base.parent
            leaf = parent / lexical.name if rel else base
            real = leaf.resolve() if leaf.is_symlink() else leaf  # parent is resolved already
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
            msg = f"path {shown_path(path)} runs into a loop of symbolic links"
            raise BadName(msg) from exc
        hidden = namespace / USERS_DIR if confinement.hides_users else None
        target = _Target(rel, leaf, real, namespace, root, hidden)
        if not (target.allows(leaf.parent) or leaf == namespace) or not target.allows(real):
            msg = (
                f"path {shown_path(path)} leads out of the caller's namespace through a symbolic "
                "link; use a path whose links stay inside"
            )
            raise SymlinkEscape(msg)
        return target

    def _display(self, target: _Target, real: Path) -> str:
        """The namespace-relative path of a real path found under ``target``."""
        below = real.relative_to(target.path).as_posix()
        if below == ".":
            return target.rel
        return f"{target.rel}/{below}" if target.rel else below

    # -- tool operations --------------------------------------------------------------------

    async def _tool(self, path: object, ctx: RuntimeContext | None, work: Callable[[], _R]) -> _R:
        """Run a tool operation on the file tools' threads, in its namespace's lane."""
        return await self._threads.run(self._lane(path, ctx), work)

    def _lane(self, path: object, ctx: RuntimeContext | None) -> str:
        """The namespace a tool operation runs for (the shared root when the path is bad)."""
        try:
            rel = normalize(path) if isinstance(path, str) else ""
        except PathOutsideWorkspace:
            rel = ""
        return Confinement.of(rel, self.scope, ctx).directory

    async def aclose(self) -> None:
        """Let the file tools' threads end (a later call starts them again)."""
        self._threads.shutdown()

    async def ls(self, path: str = "/", ctx: RuntimeContext | None = None) -> ListResult:
        """The entries directly in a directory, sorted; a missing directory lists as empty."""
        return await self._tool(
            path, ctx, lambda: _guard(lambda: self._ls(path, ctx), _list_error, path)
        )

    def _ls(self, path: str, ctx: RuntimeContext | None) -> ListResult:
        target = self._resolve(path, ctx)
        found = _stat(target, target.path, path)
        if found is None:
            return ListResult()
        if not stat.S_ISDIR(found.st_mode):
            raise Fail(
                FsErrorCode.NOT_A_DIRECTORY,
                f"'{path}' is a file, not a directory; read it instead",
            )
        entries = []
        prefix = f"{target.rel}/" if target.rel else ""
        with _held(target, target.path, path) as directory, os.scandir(directory) as listing:
            for entry in listing:
                if _LOCK_OR_TEMP.fullmatch(entry.name):
                    continue
                child = target.path / entry.name
                if child == target.hidden:
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:  # removed meanwhile
                    continue
                if stat.S_ISLNK(info.st_mode):
                    linked = _followed(target, child)
                    if linked is None:
                        continue  # leading out, dangling or in a loop: not part of the namespace
                    info = linked[1]
                is_dir = stat.S_ISDIR(info.st_mode)
                entries.append(
                    FileInfo(
                        prefix + entry.name,
                        is_dir=is_dir,
                        size=0 if is_dir else info.st_size,
                        modified_at=info.st_mtime,
                    )
                )
        return ListResult(sorted(entries, key=lambda e: e.path))

    async def read(
        self,
        path: str,
        offset: int = 0,
        limit: int | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ReadResult:
        r"""Lines ``offset`` (0-based) to ``offset + limit`` of a file; None or 0: to the end.

        Each line keeps its ``\n``, so reading a whole file gives back exactly its text.
        ``total_lines`` counts lines (a final ``\n`` does not start a new one). A binary file
        (not UTF-8, or a :data:`BINARY_EXTENSIONS` name) comes back whole as base64, with
        ``total_lines`` 0. An empty file is ``""``.

        Raises:
            ValueError: ``offset`` or ``limit`` is negative.
        """
        if offset < 0 or (limit is not None and limit < 0):
            msg = f"read offset and limit must not be negative, got {offset} and {limit}"
            raise ValueError(msg)
        return await self._tool(
            path,
            ctx,
            lambda: _guard(
                lambda: self._read(path, offset, limit, ctx), lambda e: ReadResult(error=e), path
            ),
        )

    def _read(
        self, path: str, offset: int, limit: int | None, ctx: RuntimeContext | None
    ) -> ReadResult:
        target = self._resolve(path, ctx)
        raw, modified = self._read_file(target, path)
        return read_result(target.path.name, raw, modified, path, offset, limit)

    def _read_file(self, target: _Target, path: str) -> tuple[bytes, float]:
        """A file's bytes and modification time, or the tool error saying why not."""
        modified = self._check_readable(target, path)
        return _read_checked(target, path, self.max_file_bytes), modified

    def _check_readable(self, target: _Target, path: str) -> float:
        """A file's modification time, or the tool error saying why it cannot be read."""
        found = _stat(target, target.path, path)
        if found is None:
            raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{path}' not found")
        if stat.S_ISDIR(found.st_mode):
            raise Fail(
                FsErrorCode.IS_DIRECTORY,
                f"'{path}' is a directory, not a file; list it with ls instead",
            )
        if found.st_size > self.max_file_bytes:
            raise Fail(
                FsErrorCode.TOO_LARGE,
                f"'{path}' is {found.st_size} bytes, over the limit of {self.max_file_bytes}; "
                "search it with grep instead",
            )
        return found.st_mtime

    async def write(
        self, path: str, content: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Create a new file (and its directories), atomically; an existing one is an error."""
        return await self._tool(
            path, ctx, lambda: _guard(lambda: self._write(path, content, ctx), _write_error, path)
        )

    def _write(self, path: str, content: str, ctx: RuntimeContext | None) -> WriteResult:
        target = self._resolve(path, ctx)
        data = content.encode("utf-8")
        self._check_writable(target, path)
        name = target.path.name
        with _locked(target, path) as directory:
            if lstat(directory, name) is not None or target.leaf.is_symlink():
                raise Fail(FsErrorCode.ALREADY_EXISTS, exists_message(path))
            replace(directory, name, data)
        return WriteResult(target.rel)

    def _check_writable(self, target: _Target, path: str) -> None:
        """Refuse a write to a directory, or below something that is a file."""
        if not target.rel or _is_directory(_stat(target, target.path, path)):
            raise Fail(FsErrorCode.IS_DIRECTORY, f"'{path}' is a directory, not a file")
        for parent in target.path.parents:
            if parent == target.namespace or not _inside(parent, target.namespace):
                break
            found = _stat(target, parent, path)
            if found is not None and not stat.S_ISDIR(found.st_mode):
                shown = parent.relative_to(target.namespace).as_posix()
                raise Fail(
                    FsErrorCode.NOT_A_DIRECTORY,
                    f"cannot create '{path}': '{shown}' is a file, not a directory",
                )

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        replace_all: bool = False,
        ctx: RuntimeContext | None = None,
    ) -> EditResult:
        r"""Replace the exact text ``old`` (once, or everywhere with ``replace_all``), atomically.

        Line endings in ``old`` and ``new`` follow the file's: ``\r\n`` becomes ``\n`` in a
        file that uses ``\n``, and the other way round.
        """
        return await self._tool(
            path,
            ctx,
            lambda: _guard(
                lambda: self._edit(path, old, new, replace_all, ctx),
                lambda e: EditResult(error=e),
                path,
            ),
        )

    def _edit(
        self, path: str, old: str, new: str, replace_all: bool, ctx: RuntimeContext | None
    ) -> EditResult:
        target = self._resolve(path, ctx)
        if not old:
            raise Fail(
                FsErrorCode.NO_MATCH,
                "the text to replace is empty; give the exact text to replace, with context",
            )
        self._check_readable(target, path)  # missing, directory, too large: before locking
        name = target.path.name
        with _locked(target, path, create=False) as directory:
            raw, _ = self._read_file(target, path)
            updated, occurrences = edited(path, name, raw, old, new, replace_all)
            replace(directory, name, updated)
        return EditResult(target.rel, occurrences=occurrences)

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> GrepResult:
        """Lines containing the literal ``pattern`` in text files under ``path``.

        ``glob`` filters by file name (``*.md``), or by the path below ``path`` when it holds a
        ``/`` (``docs/**/*.md``). Binary and oversized files are skipped. Lines are 1-based;
        matches are sorted by path, then line.
        """
        return await self._tool(
            path,
            ctx,
            lambda: _guard(
                lambda: self._grep(pattern, path, glob, ctx), lambda e: GrepResult(error=e), path
            ),
        )

    def _grep(
        self, pattern: str, path: str, glob: str | None, ctx: RuntimeContext | None
    ) -> GrepResult:
        target = self._resolve(path, ctx)
        selects = grep_filter(glob)
        matches: list[GrepMatch] = []
        for found in self._walk_files(target, path, time.monotonic() + self.search_seconds):
            name = PurePosixPath(found.below).name if found.below else target.path.name
            if not selects(name, found.below) or found.stat.st_size > self.max_file_bytes:
                continue
            try:
                raw = read_beneath(target.root, found.source, limit=self.max_file_bytes)
            except OSError:  # removed, unreadable, not a file or swapped for a link: no answer
                continue
            if (text := text_of(name, raw)) is None:
                continue
            shown = self._display(target, target.path / found.below) if found.below else target.rel
            matches += matching_lines(shown, text, pattern, MAX_GREP_MATCHES + 1 - len(matches))
            if len(matches) > MAX_GREP_MATCHES:
                break
        return grep_result(matches)

    def _walk_files(self, target: _Target, shown: str, deadline: float) -> Iterator[_Found]:
        """The files under a target (or the target itself), each with its path below it.

        A walk still going at ``deadline`` (``time.monotonic()``) stops with a tool error, so
        a search of a huge tree gives its thread back.

        Symbolic links to files inside the namespace count; linked directories are not entered
        (no loops), and links leading out are skipped. The walk holds each directory it lists
        (``os.fwalk``), so a directory swapped for a link meanwhile is not entered either.
        """
        top = _stat(target, target.path, shown)
        if top is None or stat.S_ISREG(top.st_mode):
            if top is not None:
                yield _Found(target.path, "", top)
            return
        if not stat.S_ISDIR(top.st_mode):
            return
        with _held(target, target.path, shown) as directory:
            for dirpath, dirnames, filenames, held in os.fwalk(".", dir_fd=directory):
                base = target.path / dirpath
                dirnames[:] = sorted(d for d in dirnames if base / d != target.hidden)
                if time.monotonic() > deadline:
                    raise Fail(
                        FsErrorCode.TOO_LARGE,
                        f"the search of {shown_path(shown)} took longer than "
                        f"{self.search_seconds:g} s and was stopped; search a narrower path",
                    )
                for name in sorted(filenames):
                    if _LOCK_OR_TEMP.fullmatch(name):
                        continue
                    file = source = base / name
                    info = lstat(held, name)
                    if info is not None and stat.S_ISLNK(info.st_mode):
                        followed = _followed(target, file)
                        source, info = followed if followed is not None else (file, None)
                    if info is not None and stat.S_ISREG(info.st_mode):
                        yield _Found(source, file.relative_to(target.path).as_posix(), info)

    async def glob(
        self, pattern: str, path: str = "/", ctx: RuntimeContext | None = None
    ) -> ListResult:
        """Files under ``path`` whose path below it matches ``pattern``, sorted.

        ``*``, ``?`` and ``[...]`` match within one name; ``**`` spans directories, and
        ``**/x`` also matches ``x`` directly under ``path``. A leading ``/`` is ignored.
        ``*.md`` matches only files directly under ``path``; use ``**/*.md`` for all.
        """
        return await self._tool(
            path, ctx, lambda: _guard(lambda: self._glob(pattern, path, ctx), _list_error, path)
        )

    def _glob(self, pattern: str, path: str, ctx: RuntimeContext | None) -> ListResult:
        target = self._resolve(path, ctx)
        matcher = Glob(clean_pattern(pattern))
        top = _stat(target, target.path, path)
        if top is not None and not stat.S_ISDIR(top.st_mode):
            raise Fail(
                FsErrorCode.NOT_A_DIRECTORY,
                f"'{path}' is a file, not a directory; glob searches under a directory",
            )
        entries = []
        for found in self._walk_files(target, path, time.monotonic() + self.search_seconds):
            if not matcher.fullmatch(found.below):
                continue
            entries.append(
                FileInfo(
                    self._display(target, target.path / found.below),
                    size=found.stat.st_size,
                    modified_at=found.stat.st_mtime,
                )
            )
        return ListResult(sorted(entries, key=lambda e: e.path))

    async def upload(
        self, files: Sequence[tuple[str, bytes]], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """Write files (replacing existing ones, creating directories), atomically each.

        Results come in the order of ``files``, each with the path as given.
        """
        batch = list(files)
        return await self._tool(batch[0][0] if batch else "", ctx, lambda: self._upload(batch, ctx))

    def _upload(
        self, files: list[tuple[str, bytes]], ctx: RuntimeContext | None
    ) -> list[TransferResult]:
        return [
            _guard(
                partial(self._upload_one, path, data, ctx),
                partial(_transfer_error, path),
                path,
            )
            for path, data in files
        ]

    def _upload_one(self, path: str, data: bytes, ctx: RuntimeContext | None) -> TransferResult:
        target = self._resolve(path, ctx)
        self._check_writable(target, path)
        name = target.path.name
        with _locked(target, path) as directory:
            replace(directory, name, bytes(data))
        return TransferResult(path)

    async def download(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """The bytes of files, in the order asked, each with the path as given."""
        batch = list(paths)
        return await self._tool(batch[0] if batch else "", ctx, lambda: self._download(batch, ctx))

    def _download(self, paths: list[str], ctx: RuntimeContext | None) -> list[TransferResult]:
        return [
            _guard(partial(self._download_one, path, ctx), partial(_transfer_error, path), path)
            for path in paths
        ]

    def _download_one(self, path: str, ctx: RuntimeContext | None) -> TransferResult:
        target = self._resolve(path, ctx)
        if _is_directory(_stat(target, target.path, path)):
            raise Fail(FsErrorCode.IS_DIRECTORY, f"'{path}' is a directory, not a file")
        try:
            data = _read_checked(target, path, self.max_storage_bytes)
        except (FileNotFoundError, NotADirectoryError):
            raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{path}' not found") from None
        return TransferResult(path, content=data)

    async def exists(self, path: str, ctx: RuntimeContext | None = None) -> bool:
        """Whether a file or directory is there (False for a path that escapes)."""
        return await self._tool(path, ctx, lambda: self._exists(path, ctx))

    def _exists(self, path: str, ctx: RuntimeContext | None) -> bool:
        try:
            target = self._resolve(path, ctx)
            return _stat(target, target.path, path) is not None
        except (PathOutsideWorkspace, OSError):
            return False

    async def delete(self, path: str, ctx: RuntimeContext | None = None) -> WriteResult:
        """Delete a file (a symbolic link itself, not what it points to); missing is fine."""
        return await self._tool(
            path, ctx, lambda: _guard(lambda: self._delete(path, ctx), _write_error, path)
        )

    def _delete(self, path: str, ctx: RuntimeContext | None) -> WriteResult:
        target = self._resolve(path, ctx)
        if not target.rel:
            raise Fail(FsErrorCode.IS_DIRECTORY, _directory_delete(path))
        with (
            contextlib.suppress(FileNotFoundError, NotADirectoryError),  # gone already: fine
            _held(target, target.leaf.parent, path) as directory,
        ):
            if _is_directory(lstat(directory, target.leaf.name)):
                raise Fail(FsErrorCode.IS_DIRECTORY, _directory_delete(path))
            os.unlink(target.leaf.name, dir_fd=directory)
        return WriteResult(target.rel)

    async def move(
        self, source: str, target: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Move a file, replacing the target and creating its directory; returns the target."""
        return await self._tool(
            source,
            ctx,
            lambda: _guard(lambda: self._move(source, target, ctx), _write_error, source),
        )

    def _move(self, source: str, target: str, ctx: RuntimeContext | None) -> WriteResult:
        src = self._resolve(source, ctx)
        dst = self._resolve(target, ctx)
        if not src.rel:
            raise Fail(FsErrorCode.IS_DIRECTORY, f"'{source}' is a directory, not a file")
        with _held(src, src.leaf.parent, source) as origin:
            found = lstat(origin, src.leaf.name)  # a link is moved as itself
            if found is None:
                raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{source}' not found")
            if stat.S_ISDIR(found.st_mode):
                raise Fail(FsErrorCode.IS_DIRECTORY, f"'{source}' is a directory, not a file")
            self._check_writable(dst, target)
            if src.leaf != dst.leaf:
                with _held(dst, dst.leaf.parent, target, create=True) as destination:
                    os.replace(
                        src.leaf.name,
                        dst.leaf.name,
                        src_dir_fd=origin,
                        dst_dir_fd=destination,
                    )
        return WriteResult(dst.rel)

    # -- storage operations -----------------------------------------------------------------

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
        return await asyncio.to_thread(_storage, path, lambda: self._get(path, ctx, cap))

    def _get(
        self, path: str, ctx: RuntimeContext | None, limit: int
    ) -> tuple[bytes, Version] | None:
        target = self._resolve(path, ctx)
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
            _storage, path, lambda: self._put(path, blob, ctx, if_version)
        )

    def _put(
        self, path: str, data: bytes, ctx: RuntimeContext | None, if_version: Version | None
    ) -> Version | None:
        target = self._resolve(path, ctx)
        _storage_check_file(target, path)
        name = target.path.name
        with _locked(target, path) as directory:
            if if_version is not None:
                current = _storage_read(target, path, self.max_storage_bytes)
                if (MISSING if current is None else _version(current)) != if_version:
                    return None
            replace(directory, name, data)
        return _version(data)

    async def append(self, path: str, data: bytes, ctx: RuntimeContext | None = None) -> None:
        """Append one whole record (creating the file); concurrent appenders lose nothing.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            StorageError: The file cannot be written.
        """
        blob = bytes(data)
        await asyncio.to_thread(_storage, path, lambda: self._append(path, blob, ctx))

    def _append(self, path: str, data: bytes, ctx: RuntimeContext | None) -> None:
        target = self._resolve(path, ctx)
        if not target.rel:
            _storage_check_file(target, path)
        name = target.path.name  # a directory there fails the append itself (EISDIR)
        with _locked(target, path) as directory:  # also excludes a put replacing the file
            append(directory, name, data)


# -- helpers -------------------------------------------------------------------------------


def _guard(operation: Callable[[], _R], on_error: Callable[[FsError], _R], path: str) -> _R:
    """Run a tool operation, turning refusals and file errors into its error result."""
    try:
        return operation()
    except Fail as exc:
        return on_error(exc.error)
    except PathOutsideWorkspace as exc:
        return on_error(refusal(exc))
    except StorageError as exc:
        if isinstance(exc.__cause__, OSError) and (error := _os_error(exc.__cause__, path)):
            return on_error(error)
        raise
    except OSError as exc:
        error = _os_error(exc, path)
        if error is None:
            msg = f"cannot access '{path}': {exc.strerror or exc}"
            raise StorageError(msg) from exc
        return on_error(error)


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


def _os_error(exc: OSError, path: str) -> FsError | None:
    """The tool error for a file-system error that a caller can act on; None for the rest."""
    detail = exc.strerror or str(exc)
    shown = shown_path(path)
    match exc.errno:
        case errno.ENOENT:
            return FsError(FsErrorCode.FILE_NOT_FOUND, f"File {shown} not found")
        case errno.EISDIR:
            return FsError(FsErrorCode.IS_DIRECTORY, f"{shown} is a directory, not a file")
        case errno.ENOTDIR:
            return FsError(
                FsErrorCode.NOT_A_DIRECTORY, f"a part of {shown} is a file, not a directory"
            )
        case errno.EEXIST:
            return FsError(FsErrorCode.ALREADY_EXISTS, f"{shown} already exists")
        case errno.EACCES | errno.EPERM | errno.EROFS:
            return FsError(FsErrorCode.PERMISSION_DENIED, f"cannot access {shown}: {detail}")
        case errno.ENAMETOOLONG | errno.ELOOP:
            return FsError(FsErrorCode.INVALID_PATH, f"cannot use path {shown}: {detail}")
        case errno.EFBIG:
            return FsError(FsErrorCode.TOO_LARGE, f"{shown} is {detail}; search it with grep")
        case errno.ENXIO:  # a FIFO without a reader, or anything else that is not a file
            return FsError(
                FsErrorCode.UNSUPPORTED,
                f"{shown} is not a regular file (a FIFO, a socket or a device); only files "
                "can be read and written",
            )
    return None


def _list_error(error: FsError) -> ListResult:
    return ListResult(error=error)


def _write_error(error: FsError) -> WriteResult:
    return WriteResult(error=error)


def _transfer_error(path: str, error: FsError) -> TransferResult:
    return TransferResult(path, error=error)


def _followed(target: _Target, link: Path) -> tuple[Path, os.stat_result] | None:
    """Where a symbolic link met in a listing leads and what is there, when the call may see it.

    None for a link leading out of what the call sees, dangling, or in a loop.
    """
    try:
        resolved = link.resolve(strict=True)
        if not target.allows(resolved):
            return None
        found = stat_beneath(target.root, resolved)
    except (OSError, RuntimeError):  # a loop, or changed meanwhile
        return None
    if found is None or stat.S_ISLNK(found.st_mode):
        return None
    return resolved, found


def _is_directory(found: os.stat_result | None) -> bool:
    return found is not None and stat.S_ISDIR(found.st_mode)


def _directory_delete(path: str) -> str:
    return f"'{path}' is a directory; delete the files in it one by one"


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or path.is_relative_to(directory)


def _version(data: bytes) -> Version:
    return hashlib.sha256(data).hexdigest()


def _read_checked(target: _Target, shown: str, limit: int) -> bytes:
    """The file's bytes (at most ``limit``), opened where its path was checked (:mod:`._beneath`).

    Raises:
        PathOutsideWorkspace: A directory of the path became a symbolic link after the check.
        TooLarge, NotAFile: See :func:`._beneath.read_beneath`.
    """
    try:
        return read_beneath(target.root, target.path, limit=limit)
    except LinkSwapped:
        raise _swapped(shown) from None


def _stat(target: _Target, path: Path, shown: str) -> os.stat_result | None:
    """What is at a resolved path of ``target`` (None: nothing), reached following no link.

    Raises:
        PathOutsideWorkspace: A directory of the path, or the path itself, is a symbolic link
            now (none was when the path resolved).
    """
    try:
        found = stat_beneath(target.root, path)
    except LinkSwapped:
        raise _swapped(shown) from None
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise _swapped(shown)
    return found


@contextlib.contextmanager
def _held(target: _Target, directory: Path, shown: str, *, create: bool = False) -> Iterator[int]:
    """A descriptor of a directory of ``target``, reached following no link (see :mod:`._beneath`).

    Raises:
        PathOutsideWorkspace: A directory on the way became a symbolic link after the check.
    """
    try:
        with directory_beneath(target.root, directory, create=create) as held:
            yield held
    except LinkSwapped:
        raise _swapped(shown) from None


@contextlib.contextmanager
def _locked(target: _Target, shown: str, *, create: bool = True) -> Iterator[int]:
    """The held directory of ``target``'s file, with the file's sidecar lock taken."""
    with (
        _held(target, target.path.parent, shown, create=create) as directory,
        locked(directory, target.path.name),
    ):
        yield directory


def _swapped(shown: str) -> SymlinkEscape:
    return SymlinkEscape(
        f"path {shown_path(shown)} leads out of the caller's namespace through a symbolic link "
        "(it changed while being used); use a path whose links stay inside"
    )


def _storage_read(target: _Target, shown: str, limit: int) -> bytes | None:
    try:
        return _read_checked(target, shown, limit)
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


def _storage_check_file(target: _Target, shown: str) -> None:
    if not target.rel or _is_directory(_stat(target, target.path, shown)):
        msg = f"cannot write {shown!r}: it is a directory, not a file"
        raise UnusableFile(msg)
