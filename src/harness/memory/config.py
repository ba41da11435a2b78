"""Memory settings: one frozen dataclass with every default visible."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["DEFAULT_MEMORY", "Clock", "MemoryConfig", "utc_now"]

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime; injected where tests need to move time."""


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryConfig:
    """How the agent remembers.

    Args:
        flush: Extract durable facts into the daily log after every call.
        auto_consolidate: Request a background consolidation after calls (throttled); False
            leaves it to the periodic pass and ``harness memory consolidate``.
        offload: Keep a transcript of every message under ``agents/<agent>/sessions/``.
        tools: Offer memory_search, memory_get, memory_save and the session tools.
        index: Keep the full-text search index up to date (memory_search falls back to a
            keyword scan without it).
        max_memory_tokens: MEMORY.md's size limit when consolidation rewrites it.
        consolidation_max_output_tokens: The longest answer consolidation asks of the model
            (its own budget, whatever ``max_tokens`` the model has for chatting); None: room
            for the current file and the new entries (a third of their characters) plus 512.
        memory_history: How many earlier versions of MEMORY.md each namespace keeps (under
            ``memory/.history/``; ``harness memory history`` lists them, ``restore`` puts one
            back).
        consolidation_min_gap: At most one consolidation requested by calls per this interval,
            per user, across agent rebuilds.
        maintenance_interval: How often the maintenance worker runs its full pass.
        daily_retention_days: Daily logs older than this move to ``memory/archive/``.
        session_retention_days: Session transcripts, background task records and results,
            traces and subagent registries not written for this long are deleted.
    """

    flush: bool = True
    auto_consolidate: bool = True
    offload: bool = True
    tools: bool = True
    index: bool = True
    max_memory_tokens: int = 4000
    consolidation_max_output_tokens: int | None = None
    memory_history: int = 10
    consolidation_min_gap: timedelta = timedelta(minutes=30)
    maintenance_interval: timedelta = timedelta(hours=6)
    daily_retention_days: int = 90
    session_retention_days: int = 180

    def __post_init__(self) -> None:
        limits = ("max_memory_tokens", "memory_history", "daily_retention_days")
        for name in (*limits, "session_retention_days"):
            if getattr(self, name) < 1:
                msg = f"MemoryConfig.{name} must be at least 1, got {getattr(self, name)}"
                raise ValueError(msg)
        output = self.consolidation_max_output_tokens
        if output is not None and output < 1:
            msg = f"MemoryConfig.consolidation_max_output_tokens must be at least 1, got {output}"
            raise ValueError(msg)
        if self.consolidation_min_gap < timedelta(0):
            gap = self.consolidation_min_gap
            msg = f"MemoryConfig.consolidation_min_gap must not be negative, got {gap}"
            raise ValueError(msg)
        if self.maintenance_interval <= timedelta(0):
            every = self.maintenance_interval
            msg = f"MemoryConfig.maintenance_interval must be positive, got {every}"
            raise ValueError(msg)


DEFAULT_MEMORY: Final = MemoryConfig()
"""Memory with every default."""
