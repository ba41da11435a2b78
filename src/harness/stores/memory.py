"""A key-value store in this process's memory: for tests, demos and single-process use.

Items live in a dict per namespace; each holds a private JSON copy of its value (so a caller
that mutates the mapping it stored or got back changes nothing in the store, and a value that
would not survive a real store's JSON round trip is refused here too) and its version. Every
operation runs without awaiting in between, so on one event loop each is atomic: that is what
makes :meth:`InMemoryStore.put_if_version` a real compare-and-set among tasks. A lock makes the
same hold for threads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from harness.stores.base import BaseStore, Item, Namespace

__all__ = ["InMemoryStore"]


def check_address(namespace: Namespace, key: str) -> None:
    """Refuse a namespace or key no store could hold, naming the bad part.

    Raises:
        ValueError: An empty namespace, a segment that is not a non-empty string, or a key
            that is not a non-empty string.
    """
    if not isinstance(namespace, tuple) or not namespace:
        msg = f"a store namespace is a non-empty tuple of strings, got {namespace!r}"
        raise ValueError(msg)
    for segment in namespace:
        if not isinstance(segment, str) or not segment:
            msg = f"namespace {namespace!r} has the segment {segment!r}; use non-empty strings"
            raise ValueError(msg)
    if not isinstance(key, str) or not key:
        msg = f"a store key is a non-empty string, got {key!r} in namespace {namespace!r}"
        raise ValueError(msg)


def check_window(limit: int | None, offset: int) -> None:
    """Refuse a negative ``limit`` or ``offset`` of a search.

    Raises:
        ValueError: Naming the bad argument.
    """
    if limit is not None and limit < 0:
        msg = f"search limit must be None or >= 0, got {limit}"
        raise ValueError(msg)
    if offset < 0:
        msg = f"search offset must be >= 0, got {offset}"
        raise ValueError(msg)


def check_version(version: int | None) -> None:
    """Refuse a version no item can have (versions start at 1; None means absent).

    Raises:
        ValueError: Naming the bad version.
    """
    if version is not None and (isinstance(version, bool) or version < 1):
        msg = f"an item's version is an int >= 1 (None for an absent item), got {version!r}"
        raise ValueError(msg)


def encode_value(namespace: Namespace, key: str, value: Mapping[str, Any]) -> str:
    """The JSON text of ``value``, the form every store keeps.

    Raises:
        TypeError: ``value`` is not a mapping, or holds something JSON cannot represent.
    """
    if not isinstance(value, Mapping):
        msg = f"a store value is a mapping, got {type(value).__name__} for {namespace!r}/{key!r}"
        raise TypeError(msg)
    try:
        return json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        msg = f"the value for {namespace!r}/{key!r} is not JSON-serializable: {exc}"
        raise TypeError(msg) from exc


class InMemoryStore(BaseStore):
    """A :class:`~harness.stores.BaseStore` in this process's memory; nothing is persisted.

    Versions start at 1 for a new item (also one re-created after a delete) and grow by one
    with each write. ``search`` is sorted by key (code point order, like the Redis store).
    """

    def __init__(self) -> None:
        self._items: dict[Namespace, dict[str, tuple[str, int]]] = {}
        # Versions come from a counter per namespace, so a deleted and re-created item never
        # gets an old version back (a stale compare-and-set cannot succeed).
        self._versions: dict[Namespace, int] = {}
        self._lock = threading.Lock()

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        check_address(namespace, key)
        with self._lock:
            found = self._items.get(namespace, {}).get(key)
        if found is None:
            return None
        return Item(namespace, key, json.loads(found[0]), found[1])

    async def put(self, namespace: Namespace, key: str, value: Mapping[str, Any]) -> int:
        check_address(namespace, key)
        text = encode_value(namespace, key, value)
        with self._lock:
            return self._write(namespace, key, text)

    async def put_if_version(
        self, namespace: Namespace, key: str, value: Mapping[str, Any], version: int | None
    ) -> int | None:
        check_address(namespace, key)
        check_version(version)
        text = encode_value(namespace, key, value)
        with self._lock:
            found = self._items.get(namespace, {}).get(key)
            current = None if found is None else found[1]
            if current != version:
                return None
            return self._write(namespace, key, text)

    async def delete(self, namespace: Namespace, key: str) -> None:
        check_address(namespace, key)
        with self._lock:
            items = self._items.get(namespace)
            if items is not None:
                items.pop(key, None)
                if not items:
                    del self._items[namespace]

    async def search(
        self, namespace: Namespace, prefix: str = "", *, limit: int | None = None, offset: int = 0
    ) -> list[Item]:
        check_address(namespace, "-")
        check_window(limit, offset)
        with self._lock:
            matching = sorted(
                (key, found)
                for key, found in self._items.get(namespace, {}).items()
                if key.startswith(prefix)
            )
        end = None if limit is None else offset + limit
        return [
            Item(namespace, key, json.loads(text), version)
            for key, (text, version) in matching[offset:end]
        ]

    def _write(self, namespace: Namespace, key: str, text: str) -> int:
        items = self._items.setdefault(namespace, {})
        version = self._versions.get(namespace, 0) + 1
        self._versions[namespace] = version
        items[key] = (text, version)
        return version
