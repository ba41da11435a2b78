"""Memory maintenance: after a call, ask the workspace's worker to consolidate the user's memory.

The request is throttled per user by the process-wide gate (``consolidation_min_gap``, 30
minutes by default) and both the request and the consolidation run in the background, after
the call's flush, so the call never waits for them. See
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

        self.maintenance.schedule(
            session_key(ctx),
            lambda: self.maintenance.request_consolidation(ctx.user_id, done),
            ctx=ctx,
        )
