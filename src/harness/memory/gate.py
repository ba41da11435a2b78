"""Gates that let a named job run at most once per interval: per process, or per store.

Throttles kept in an agent's own fields reset whenever an application rebuilds the agent (many
build one per request), so they never throttle. :data:`PROCESS_GATE` lives at module level
instead, keyed by what it throttles (workspace and user), and outlives every agent. When
several workers share a store, :class:`StoreGate` keeps the claims in the store, so one worker
in the whole fleet runs the job per interval. Boundaries are inclusive: a claim exactly one
interval after the last one succeeds.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Final, Protocol

from harness.errors import StorageError
from harness.memory.config import Clock, utc_now
from harness.stores.base import BaseStore, Namespace

__all__ = ["PROCESS_GATE", "Gate", "PeriodicGate", "StoreGate"]


class Gate(Protocol):
    """Anything that grants a key at most once per interval."""

    async def claim(self, key: str, gap: timedelta) -> bool: ...


_MAX_KEYS: Final = 4096


class PeriodicGate:
    """Grants a key at most once per ``gap``; thread-safe."""

    def __init__(self, clock: Clock = utc_now) -> None:
        self.clock = clock
        self._claims: dict[str, tuple[datetime, timedelta]] = {}
        self._lock = threading.Lock()

    def try_claim(self, key: str, gap: timedelta) -> bool:
        """Claim ``key`` if it was not claimed within the last ``gap``; True when claimed."""
        now = self.clock()
        with self._lock:
            last = self._claims.get(key)
            if last is not None and now - last[0] < gap:
                return False
            self._claims[key] = (now, gap)
            if len(self._claims) > _MAX_KEYS:
                self._forget_expired(now)
            return True

    async def claim(self, key: str, gap: timedelta) -> bool:
        """:meth:`try_claim` (a :class:`Gate`)."""
        return self.try_claim(key, gap)

    def reset(self, key: str | None = None) -> None:
        """Forget one key's claim, or all of them."""
        with self._lock:
            if key is None:
                self._claims.clear()
            else:
                self._claims.pop(key, None)

    def _forget_expired(self, now: datetime) -> None:
        for key, (at, gap) in list(self._claims.items()):
            if now - at >= gap:
                del self._claims[key]


PROCESS_GATE: Final = PeriodicGate()
"""The gate shared by every agent of this process."""


class StoreGate:
    """A gate whose claims live in a shared store: one claim per interval across all workers.

    A claim is a compare-and-set of the key's last claim time; of two workers claiming at once,
    exactly one wins. A store that cannot be reached grants nothing (the job waits for the next
    interval rather than running twice).
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        namespace: Namespace = ("coordination", "periodic"),
        clock: Clock = utc_now,
        attempts: int = 5,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.clock = clock
        self.attempts = attempts

    async def claim(self, key: str, gap: timedelta) -> bool:
        try:
            for _ in range(self.attempts):
                item = await self.store.get(self.namespace, key)
                now = self.clock().timestamp()
                if item is not None and now - float(item.value["at"]) < gap.total_seconds():
                    return False
                version = item.version if item is not None else None
                value = {"at": now}
                if await self.store.put_if_version(self.namespace, key, value, version):
                    return True
        except StorageError:
            return False
        return False
