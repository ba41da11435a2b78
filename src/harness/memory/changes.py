"""Which memory files changed, for the workers of a store that each keep their own index.

With a store, every worker keeps a search index of its own (beside its local directory) and
fills it from the store. A worker writes its own changes into its index as it makes them; this
feed tells it of the others'. A worker that wrote an indexed file (a flush's daily log, a
transcript, ``memory_save``, a consolidation, a deleted session) notes the file's path here
after the write; a worker about to search reads what was noted since it last looked and indexes
just those files again. Listing the namespace instead would fetch every file in it from the
store at every search.

Per namespace (``""``: the shared files; a user's segment: theirs), one store item holds a
sequence number and the paths of the last :data:`KEPT` changes, changed by compare-and-set. A
worker that fell further behind, or has not looked yet, is told to list the namespace once.

Trust: the feed only says where to look again; what a worker indexes is read from the files
themselves, and the feed lives in the store, out of the model's reach.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from harness.errors import StorageError

if TYPE_CHECKING:
    from harness.stores.base import BaseStore

__all__ = ["KEPT", "ChangeFeed", "Changes"]

KEPT: Final = 128
"""How many of a namespace's latest changes the feed keeps."""

_NAMESPACE: Final = ("harness", "memory-changes")
_ATTEMPTS: Final = 50


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed in a namespace since a reader last looked."""

    seq: int
    """The namespace's sequence number now: what the reader has seen once it has read these."""
    paths: tuple[str, ...] | None
    """The files noted since, each once; None when the feed no longer knows them all."""


class ChangeFeed:
    """The changes of a store's memory files, per namespace."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    async def note(self, owner: str, path: str) -> None:
        """Note that ``path`` (of the namespace ``owner``) was written or deleted just now.

        Raises:
            StorageError: The store kept changing under :data:`_ATTEMPTS` attempts.
        """
        key = _key(owner)
        for attempt in range(_ATTEMPTS):
            item = await self.store.get(_NAMESPACE, key)
            seq, recent = _read(item.value if item is not None else None)
            value = {"seq": seq + 1, "recent": [*recent, [seq + 1, path]][-KEPT:]}
            version = item.version if item is not None else None
            if await self.store.put_if_version(_NAMESPACE, key, value, version) is not None:
                return
            await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        msg = f"the memory changes of {key} kept changing under {_ATTEMPTS} attempts"
        raise StorageError(msg)

    async def since(self, owner: str, seen: int | None) -> Changes:
        """What was noted in ``owner``'s namespace after ``seen`` (None: never looked)."""
        item = await self.store.get(_NAMESPACE, _key(owner))
        seq, recent = _read(item.value if item is not None else None)
        if seen is None or seen > seq:  # a new reader, or a feed that started over
            return Changes(seq, None)
        if seen == seq:
            return Changes(seq, ())
        if not recent or recent[0][0] > seen + 1:  # the oldest it missed is no longer kept
            return Changes(seq, None)
        return Changes(seq, tuple(dict.fromkeys(path for n, path in recent if n > seen)))


def _key(owner: str) -> str:
    return f"user:{owner}" if owner else "shared"


def _read(value: Any) -> tuple[int, list[tuple[int, str]]]:
    """The sequence number and the kept changes; an item the feed cannot read starts over."""
    if not isinstance(value, dict):
        return 0, []
    seq, recent = value.get("seq"), value.get("recent")
    if not isinstance(seq, int) or not isinstance(recent, list):
        return 0, []
    kept = [
        (entry[0], entry[1])
        for entry in recent
        if isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], int)
        and isinstance(entry[1], str)
    ]
    return seq, kept
