"""The remote backend: a workspace kept as items of a key-value store (memory, Redis).

Build it over any :class:`~harness.stores.BaseStore`::

    fs = RemoteFilesystem(RedisStore("redis://127.0.0.1:6379/0"), scope=IsolationScope.USER)

Data model: every file is one item of the store namespace ``root`` (default ``("fs",)``), keyed
by its full workspace-relative path, namespace prefix included, exactly the path the local
backend would use under its root (``users/<id>/memory/2024-05-01.md`` for a USER-scoped call of
that user; see :func:`~harness.filesystem.base.check_path`). Its value::

    {"data": "<the text, or base64 of the bytes>", "encoding": "utf-8" | "base64",
     "size": <bytes>, "modified_at": <epoch seconds>}

Directories are not stored: a directory exists while some file's key lies below it, so ``ls``
lists the files directly in it and one entry for each first-level name of deeper keys. Paths,
results, error codes and messages are the local backend's (the shared contract suite runs over
both); its path checks and text handling are reused, not repeated.

Concurrency comes from the store's versions: a file's version is its item's version, ``put`` with
``if_version`` is the store's compare-and-set, and ``append``, ``write`` and ``edit`` are
read-modify-write loops over it, retried with a short random backoff when another writer got in
first. A loop that keeps losing raises :class:`~harness.errors.StorageError` rather than drop a
record. ``move`` writes the target before deleting the source, so a failure between the two
leaves both, never neither.

Costs to know: ``ls``, ``glob`` and ``grep`` read every item below the directory (values
included; :class:`~harness.stores.BaseStore` has no keys-only search), and an append rewrites the
whole file, so very large append-only files are better kept on a local backend. The storage
listing the harness uses (``entries``, :class:`~harness.filesystem.base.AbstractFilesystem`) is
``ls`` or ``glob`` and costs the same.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace, StorageError, UnusableFile
from harness.filesystem._semantics import (
    DEFAULT_MAX_FILE_BYTES,
    Fail,
    Glob,
    check_names,
    clean_pattern,
    edited,
    exists_message,
    grep_filter,
    grep_result,
    matching_lines,
    read_result,
    refusal,
    size_limit,
    text_of,
    too_large_message,
)
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
from harness.stores.base import BaseStore, Item, Namespace

__all__ = ["DEFAULT_ROOT", "MAX_WRITE_ATTEMPTS", "RemoteFilesystem"]

DEFAULT_ROOT: Final[Namespace] = ("fs",)
"""The store namespace a :class:`RemoteFilesystem` keeps its files in by default."""

MAX_WRITE_ATTEMPTS: Final = 100
"""How often a read-modify-write (append, edit) retries after losing to another writer."""

_BACKOFF_BASE: Final = 0.001
_BACKOFF_CAP: Final = 0.05

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a path lives: ``key`` is its full store key, ``rel`` the path the caller sees.

    ``base`` is ``key`` as a prefix of what lies below it (``""`` for the workspace root), and
    ``namespace`` the call's namespace prefix that ``rel`` leaves out.
    """

    rel: str
    key: str
    namespace: str
    hidden: str | None = None
    """Keys starting with this are not the call's to see (``users/`` for a no-user call)."""

    @property
    def base(self) -> str:
        return f"{self.key}/" if self.key else ""

    def shown(self, key: str) -> str:
        """The namespace-relative path of a key below this target's namespace."""
        return key[len(self.namespace) :]


def _encode(data: bytes) -> dict[str, Any]:
    """The stored value of a file's bytes: UTF-8 text as it is, anything else base64."""
    try:
        text: str = data.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return {"data": text, "encoding": encoding, "size": len(data), "modified_at": time.time()}


def _decode(item: Item) -> bytes:
    """The bytes of a stored file.

    Raises:
        StorageError: The item is not a file this backend wrote.
    """
    value = item.value
    try:
        data, encoding = value["data"], value["encoding"]
        if encoding == "base64":
            return base64.b64decode(data, validate=True)
        if encoding == "utf-8":
            return str(data).encode("utf-8")
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"store item {item.key!r} is not a file (bad value: {exc}); remove or rewrite it"
        raise StorageError(msg) from exc
    msg = f"store item {item.key!r} has the unknown encoding {encoding!r}; rewrite it"
    raise StorageError(msg)


def _size(item: Item) -> int:
    size = item.value.get("size")
    return size if isinstance(size, int) else len(_decode(item))


def _modified(item: Item) -> float | None:
    modified = item.value.get("modified_at")
    return float(modified) if isinstance(modified, int | float) else None


