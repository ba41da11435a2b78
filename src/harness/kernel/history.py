"""A conversation that counts its rewrites, so a saver appends what grew without comparing.

A call's memory only grows while the agent works: the user's input, then each step. Hooks may
rewrite it (a compaction replaces its beginning, ``memory[:] = ...``; a hook replaces one
message, ``memory[3] = ...``). :class:`History` is a ``list`` that tells the two apart:
``append`` and ``extend`` (and ``+=``) only grow it, every other change adds one to
:attr:`History.rewrites`. A saver that remembers the list, its length and its ``rewrites`` at the
last save knows, in constant time, that the messages saved then are still its first ones, and
writes only those after them; on any rewrite it writes the whole conversation again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex, overload

from harness.kernel.message import Msg

__all__ = ["History"]


class History(list[Msg]):
    """A list of messages with a count of the changes that did more than add at the end."""

    __slots__ = ("rewrites",)

    def __init__(self, messages: Iterable[Msg] = ()) -> None:
        super().__init__(messages)
        self.rewrites = 0
        """Changes other than ``append``/``extend``/``+=`` made since the list was built."""

    @overload
    def __setitem__(self, index: SupportsIndex, value: Msg, /) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Msg], /) -> None: ...
    def __setitem__(self, index: Any, value: Any, /) -> None:
        self.rewrites += 1
        super().__setitem__(index, value)

    def __delitem__(self, index: SupportsIndex | slice, /) -> None:
        self.rewrites += 1
        super().__delitem__(index)

    def __imul__(self, count: SupportsIndex, /) -> History:
        self.rewrites += 1
        super().__imul__(count)
        return self

    def insert(self, index: SupportsIndex, value: Msg, /) -> None:
        self.rewrites += 1
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1, /) -> Msg:
        self.rewrites += 1
        return super().pop(index)

    def remove(self, value: Msg, /) -> None:
        self.rewrites += 1
        super().remove(value)

    def clear(self) -> None:
        self.rewrites += 1
        super().clear()

    def reverse(self) -> None:
        self.rewrites += 1
        super().reverse()

    def sort(self, *, key: Callable[[Msg], Any] | None = None, reverse: bool = False) -> None:
        self.rewrites += 1
        super().sort(key=key, reverse=reverse)
