"""Memory flush: after every call, new messages go to the transcript, then new facts to the log.

The work runs in the background, in order per session, so the call returns without waiting
for the memory model; searches and ``aclose()`` wait for it (see
:meth:`~harness.memory.MemoryMaintenance.schedule`). Both steps catch up from the whole
conversation, so nothing is lost if the process stops first: the next call flushes what no
flush has seen and offloads what the transcript lacks.

Takes the call's memory at PostCall (the state the call ended with, never a view captured
earlier) and writes ``memory/YYYY-MM-DD.md`` and ``agents/<agent>/sessions/<session>.jsonl``
(and ``.log.jsonl``, ``sessions.json``) in the user's namespace; see
:mod:`harness.memory.flush` and :mod:`harness.memory.transcript`. A flush or an offload that
fails is logged and never fails the call; the flush is retried with the same messages at the
next call.

Priority 5: right after the trace hook, so this call's flush is queued before maintenance (6)
queues its consolidation request behind it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar

from harness.context import RuntimeContext
from harness.kernel import Event, Hook, Msg, PostCall
from harness.memory.flush import FlushResult, MemoryFlushManager
from harness.memory.maintenance import MemoryMaintenance
from harness.memory.provenance import Trust, prompt_trust
from harness.memory.transcript import TranscriptWriter
from harness.session.keys import session_key

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
        maintenance: MemoryMaintenance,
        on_flush: Callable[[RuntimeContext, FlushResult, float], Awaitable[object]] | None = None,
    ) -> None:
        self.on_flush = on_flush  # e.g. the trace's record of the flush
        self.flush = flush
        self.transcript = transcript
        self.maintenance = maintenance

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PostCall)
        if event.outcome.pending:
            return  # the turn waits for decisions: it is recorded once it ends
        ctx = event.ctx
        messages = list(event.memory)  # the conversation as this call ended it
        shown = prompt_trust(event.state)  # and the memory its system prompt showed
        self.maintenance.schedule(
            session_key(ctx), lambda: self._record(ctx, messages, shown), ctx=ctx
        )

    async def _record(self, ctx: RuntimeContext, messages: list[Msg], shown: Trust) -> None:
        # The transcript first: it is the call's whole record and costs one append, while the
        # flush waits for a model (seconds, tens of them on a small one); a process stopped
        # meanwhile keeps the transcript, and the flush is retried at the next call.
        if self.transcript is not None:
            try:
                appended = await self.transcript.offload(ctx, messages)
            except Exception as exc:
                logger.warning("transcript offload for session %r failed: %s", ctx.session_id, exc)
            else:
                if appended:
                    self.maintenance.schedule_index(self.transcript.log_path(ctx))
        if self.flush is not None:
            started = time.perf_counter()
            try:
                result = await self.flush.flush(ctx, messages, shown=shown)
            except Exception as exc:
                logger.warning(
                    "memory flush for session %r failed, will retry next call: %s",
                    ctx.session_id,
                    exc,
                )
            else:
                if result.path:
                    self.maintenance.schedule_index(result.path)
                if self.on_flush is not None:
                    await self.on_flush(ctx, result, time.perf_counter() - started)
