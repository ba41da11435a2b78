"""Out-of-reach ledgers: append-only records per key that the model cannot write.

The harness keeps what it must be able to believe (approvals decided by a person, where a
memory entry came from) where neither the file tools nor the sandbox reach: beside the
workspace (``<parent>/.<workspace name>.<kind>/``, one JSON-lines file per key) for a
workspace on this machine's disk, in the store (Redis: one item per change, numbered, under
``("harness", kind, <key's hash>)``) for a workspace in a store, else in this process's memory.

Every change is one atomic step: the key's records are read, the change decides what to append
from them, and the append happens before anyone else can read (an ``flock`` and an ``fsync``
on the local disk, a compare-and-set in a store). A torn last line (a writer killed
mid-write) is not a record, and the next append starts on a line of its own.

A reader does not start from the first record every time: a ledger keeps, per key, the
records it has read and *views* built from them (:class:`View`: the approvals by id and by
tool call, say), and brings them up to date with only what was appended since (on the disk,
the bytes past the offset it read up to, a file replaced or shortened read again whole; in a
store, the numbered changes after the last it read). So a question about one approval costs
the same at the thousandth record as at the first, and a session with N records costs O(N)
over its life, not O(N^2). Views are changed only under the key's lock and on the thread that
reads the file; what :meth:`Ledger.query` hands out is the answer its ``ask`` computed there
(immutable records, copies), never the view itself.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from harness.errors import StorageError
from harness.filesystem._beneath import append_whole, make_directories, open_appending, sync_up

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace.manager import WorkspaceManager

__all__ = [
    "Change",
    "FileLedger",
    "Ledger",
    "MemoryLedger",
    "Record",
    "StoreLedger",
    "View",
    "ledger_for",
    "user_key",
]

Record = dict[str, Any]
"""One record as stored: a JSON object (the approvals' typed records are built from them)."""
Change = Callable[[list[Record]], list[Record]]
"""Given a session's records, the records to append (none: nothing changes)."""

_ATTEMPTS = 50

_V = TypeVar("_V", bound="View")
_T = TypeVar("_T")


class View(Protocol):
    """What a reader folds a key's records into, one record at a time, oldest first.

    Built empty (its class is called with no argument) and kept by the ledger for the key, so
    each record is added once. ``add`` must not fail for a record it does not understand: it
    leaves it out.
    """

    def add(self, record: Record) -> None:
        """Fold one more record into the view."""
        ...


class _Records:
    """The plain list of records: the view behind :meth:`Ledger.records` and ``change``."""

    def __init__(self) -> None:
        self.items: list[Record] = []

    def add(self, record: Record) -> None:
        self.items.append(record)


class Ledger(Protocol):
    """Append-only records per key, changed one atomic step at a time."""

    async def records(self, key: str) -> list[Record]:
        """The key's records, oldest first."""
        ...

    async def change(self, key: str, change: Change) -> list[Record]:
        """Append what ``change`` returns for the current records, atomically; returns them all."""
        ...

    async def query(self, key: str, view: type[_V], ask: Callable[[_V], _T]) -> _T:
        """``ask`` of the key's records folded into ``view`` (kept, brought up to date)."""
        ...

    async def update(
        self, key: str, view: type[_V], change: Callable[[_V], list[Record]]
    ) -> list[Record]:
        """Append what ``change`` returns for the up-to-date view, atomically; returns it.

        ``change`` must not modify the view; it may raise, and then nothing is appended.
        """
        ...

    async def sessions(self) -> list[str]:
        """Every key with records."""
        ...


def _name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:40]


class _Folded:
    """A key's records as read so far, and the views built from them."""

    def __init__(self, identity: object = None) -> None:
        self.identity = identity  # what the records were read from (a file's inode, a version)
        self.offset = 0  # bytes of the file read, up to the end of the last whole line
        self.records: list[Record] = []
        self.views: dict[type[Any], tuple[Any, int]] = {}  # class -> (view, records in it)

    def extend(self, records: list[Record]) -> None:
        self.records.extend(records)

    def view(self, kind: type[_V]) -> _V:
        """The view of every record so far (built, or brought up to date with the new ones)."""
        found = self.views.get(kind)
        view, count = found if found is not None else (kind(), 0)
        for record in self.records[count:]:
            view.add(record)
        self.views[kind] = (view, len(self.records))
        return view


