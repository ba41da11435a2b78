"""Memory maintenance: after a call, ask the workspace's worker to consolidate the user's memory.

The request is throttled per user by the process-wide gate (``consolidation_min_gap``, 30
minutes by default) and both the request and the consolidation run in the background, after
the call's flush, so the call never waits for them. The consolidation is part of the work the
call leaves behind (its session's queue ends when it has run), so a deleted session waits for
it and its trace record is never written after the session's files are gone. See
:mod:`harness.memory.maintenance` for the worker and its periodic full pass.

Priority 6: after the flush (5) has written today's facts, so the consolidation sees them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from harness.context import RuntimeContext
from harness.kernel import Event, Hook, PostCall
from harness.memory.consolidation import ConsolidationResult
from harness.memory.maintenance import MemoryMaintenance
from harness.session.keys import session_key

__all__ = ["MemoryMaintenanceHook"]


class MemoryMaintenanceHook(Hook):
    """Requests a throttled background consolidation after every call."""

    priority = 6
    events: ClassVar[tuple[type[Event], ...]] = (PostCall,)

    def __init__(
        self,
        maintenance: MemoryMaintenance,
        *,
        on_consolidated: Callable[[RuntimeContext, ConsolidationResult], Awaitable[None]]
        | None = None,
    ) -> None:
        self.maintenance = maintenance
        self.on_consolidated = on_consolidated

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PostCall)
        if event.outcome.pending:
            return  # the turn waits for decisions: its memory is looked after once it ends
        # In the session's queue of background work, after this call's flush (hook 5).
        ctx, report = event.ctx, self.on_consolidated

        async def done(result: ConsolidationResult) -> None:
            if report is not None:
                await report(ctx, result)

        async def consolidate() -> None:
            ran = await self.maintenance.request_consolidation(ctx.user_id, done)
            if ran is not None:  # part of the call's work: a session deleted waits for it
                await ran

        self.maintenance.schedule(session_key(ctx), consolidate, ctx=ctx)
