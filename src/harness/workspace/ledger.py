"""Out-of-reach ledgers: append-only records per key that the model cannot write.

The harness keeps what it must be able to believe (approvals decided by a person, where a
memory entry came from) where neither the file tools nor the sandbox reach: beside the
workspace (``<parent>/.<workspace name>.<kind>/``, one JSON-lines file per key) for a
workspace on this machine's disk, in the store (Redis, one item per key under ``("harness",
kind)``) for a workspace in a store, else in this process's memory.

Every change is one atomic step: the key's records are read, the change decides what to append
from them, and the append happens before anyone else can read (an ``flock`` and an ``fsync``
on the local disk, a compare-and-set in a store). A torn last line (a writer killed
mid-write) is not a record.
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
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import StorageError

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace.manager import WorkspaceManager

__all__ = ["Change", "FileLedger", "Ledger", "MemoryLedger", "Record", "StoreLedger", "ledger_for"]

Record = dict[str, Any]
Change = Callable[[list[Record]], list[Record]]
"""Given a session's records, the records to append (none: nothing changes)."""

_ATTEMPTS = 50


class Ledger(Protocol):
    """Append-only records per key, changed one atomic step at a time."""

    async def records(self, key: str) -> list[Record]:
        """The key's records, oldest first."""
        ...

    async def change(self, key: str, change: Change) -> list[Record]:
        """Append what ``change`` returns for the current records, atomically; returns them all."""
        ...

    async def sessions(self) -> list[str]:
        """Every key with records."""
        ...


def _name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:40]


class FileLedger:
    """Records as JSON lines, one file per key in ``directory`` (beside the workspace)."""

    def __init__(self, directory: Path, kind: str = "approvals") -> None:
        self.directory = directory
        self.kind = kind

    def path(self, key: str) -> Path:
        """The file of ``key``'s records."""
        return self.directory / f"{_name(key)}.jsonl"

    async def records(self, key: str) -> list[Record]:
        return await asyncio.to_thread(self._read, self.path(key))

    async def change(self, key: str, change: Change) -> list[Record]:
        return await asyncio.to_thread(self._change, key, change)

    async def sessions(self) -> list[str]:
        def keys() -> list[str]:
            found = []
            for path in sorted(self.directory.glob("*.jsonl")) if self.directory.exists() else []:
                for record in self._read(path)[:1]:
                    if isinstance(record.get("key"), str):
                        found.append(record["key"])
            return found

        return await asyncio.to_thread(keys)

    def _change(self, key: str, change: Change) -> list[Record]:
        path = self.path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
        except OSError as exc:
            msg = f"cannot open the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = _parse(_read_all(fd))
            added = [{**record, "key": key} for record in change(current)]
            if added:
                data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in added).encode()
                os.write(fd, data)
                os.fsync(fd)
            return current + added
        except OSError as exc:
            msg = f"cannot write the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        finally:
            os.close(fd)  # closing releases the lock

    def _read(self, path: Path) -> list[Record]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return []
        except OSError as exc:
            msg = f"cannot read the {self.kind} ledger {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return _parse(_read_all(fd))
        finally:
            os.close(fd)


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
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
    """Records as one item per key in a store (Redis), changed by compare-and-set."""

    def __init__(self, store: BaseStore, kind: str = "approvals") -> None:
        self.store = store
        self.kind = kind
        self.NAMESPACE = ("harness", kind)

    async def records(self, key: str) -> list[Record]:
        item = await self.store.get(self.NAMESPACE, _name(key))
        return list(item.value.get("records", [])) if item is not None else []

    async def change(self, key: str, change: Change) -> list[Record]:
        for _ in range(_ATTEMPTS):
            item = await self.store.get(self.NAMESPACE, _name(key))
            current = list(item.value.get("records", [])) if item is not None else []
            added = [{**record, "key": key} for record in change(current)]
            if not added:
                return current
            value = {"key": key, "records": current + added}
            version = item.version if item is not None else None
            if await self.store.put_if_version(self.NAMESPACE, _name(key), value, version):
                return current + added
        msg = f"the {self.kind} ledger of {key} kept changing under {_ATTEMPTS} attempts; try again"
        raise StorageError(msg)

    async def sessions(self) -> list[str]:
        items = await self.store.search(self.NAMESPACE)
        return [str(item.value.get("key")) for item in items if item.value.get("key")]


class MemoryLedger:
    """Records in this process only: for a workspace backend that is neither local nor a store."""

    def __init__(self) -> None:
        self._records: dict[str, list[Record]] = {}
        self._lock = asyncio.Lock()

    async def records(self, key: str) -> list[Record]:
        return list(self._records.get(key, []))

    async def change(self, key: str, change: Change) -> list[Record]:
        async with self._lock:
            current = self._records.setdefault(key, [])
            current.extend({**record, "key": key} for record in change(list(current)))
            return list(current)

    async def sessions(self) -> list[str]:
        return sorted(self._records)


_in_memory: weakref.WeakKeyDictionary[WorkspaceManager, dict[str, MemoryLedger]] = (
    weakref.WeakKeyDictionary()
)


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