class _KeyLocks:
    """One ``asyncio.Lock`` per key in use: a key's views change under its lock only."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def __call__(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock


class FileLedger:
    """Records as JSON lines, one file per key in ``directory`` (beside the workspace)."""

    def __init__(self, directory: Path, kind: str = "approvals") -> None:
        self.directory = directory
        self.kind = kind
        self._folded: dict[str, _Folded] = {}
        self._lock = _KeyLocks()
        self.lines_read = 0
        """Records parsed from the disk by this ledger so far (each is parsed once)."""

    def path(self, key: str) -> Path:
        """The file of ``key``'s records."""
        return self.directory / f"{_name(key)}.jsonl"

    async def records(self, key: str) -> list[Record]:
        return await self.query(key, _Records, lambda view: list(view.items))

    async def change(self, key: str, change: Change) -> list[Record]:
        async with self._lock(key):
            return await asyncio.to_thread(self._change, key, _Records, _whole(change), True)

    async def query(self, key: str, view: type[_V], ask: Callable[[_V], _T]) -> _T:
        async with self._lock(key):
            return await asyncio.to_thread(self._query, key, view, ask)

    async def update(
        self, key: str, view: type[_V], change: Callable[[_V], list[Record]]
    ) -> list[Record]:
        async with self._lock(key):
            return await asyncio.to_thread(self._change, key, view, change, False)

    async def sessions(self) -> list[str]:
        def keys() -> list[str]:
            found = []
            for path in sorted(self.directory.glob("*.jsonl")) if self.directory.exists() else []:
                record = _first_record(path)
                if record is not None and isinstance(record.get("key"), str):
                    found.append(record["key"])
            return found

        return await asyncio.to_thread(keys)

    def _query(self, key: str, view: type[_V], ask: Callable[[_V], _T]) -> _T:
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            self._folded.pop(key, None)
            return ask(view())
        except OSError as exc:
            msg = f"cannot read the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return ask(self._caught_up(key, fd)[0].view(view))
        except OSError as exc:
            msg = f"cannot read the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        finally:
            os.close(fd)

    def _change(
        self, key: str, view: type[_V], change: Callable[[_V], list[Record]], whole: bool
    ) -> list[Record]:
        path = self.path(key)
        try:
            fd = self._open(path)
        except OSError as exc:
            msg = f"cannot open the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            folded, torn = self._caught_up(key, fd)
            added = [{**record, "key": key} for record in change(folded.view(view))]
            if added:
                data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in added).encode()
                if torn:  # a writer killed mid-line: this append starts a line of its own
                    data = b"\n" + data
                append_whole(fd, data)
                os.fsync(fd)
                folded.offset = os.fstat(fd).st_size
                folded.extend(added)
            return list(folded.records) if whole else added
        except OSError as exc:
            self._folded.pop(key, None)  # what the file holds now is unknown: read it again
            msg = f"cannot write the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        finally:
            os.close(fd)  # closing releases the lock

    def _open(self, path: Path) -> int:
        """The key's file, opened to read and append; a new one is named on the disk first.

        Every record is synced, so the file's name (and the directory's, when it is made here)
        must be too, or a power loss could take a file whose records were each said saved.
        """
        made = make_directories(self.directory, 0o700)
        directory = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd, created = open_appending(directory, path.name, readable=True, mode=0o600)
            try:
                if created or made:
                    sync_up(directory, made)
            except BaseException:
                os.close(fd)
                raise
            return fd
        finally:
            os.close(directory)

    def _caught_up(self, key: str, fd: int) -> tuple[_Folded, bool]:
        """The key's records read up to the file's end (only the new bytes), under its lock.

        Also whether the file ends in a torn line (bytes after the last newline).
        """
        status = os.fstat(fd)
        folded = self._folded.get(key)
        if folded is None or folded.identity != status.st_ino or status.st_size < folded.offset:
            folded = self._folded[key] = _Folded(status.st_ino)  # new, or replaced: read whole
        if status.st_size == folded.offset:
            return folded, False
        data = _read_from(fd, folded.offset)
        whole = data.rfind(b"\n") + 1
        records = _parse(data[:whole])
        self.lines_read += len(records)
        folded.extend(records)
        folded.offset += whole
        return folded, whole < len(data)


def _whole(change: Change) -> Callable[[_Records], list[Record]]:
    """A ``change`` of the plain list as a change of the :class:`_Records` view."""
    return lambda view: change(list(view.items))


def _first_record(path: Path) -> Record | None:
    """The file's first whole record (each names its key), read no further than it."""
    try:
        with path.open("rb") as file:
            for line in file:
                if line.endswith(b"\n") and (found := _parse(line)):
                    return found[0]
    except OSError:
        return None
    return None


def _read_from(fd: int, offset: int) -> bytes:
    chunks = []
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _parse(data: bytes) -> list[Record]:
    """The whole records; a torn last line (a writer killed mid-write) is not one of them."""
    records = []
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


