"""The tool operations of the local backend: what the model's file tools do on local disk.

:class:`~harness.filesystem.base.FileTools` over a workspace directory: ``ls``, ``read``,
``write``, ``edit``, ``grep``, ``glob``, ``upload``, ``download``, ``exists``, ``delete`` and
``move``. They never raise for a bad path or a missing file: the result carries the error the
model can act on. What a file tool means (names, reads, edits, globs, messages) comes from
:mod:`._semantics`; this module only reaches the bytes, through :mod:`._local_paths`.

Each operation is one hop to a pool of threads of their own with a lane per namespace
(:mod:`._threads`), so one user's slow searches never queue anyone else's work. Writes are
atomic (temporary file, ``fsync``, rename) under the file's sidecar lock. Lock and temporary
files are bookkeeping: ``ls``, ``glob`` and ``grep`` do not show them.
"""

from __future__ import annotations

import contextlib
import errno
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
from harness.errors import PathOutsideWorkspace, StorageError
from harness.filesystem._beneath import Made, lstat, read_beneath, replace
from harness.filesystem._local_paths import (
    LocalPaths,
    Target,
    checked_read,
    checked_stat,
    followed_link,
    held_directory,
    inside,
    is_directory,
    locked_file,
)
from harness.filesystem._semantics import (
    Fail,
    Glob,
    clean_pattern,
    edited,
    exists_message,
    grep_filter,
    grep_result,
    matching_lines,
    read_result,
    refusal,
    shown_path,
    text_of,
)
from harness.filesystem._threads import ToolThreads
from harness.filesystem.base import (
    MAX_GREP_MATCHES,
    Confinement,
    EditResult,
    FileInfo,
    FileTools,
    FsError,
    FsErrorCode,
    GrepMatch,
    GrepResult,
    ListResult,
    ReadResult,
    TransferResult,
    WriteResult,
)
from harness.paths import normalize

__all__ = ["DEFAULT_SEARCH_SECONDS", "LocalFileTools"]


DEFAULT_SEARCH_SECONDS: Final = 30.0
"""How long a ``grep`` or ``glob`` walks before it stops (see ``search_seconds``)."""

_LOCK_OR_TEMP = re.compile(r"\..+\.lock|\..+\.[A-Za-z0-9_]{8}\.tmp")
"""Names of the sidecar lock files and in-flight temporary files of atomic writes."""

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class _Found:
    """A file met by a walk: where its bytes are (a link's target), its path below, its stat."""

    source: Path
    below: str
    stat: os.stat_result


class LocalFileTools(LocalPaths, FileTools):
    """The file tools on a workspace directory (see the module doc)."""

    max_file_bytes: int
    max_storage_bytes: int
    search_seconds: float
    _threads: ToolThreads

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
        found = checked_stat(target, target.path, path)
        if found is None:
            return ListResult()
        if not stat.S_ISDIR(found.st_mode):
            raise Fail(
                FsErrorCode.NOT_A_DIRECTORY,
                f"'{path}' is a file, not a directory; read it instead",
            )
        entries = []
        prefix = f"{target.rel}/" if target.rel else ""
        with (
            held_directory(target, target.path, path) as directory,
            os.scandir(directory) as listing,
        ):
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
                    linked = followed_link(target, child)
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

    def _read_file(self, target: Target, path: str) -> tuple[bytes, float]:
        """A file's bytes and modification time, or the tool error saying why not."""
        modified = self._check_readable(target, path)
        return checked_read(target, path, self.max_file_bytes), modified

    def _check_readable(self, target: Target, path: str) -> float:
        """A file's modification time, or the tool error saying why it cannot be read."""
        found = checked_stat(target, target.path, path)
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
        made = Made()
        with locked_file(target, path, made=made) as directory:
            if lstat(directory, name) is not None or target.leaf.is_symlink():
                raise Fail(FsErrorCode.ALREADY_EXISTS, exists_message(path))
            replace(directory, name, data, above=made.levels)
        return WriteResult(target.rel)

    def _check_writable(self, target: Target, path: str) -> None:
        """Refuse a write to a directory, or below something that is a file."""
        if not target.rel or is_directory(checked_stat(target, target.path, path)):
            raise Fail(FsErrorCode.IS_DIRECTORY, f"'{path}' is a directory, not a file")
        for parent in target.path.parents:
            if parent == target.namespace or not inside(parent, target.namespace):
                break
            found = checked_stat(target, parent, path)
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
        with locked_file(target, path, create=False) as directory:
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

    def _walk_files(self, target: Target, shown: str, deadline: float) -> Iterator[_Found]:
        """The files under a target (or the target itself), each with its path below it.

        A walk still going at ``deadline`` (``time.monotonic()``) stops with a tool error, so
        a search of a huge tree gives its thread back.

        Symbolic links to files inside the namespace count; linked directories are not entered
        (no loops), and links leading out are skipped. The walk holds each directory it lists
        (``os.fwalk``), so a directory swapped for a link meanwhile is not entered either.
        """
        top = checked_stat(target, target.path, shown)
        if top is None or stat.S_ISREG(top.st_mode):
            if top is not None:
                yield _Found(target.path, "", top)
            return
        if not stat.S_ISDIR(top.st_mode):
            return
        with held_directory(target, target.path, shown) as directory:
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
                        followed = followed_link(target, file)
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
        top = checked_stat(target, target.path, path)
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
        made = Made()
        with locked_file(target, path, made=made) as directory:
            replace(directory, name, bytes(data), above=made.levels)
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
        if is_directory(checked_stat(target, target.path, path)):
            raise Fail(FsErrorCode.IS_DIRECTORY, f"'{path}' is a directory, not a file")
        try:
            data = checked_read(target, path, self.max_storage_bytes)
        except (FileNotFoundError, NotADirectoryError):
            raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{path}' not found") from None
        return TransferResult(path, content=data)

    async def exists(self, path: str, ctx: RuntimeContext | None = None) -> bool:
        """Whether a file or directory is there (False for a path that escapes)."""
        return await self._tool(path, ctx, lambda: self._exists(path, ctx))

    def _exists(self, path: str, ctx: RuntimeContext | None) -> bool:
        try:
            target = self._resolve(path, ctx)
            return checked_stat(target, target.path, path) is not None
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
            held_directory(target, target.leaf.parent, path) as directory,
        ):
            if is_directory(lstat(directory, target.leaf.name)):
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
        with held_directory(src, src.leaf.parent, source) as origin:
            found = lstat(origin, src.leaf.name)  # a link is moved as itself
            if found is None:
                raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{source}' not found")
            if stat.S_ISDIR(found.st_mode):
                raise Fail(FsErrorCode.IS_DIRECTORY, f"'{source}' is a directory, not a file")
            self._check_writable(dst, target)
            if src.leaf != dst.leaf:
                with held_directory(dst, dst.leaf.parent, target, create=True) as destination:
                    os.replace(
                        src.leaf.name,
                        dst.leaf.name,
                        src_dir_fd=origin,
                        dst_dir_fd=destination,
                    )
        return WriteResult(dst.rel)


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


def _directory_delete(path: str) -> str:
    return f"'{path}' is a directory; delete the files in it one by one"
