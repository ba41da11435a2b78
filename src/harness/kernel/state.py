"""Session state: what hooks keep about one conversation besides its messages.

A conversation is more than its messages: a hook may have to remember, from one call to the
next, what it already told the model (the workspace context hook keeps the memory files the
session's system prompt shows, and the change notes it inserted since). Kept in a hook's own
fields, that would live only in the process that ran the call, and the next call of the session
(another ``harness run``, another serve worker) would build a different prompt. So it lives
here, next to ``memory``, and whoever keeps the conversation saves and restores it with the
messages (``HarnessAgent`` does, through :class:`~harness.session.SessionStore`).

A hook declares the state it keeps by its ``state_key`` (:class:`~harness.kernel.Hook`) and
keeps one JSON value (dicts, lists, strings, numbers, booleans, None) under it. Values are
treated as values, like messages: a hook that changes its state sets a new value, and never
edits the one it got, since that object may also be the store's record of what it saved. Beside
the value, a hook may leave the object it decoded the value into (``cache``), so a process does
not decode the same value at every step; the cache never leaves the process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SessionState"]


class SessionState:
    """The JSON values hooks keep for one conversation, by each hook's ``state_key``."""

    __slots__ = ("_cache", "_values", "changed")

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = dict(values or {})
        self._cache: dict[str, tuple[Any, object]] = {}
        self.changed = False
        """A value was set since the state was loaded or last saved."""

    def get(self, key: str) -> Any:
        """The value kept under ``key``; None if there is none."""
        return self._values.get(key)

    def set(self, key: str, value: Any, *, cache: object = None) -> None:
        """Keep ``value`` under ``key`` (and what it was decoded from, or into, as ``cache``)."""
        self._values[key] = value
        if cache is None:
            self._cache.pop(key, None)
        else:
            self._cache[key] = (value, cache)
        self.changed = True

    def cached(self, key: str) -> object | None:
        """The object left with the current value of ``key``; None once the value changed."""
        entry = self._cache.get(key)
        if entry is None or entry[0] is not self._values.get(key):
            return None
        return entry[1]

    def remember(self, key: str, cache: object) -> None:
        """Leave ``cache`` with the current value of ``key`` without changing the value."""
        self._cache[key] = (self._values.get(key), cache)

    def values(self) -> dict[str, Any]:
        """The values, to save (a new dict; the values themselves are shared)."""
        return dict(self._values)

    def copy(self) -> SessionState:
        """An unchanged state with the same values and caches (for the next call)."""
        state = SessionState(self._values)
        state._cache = dict(self._cache)
        return state

    def __repr__(self) -> str:
        return f"SessionState(keys={sorted(self._values)!r}, changed={self.changed})"