class StoreLedger:
    """Records in a store (Redis): one item per change, claimed by compare-and-set.

    A key's changes are numbered items of a namespace of its own (``("harness", kind,
    <key's hash>)``, keys ``000000000000``, ``000000000001``...), each holding the records one
    change appended, and created only if absent: of two writers that read the same records,
    one creates the next item and the other reads it and decides again. A reader asks only for
    the items after the last one it read (one round trip), so neither the work nor the
    transfer of an operation grows with the records before it. The key's own item (``("harness",
    kind)``, ``<key's hash>``) names the key for :meth:`sessions`, and holds the records of a
    ledger written before changes were numbered, which come first. (Workers of that earlier
    version, which rewrote that item whole at each change, must not share the store with this
    one while they run.)
    """

    def __init__(self, store: BaseStore, kind: str = "approvals") -> None:
        self.store = store
        self.kind = kind
        self.NAMESPACE = ("harness", kind)
        self._folded: dict[str, _Folded] = {}
        self._named: set[str] = set()  # keys whose own item exists
        self._lock = _KeyLocks()

    async def records(self, key: str) -> list[Record]:
        return await self.query(key, _Records, lambda view: list(view.items))

    async def change(self, key: str, change: Change) -> list[Record]:
        async with self._lock(key):
            await self._change(key, _Records, _whole(change))
            return list(self._folded[key].records)

    async def query(self, key: str, view: type[_V], ask: Callable[[_V], _T]) -> _T:
        async with self._lock(key):
            return ask((await self._caught_up(key)).view(view))

    async def update(
        self, key: str, view: type[_V], change: Callable[[_V], list[Record]]
    ) -> list[Record]:
        async with self._lock(key):
            return await self._change(key, view, change)

    def _changes(self, key: str) -> tuple[str, ...]:
        """The namespace of the key's numbered changes."""
        return (*self.NAMESPACE, _name(key))

    async def _change(
        self, key: str, view: type[_V], change: Callable[[_V], list[Record]]
    ) -> list[Record]:
        for _ in range(_ATTEMPTS):
            folded = await self._caught_up(key)
            added = [{**record, "key": key} for record in change(folded.view(view))]
            if not added:
                return added
            if key not in self._named:  # there already: nothing is written
                named = {"key": key, "records": []}
                await self.store.put_if_version(self.NAMESPACE, _name(key), named, None)
                self._named.add(key)
            number = f"{folded.offset:012d}"
            claimed = {"key": key, "records": added}
            if await self.store.put_if_version(self._changes(key), number, claimed, None):
                folded.extend(added)
                folded.offset += 1
                return added
            # Another writer made change `number` first: read it, and decide again.
        msg = f"the {self.kind} ledger of {key} kept changing under {_ATTEMPTS} attempts; try again"
        raise StorageError(msg)

    async def _caught_up(self, key: str) -> _Folded:
        """The key's records, with the changes made since the last read (one round trip)."""
        folded = self._folded.get(key)
        if folded is None:
            item = await self.store.get(self.NAMESPACE, _name(key))
            folded = _Folded()
            if item is not None:
                self._named.add(key)
                folded.extend(list(item.value.get("records", [])))  # before changes were numbered
            self._folded[key] = folded
        for item in await self.store.search(self._changes(key), offset=folded.offset):
            if item.key != f"{folded.offset:012d}":  # never: a change is claimed in order
                msg = f"the {self.kind} ledger of {key} misses change {folded.offset}"
                raise StorageError(msg)
            folded.extend(list(item.value.get("records", [])))
            folded.offset += 1
        return folded

    async def sessions(self) -> list[str]:
        items = await self.store.search(self.NAMESPACE)
        return [str(item.value.get("key")) for item in items if item.value.get("key")]


class MemoryLedger:
    """Records in this process only: for a workspace backend that is neither local nor a store."""

    def __init__(self) -> None:
        self._folded: dict[str, _Folded] = {}
        self._lock = _KeyLocks()

    async def records(self, key: str) -> list[Record]:
        return await self.query(key, _Records, lambda view: list(view.items))

    async def change(self, key: str, change: Change) -> list[Record]:
        await self.update(key, _Records, _whole(change))
        return list(self._folded[key].records)

    async def query(self, key: str, view: type[_V], ask: Callable[[_V], _T]) -> _T:
        async with self._lock(key):
            return ask(self._folded.setdefault(key, _Folded()).view(view))

    async def update(
        self, key: str, view: type[_V], change: Callable[[_V], list[Record]]
    ) -> list[Record]:
        async with self._lock(key):
            folded = self._folded.setdefault(key, _Folded())
            added = [{**record, "key": key} for record in change(folded.view(view))]
            folded.extend(added)
            return added

    async def sessions(self) -> list[str]:
        return sorted(key for key, folded in self._folded.items() if folded.records)


_in_memory: weakref.WeakKeyDictionary[WorkspaceManager, dict[str, MemoryLedger]] = (
    weakref.WeakKeyDictionary()
)


def user_key(user_id: str | None) -> str:
    """The key of a user's records in a per-user ledger (``shared``: calls without a user)."""
    return f"user:{user_id}" if user_id is not None else "shared"


def ledger_for(workspace: WorkspaceManager, kind: str, store: BaseStore | None = None) -> Ledger:
    """The ledger of ``kind`` for a workspace, out of the model's reach, beside the leases.

    A directory ``<parent>/.<workspace name>.<kind>/`` for a workspace on this machine's disk,
    the store's namespace ``("harness", kind)`` for a workspace in a store, else this
    process's memory (:meth:`WorkspaceManager.out_of_reach`).
    """
    where = workspace.out_of_reach(kind, store)
    if where is None:  # one per workspace and kind, as a directory or a store would be
        return _in_memory.setdefault(workspace, {}).setdefault(kind, MemoryLedger())
    return FileLedger(where, kind) if isinstance(where, Path) else StoreLedger(where, kind)