async def _backoff(attempt: int) -> None:
    """Wait a random moment, longer after each lost attempt, so contenders spread out."""
    await asyncio.sleep(random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2**attempt)))


async def _tool(operation: Awaitable[_R], on_error: Callable[[FsError], _R]) -> _R:
    """Run a tool operation, turning refusals into its error result (as the local backend)."""
    try:
        return await operation
    except Fail as exc:
        return on_error(exc.error)
    except PathOutsideWorkspace as exc:
        return on_error(refusal(exc))


class RemoteFilesystem(AbstractFilesystem):
    """A workspace kept in a key-value store, with per-user namespaces (see the module doc).

    Args:
        store: Where the files live; the filesystem does not own it (``aclose`` leaves it open).
        scope: Which namespace a call's paths live in (default: the user's own).
        root: The store namespace of this workspace's files; two filesystems with different
            roots on one store are separate workspaces.
        max_file_bytes: Files larger than this are not read, edited or searched
            (``too_large``); writes are not limited.
        max_storage_bytes: The most one storage read returns (:meth:`get`); a bigger file
            is :class:`~harness.errors.UnusableFile`.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        scope: IsolationScope = IsolationScope.USER,
        root: Namespace = DEFAULT_ROOT,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_storage_bytes: int = DEFAULT_MAX_STORAGE_BYTES,
    ) -> None:
        if not isinstance(store, BaseStore):
            msg = f"RemoteFilesystem needs a BaseStore, got {type(store).__name__}"
            raise TypeError(msg)
        if (
            not isinstance(root, tuple)
            or not root
            or not all(isinstance(segment, str) and segment for segment in root)
        ):
            msg = f"RemoteFilesystem root must be a non-empty tuple of names, got {root!r}"
            raise ValueError(msg)
        self.store = store
        self.scope = IsolationScope(scope)
        self.root = root
        self.max_file_bytes = size_limit("RemoteFilesystem", "max_file_bytes", max_file_bytes)
        self.max_storage_bytes = size_limit(
            "RemoteFilesystem", "max_storage_bytes", max_storage_bytes
        )

    def __repr__(self) -> str:
        return f"RemoteFilesystem({self.store!r}, scope={self.scope.value!r}, root={self.root!r})"

    # -- paths and items -------------------------------------------------------------------

    def _resolve(self, path: str, ctx: RuntimeContext | None) -> _Target:
        """Where ``path`` lives for this call.

        Raises:
            PathOutsideWorkspace: The path escapes (``..``, ``~``, NUL, another namespace) or
                has a name no filesystem could hold (the local backend's limits, kept so both
                backends accept the same paths).
        """
        if not isinstance(path, str):
            msg = f"a path must be a string, got {type(path).__name__}"
            raise TypeError(msg)
        key = check_path(path, self.scope, ctx)
        rel = normalize(path)
        check_names(path, rel)
        prefix = namespace_prefix(self.scope, ctx)
        confinement = Confinement.of(rel, self.scope, ctx)  # a store has no links to escape by
        hidden = f"{USERS_DIR}/" if confinement.hides_users else None
        return _Target(rel, key, prefix, hidden)

    async def _file(self, target: _Target) -> Item | None:
        """The item of a file (None for the namespace root, which is never a file)."""
        return await self.store.get(self.root, target.key) if target.rel else None

    async def _is_dir(self, target: _Target) -> bool:
        """Whether some file lies below the target, which makes it a directory."""
        return bool(await self.store.search(self.root, target.base, limit=1))

    async def _below(self, target: _Target) -> list[Item]:
        """Every file below the target that the call may see, sorted by key."""
        items = await self.store.search(self.root, target.base)
        hidden = target.hidden
        return items if hidden is None else [i for i in items if not i.key.startswith(hidden)]

    async def _check_writable(self, target: _Target, path: str) -> None:
        """Refuse a write to a directory, or below something that is a file."""
        if not target.rel or await self._is_dir(target):
            raise Fail(FsErrorCode.IS_DIRECTORY, f"'{path}' is a directory, not a file")
        await self._check_parents(target, path)

    async def _check_parents(self, target: _Target, path: str) -> None:
        parts = target.rel.split("/")
        for depth in range(len(parts) - 1, 0, -1):
            shown = "/".join(parts[:depth])
            if await self.store.get(self.root, target.namespace + shown) is not None:
                raise Fail(
                    FsErrorCode.NOT_A_DIRECTORY,
                    f"cannot create '{path}': '{shown}' is a file, not a directory",
                )

    async def _readable(self, target: _Target, path: str) -> Item:
        """A file's item, or the tool error saying why it cannot be read."""
        item = await self._file(target)
        if item is None:
            if await self._is_dir(target):
                raise Fail(
                    FsErrorCode.IS_DIRECTORY,
                    f"'{path}' is a directory, not a file; list it with ls instead",
                )
            raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{path}' not found")
        size = _size(item)
        if size > self.max_file_bytes:
            raise Fail(
                FsErrorCode.TOO_LARGE,
                f"'{path}' is {size} bytes, over the limit of {self.max_file_bytes}; "
                "search it with grep instead",
            )
        return item

    def _files_under(self, target: _Target, items: list[Item]) -> list[tuple[Item, str]]:
        """The files of a search below ``target``, with their path below it."""
        return [(item, item.key[len(target.base) :]) for item in items]

    # -- tool operations --------------------------------------------------------------------

    async def ls(self, path: str = "/", ctx: RuntimeContext | None = None) -> ListResult:
        """The entries directly in a directory, sorted; a missing directory lists as empty."""
        return await _tool(self._ls(path, ctx), lambda e: ListResult(error=e))

    async def _ls(self, path: str, ctx: RuntimeContext | None) -> ListResult:
        target = self._resolve(path, ctx)
        if await self._file(target) is not None:
            raise Fail(
                FsErrorCode.NOT_A_DIRECTORY,
                f"'{path}' is a file, not a directory; read it instead",
            )
        files: list[FileInfo] = []
        directories: dict[str, list[float]] = {}
        for item, below in self._files_under(target, await self._below(target)):
            name, deeper, _ = below.partition("/")
            shown = f"{target.rel}/{name}" if target.rel else name
            modified = _modified(item)
            if deeper:  # a directory: as recent as the most recent file in it
                directories.setdefault(shown, []).extend([] if modified is None else [modified])
            else:
                files.append(FileInfo(shown, size=_size(item), modified_at=modified))
        entries = files + [
            FileInfo(shown, is_dir=True, modified_at=max(times, default=None))
            for shown, times in directories.items()
        ]
        return ListResult(sorted(entries, key=lambda e: e.path))

    async def read(
        self,
        path: str,
        offset: int = 0,
        limit: int | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ReadResult:
        """Lines ``offset`` (0-based) to ``offset + limit`` of a file; None or 0: to the end.

        The same results as :meth:`LocalFilesystem.read
        <harness.filesystem.local.LocalFilesystem.read>`: lines keep their newline, a binary
        file comes back whole as base64, an empty file is ``""``.

        Raises:
            ValueError: ``offset`` or ``limit`` is negative.
        """
        if offset < 0 or (limit is not None and limit < 0):
            msg = f"read offset and limit must not be negative, got {offset} and {limit}"
            raise ValueError(msg)
        return await _tool(self._read(path, offset, limit, ctx), lambda e: ReadResult(error=e))

    async def _read(
        self, path: str, offset: int, limit: int | None, ctx: RuntimeContext | None
    ) -> ReadResult:
        target = self._resolve(path, ctx)
        item = await self._readable(target, path)
        raw, modified = _decode(item), _modified(item)
        name = target.rel.rpartition("/")[2]
        return read_result(name, raw, modified, path, offset, limit)

    async def write(
        self, path: str, content: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Create a new file; an existing one is an ``already_exists`` error."""
        return await _tool(self._write(path, content, ctx), lambda e: WriteResult(error=e))

    async def _write(self, path: str, content: str, ctx: RuntimeContext | None) -> WriteResult:
        target = self._resolve(path, ctx)
        data = content.encode("utf-8")
        await self._check_writable(target, path)
        created = await self.store.put_if_version(self.root, target.key, _encode(data), None)
        if created is None:
            raise Fail(FsErrorCode.ALREADY_EXISTS, exists_message(path))
        return WriteResult(target.rel)

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        replace_all: bool = False,
        ctx: RuntimeContext | None = None,
    ) -> EditResult:
        """Replace the exact text ``old`` (once, or everywhere with ``replace_all``).

        The replacement is a compare-and-set of the whole file, retried on the new content when
        another writer changed it meanwhile, so no concurrent change is overwritten.
        """
        return await _tool(
            self._edit(path, old, new, replace_all, ctx), lambda e: EditResult(error=e)
        )

    async def _edit(
        self, path: str, old: str, new: str, replace_all: bool, ctx: RuntimeContext | None
    ) -> EditResult:
        target = self._resolve(path, ctx)
        if not old:
            raise Fail(
                FsErrorCode.NO_MATCH,
                "the text to replace is empty; give the exact text to replace, with context",
            )
        for attempt in range(MAX_WRITE_ATTEMPTS):
            item = await self._readable(target, path)
            name = target.rel.rpartition("/")[2]
            updated, occurrences = edited(path, name, _decode(item), old, new, replace_all)
            value = _encode(updated)
            if (
                await self.store.put_if_version(self.root, target.key, value, item.version)
                is not None
            ):
                return EditResult(target.rel, occurrences=occurrences)
            await _backoff(attempt)
        raise _contended("edit", path)

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> GrepResult:
        """Lines containing the literal ``pattern`` in text files under ``path``.

        ``glob`` filters by file name (``*.md``), or by the path below ``path`` when it holds a
        ``/``. Binary and oversized files are skipped; matches are sorted by path, then line.
        """
        return await _tool(self._grep(pattern, path, glob, ctx), lambda e: GrepResult(error=e))

    async def _grep(
        self, pattern: str, path: str, glob: str | None, ctx: RuntimeContext | None
    ) -> GrepResult:
        target = self._resolve(path, ctx)
        selects = grep_filter(glob)
        single = await self._file(target)
        found = [(single, "")] if single else self._files_under(target, await self._below(target))
        matches: list[GrepMatch] = []
        for item, below in found:
            name = item.key.rpartition("/")[2]
            if not selects(name, below) or _size(item) > self.max_file_bytes:
                continue
            text = text_of(name, _decode(item))
            if text is not None:
                left = MAX_GREP_MATCHES + 1 - len(matches)
                matches += matching_lines(target.shown(item.key), text, pattern, left)
                if len(matches) > MAX_GREP_MATCHES:
                    break
        return grep_result(matches)

    async def glob(
        self, pattern: str, path: str = "/", ctx: RuntimeContext | None = None
    ) -> ListResult:
        """Files under ``path`` whose path below it matches ``pattern``, sorted.

        ``*``, ``?`` and ``[...]`` match within one name; ``**`` spans directories, and
        ``**/x`` also matches ``x`` directly under ``path``. A leading ``/`` is ignored.
        """
        return await _tool(self._glob(pattern, path, ctx), lambda e: ListResult(error=e))

    async def _glob(self, pattern: str, path: str, ctx: RuntimeContext | None) -> ListResult:
        target = self._resolve(path, ctx)
        matcher = Glob(clean_pattern(pattern))
        if await self._file(target) is not None:
            raise Fail(
                FsErrorCode.NOT_A_DIRECTORY,
                f"'{path}' is a file, not a directory; glob searches under a directory",
            )
        entries = [
            FileInfo(target.shown(item.key), size=_size(item), modified_at=_modified(item))
            for item, below in self._files_under(target, await self._below(target))
            if matcher.fullmatch(below)
        ]
        return ListResult(sorted(entries, key=lambda e: e.path))

    async def upload(
        self, files: Sequence[tuple[str, bytes]], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """Write files, replacing existing ones; results in order, each with the path as given."""
        return [
            await _tool(self._upload_one(path, data, ctx), _transfer_error(path))
            for path, data in list(files)
        ]

    async def _upload_one(
        self, path: str, data: bytes, ctx: RuntimeContext | None
    ) -> TransferResult:
        target = self._resolve(path, ctx)
        await self._check_writable(target, path)
        await self.store.put(self.root, target.key, _encode(bytes(data)))
        return TransferResult(path)

    async def download(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """The bytes of files, in the order asked, each with the path as given."""
        return [
            await _tool(self._download_one(path, ctx), _transfer_error(path))
            for path in list(paths)
        ]

    async def _download_one(self, path: str, ctx: RuntimeContext | None) -> TransferResult:
        target = self._resolve(path, ctx)
        item = await self._file(target)
        if item is None:
            if await self._is_dir(target):
                raise Fail(FsErrorCode.IS_DIRECTORY, f"'{path}' is a directory, not a file")
            raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{path}' not found")
        return TransferResult(path, content=_decode(item))

    async def exists(self, path: str, ctx: RuntimeContext | None = None) -> bool:
        """Whether a file or directory is there (False for a path that escapes)."""
        try:
            target = self._resolve(path, ctx)
        except PathOutsideWorkspace:
            return False
        return await self._file(target) is not None or await self._is_dir(target)

    async def delete(self, path: str, ctx: RuntimeContext | None = None) -> WriteResult:
        """Delete a file; a missing one is not an error."""
        return await _tool(self._delete(path, ctx), lambda e: WriteResult(error=e))

    async def _delete(self, path: str, ctx: RuntimeContext | None) -> WriteResult:
        target = self._resolve(path, ctx)
        if not target.rel or (await self._file(target) is None and await self._is_dir(target)):
            raise Fail(
                FsErrorCode.IS_DIRECTORY,
                f"'{path}' is a directory; delete the files in it one by one",
            )
        await self.store.delete(self.root, target.key)
        return WriteResult(target.rel)

    async def move(
        self, source: str, target: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Move a file, replacing the target; returns the target's path."""
        return await _tool(self._move(source, target, ctx), lambda e: WriteResult(error=e))

    async def _move(self, source: str, target: str, ctx: RuntimeContext | None) -> WriteResult:
        src = self._resolve(source, ctx)
        dst = self._resolve(target, ctx)
        item = await self._file(src)
        if item is None:
            if not src.rel or await self._is_dir(src):
                raise Fail(FsErrorCode.IS_DIRECTORY, f"'{source}' is a directory, not a file")
            raise Fail(FsErrorCode.FILE_NOT_FOUND, f"File '{source}' not found")
        await self._check_writable(dst, target)
        if src.key != dst.key:
            await self.store.put(self.root, dst.key, item.value)
            await self.store.delete(self.root, src.key)
        return WriteResult(dst.rel)

    # -- storage operations -----------------------------------------------------------------

    async def get(
        self, path: str, ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> tuple[bytes, Version] | None:
        """A whole file and its version (the store item's); None when it does not exist.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            UnusableFile: The path is a directory, or the file holds more than ``limit``.
            StorageError: The store failed.
        """
        target = self._resolve(path, ctx)
        item = await self._file(target)
        if item is None:
            if not target.rel or await self._is_dir(target):
                msg = f"cannot read {path!r}: it is a directory, not a file"
                raise UnusableFile(msg)
            return None
        data = _decode(item)
        cap = self.max_storage_bytes if limit is None else min(limit, self.max_storage_bytes)
        if len(data) > cap:
            raise UnusableFile(too_large_message(path, len(data), cap))
        return data, str(item.version)

    async def put(
        self,
        path: str,
        data: bytes,
        ctx: RuntimeContext | None = None,
        *,
        if_version: Version | None = None,
    ) -> Version | None:
        """Replace a file; returns its new version.

        With ``if_version`` this is the store's compare-and-set: of two writers that read the
        same version exactly one wins, the other gets None.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            StorageError: The path is a directory or below a file, or the store failed.
        """
        target = self._resolve(path, ctx)
        value = _encode(bytes(data))
        if if_version is None:
            await self._check_storage_target(target, path)
            return str(await self.store.put(self.root, target.key, value))
        expected: int | None
        if if_version == MISSING:
            expected = None
        elif if_version.isdecimal() and int(if_version) >= 1:
            expected = int(if_version)
        else:
            return None  # no item ever has that version
        await self._check_storage_target(target, path, new=expected is None)
        new = await self.store.put_if_version(self.root, target.key, value, expected)
        return None if new is None else str(new)

    async def append(self, path: str, data: bytes, ctx: RuntimeContext | None = None) -> None:
        """Append one whole record (creating the file); concurrent appenders lose nothing.

        Raises:
            PathOutsideWorkspace: The path escapes the namespace.
            StorageError: The path is a directory or below a file, the store failed, or other
                writers kept changing the file for :data:`MAX_WRITE_ATTEMPTS` tries.
        """
        target = self._resolve(path, ctx)
        record = bytes(data)
        for attempt in range(MAX_WRITE_ATTEMPTS):
            item = await self._file(target)
            if item is None:
                await self._check_storage_target(target, path, new=True)
            current = b"" if item is None else _decode(item)
            value = _encode(current + record)
            version = None if item is None else item.version
            if await self.store.put_if_version(self.root, target.key, value, version) is not None:
                return
            await _backoff(attempt)
        raise _contended("append to", path)

    async def _check_storage_target(
        self, target: _Target, path: str, *, new: bool | None = None
    ) -> None:
        """Refuse a storage write to a directory, or of a new file below a file.

        ``new`` says whether the file is known to be absent (None: look it up).
        """
        if not target.rel or await self._is_dir(target):
            msg = f"cannot write {path!r}: it is a directory, not a file"
            raise UnusableFile(msg)
        if new is None:
            new = await self._file(target) is None
        if new:
            try:
                await self._check_parents(target, path)
            except Fail as exc:
                raise StorageError(exc.error.message) from None


def _transfer_error(path: str) -> Callable[[FsError], TransferResult]:
    return lambda error: TransferResult(path, error=error)


def _contended(action: str, path: str) -> StorageError:
    return StorageError(
        f"could not {action} {path!r}: other writers changed it {MAX_WRITE_ATTEMPTS} times in a "
        "row; nothing was written, try again"
    )
