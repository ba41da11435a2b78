"""Key-value stores: where the remote filesystem and the shared coordination state live.

A store holds JSON-able values under ``(namespace, key)``; every item has a version (an integer
that grows with each write), so a writer can replace a value only if nobody changed it since it
read it (:meth:`BaseStore.put_if_version`, compare-and-set). That is how several workers on one
store append to the same daily log, rewrite MEMORY.md and claim the maintenance gate without
losing each other's writes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BaseStore", "Item", "Namespace"]

Namespace = tuple[str, ...]
"""Where a key lives, e.g. ``("harness", "fs", "users", "alice")``; never empty."""


@dataclass(frozen=True, slots=True)
class Item:
    """One stored value and its version.

    Versions grow with every write and never repeat within a namespace, not even for an item
    deleted and created again, so a compare-and-set on a version read earlier cannot succeed
    by accident.
    """

    namespace: Namespace
    key: str
    value: Mapping[str, Any]
    version: int


class BaseStore(ABC):
    """An async key-value store with versions.

    Implementations are safe for concurrent use by many tasks, and (shared stores) processes.
    """

    @abstractmethod
    async def get(self, namespace: Namespace, key: str) -> Item | None:
        """The item, or None."""

    @abstractmethod
    async def put(self, namespace: Namespace, key: str, value: Mapping[str, Any]) -> int:
        """Store ``value`` whatever is there; returns the new version."""

    @abstractmethod
    async def put_if_version(
        self, namespace: Namespace, key: str, value: Mapping[str, Any], version: int | None
    ) -> int | None:
        """Store ``value`` only if the item's version is ``version`` (None: only if absent).

        Returns the new version, or None when the item changed meanwhile (nothing written).
        """

    @abstractmethod
    async def delete(self, namespace: Namespace, key: str) -> None:
        """Remove the item; a missing item is not an error."""

    @abstractmethod
    async def search(
        self, namespace: Namespace, prefix: str = "", *, limit: int | None = None, offset: int = 0
    ) -> list[Item]:
        """Items of ``namespace`` whose key starts with ``prefix``, sorted by key."""

    async def aclose(self) -> None:  # noqa: B027 (optional, nothing to release by default)
        """Release connections."""
