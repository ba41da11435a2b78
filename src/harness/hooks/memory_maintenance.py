"""Memory maintenance: after a call, ask the workspace's worker to consolidate the user's memory.

The request is throttled per user by the process-wide gate (``consolidation_min_gap``, 30
minutes by default) and both the request and the consolidation run in the background, after
the call's flush, so the call never waits for them. See
:mod:`harness.memory.maintenance` for the worker and its periodic full pass.

Priority 6: after the flush (5) has written today's facts, so the consolidation sees them.
"""

from __future__ import annotations

from typing import ClassVar

from harness.hooks.memory_flush import session_key
from harness.kernel import Event, Hook, PostCall
from harness.memory.maintenance import MemoryMaintenance

__all__ = ["MemoryMaintenanceHook"]


class MemoryMaintenanceHook(Hook):
    """Requests a throttled background consolidation after every call."""

    priority = 6
    events: ClassVar[tuple[type[Event], ...]] = (PostCall,)

    def __init__(self, maintenance: MemoryMaintenance) -> None:
        self.maintenance = maintenance

    async def on_event(self, event: Event) -> None:
        # In the session's queue of background work, after this call's flush (hook 5).
        user_id = event.ctx.user_id
        self.maintenance.schedule(
            session_key(event.ctx), lambda: self.maintenance.request_consolidation(user_id)
        )
