"""A process-wide gate that lets a named job run at most once per interval.

Throttles kept in an agent's own fields reset whenever an application rebuilds the agent (many
build one per request), so they never throttle. The gate lives at module level instead, keyed
by what it throttles (workspace and user), and outlives every agent. Boundaries are inclusive:
a claim exactly one interval after the last one succeeds.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Final

from harness.memory.config import Clock, utc_now

__all__ = ["PROCESS_GATE", "PeriodicGate"]

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
