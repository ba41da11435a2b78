"""Memory flush: after every call, new facts go to the daily log, new messages to the transcript.

The search index then catches up with both.

Reads the call's memory at PostCall (the state the call ended with, never a view captured
earlier) and writes ``memory/YYYY-MM-DD.md`` and ``agents/<agent>/sessions/<session>.jsonl``
(and ``.log.jsonl``, ``sessions.json``) in the user's namespace; see
:mod:`harness.memory.flush` and :mod:`harness.memory.transcript`. A flush or an offload that
fails is logged and never fails the call; the flush is retried with the same messages at the
next call.

Priority 5: right after the trace hook, so memory files are written before maintenance (6)
asks for a consolidation and before session persistence (900) snapshots the call.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from harness.kernel import Event, Hook, PostCall
from harness.memory.flush import MemoryFlushManager
from harness.memory.maintenance import MemoryMaintenance
from harness.memory.transcript import TranscriptWriter

__all__ = ["MemoryFlushHook"]

logger = logging.getLogger(__name__)


class MemoryFlushHook(Hook):
    """Flushes facts and offloads the transcript at the end of every call."""

    priority = 5
    events: ClassVar[tuple[type[Event], ...]] = (PostCall,)

    def __init__(
        self,
        *,
        flush: MemoryFlushManager | None,
        transcript: TranscriptWriter | None,
        maintenance: MemoryMaintenance | None = None,
    ) -> None:
        self.flush = flush
        self.transcript = transcript
        self.maintenance = maintenance

    async def on_event(self, event: Event) -> None:
        ctx = event.ctx
        if self.flush is not None:
            try:
                result = await self.flush.flush(ctx, event.memory)
            except Exception as exc:
                logger.warning(
                    "memory flush for session %r failed, will retry next call: %s",
                    ctx.session_id,
                    exc,
                )
            else:
                if result.path and self.maintenance is not None:
                    await self._index(result.path)
        if self.transcript is not None:
            try:
                appended = await self.transcript.offload(ctx, event.memory)
            except Exception as exc:
                logger.warning("transcript offload for session %r failed: %s", ctx.session_id, exc)
            else:
                if appended and self.maintenance is not None:
                    log = self.transcript.transcript_path(ctx).removesuffix(".jsonl") + ".log.jsonl"
                    await self._index(log)

    async def _index(self, path: str) -> None:
        assert self.maintenance is not None
        try:
            await self.maintenance.index_file(path)
        except Exception as exc:
            logger.warning("could not index %s (a later re-index will): %s", path, exc)
