"""Memory maintenance: after a call, ask the workspace's worker to consolidate the user's memory.

The request is throttled per user by the process-wide gate (``consolidation_min_gap``, 30
minutes by default) and runs in the background worker, so the call never waits for it. See
:mod:`harness.memory.maintenance` for the worker and its periodic full pass.

Priority 6: after the flush (5) has written today's facts, so the consolidation sees them.
"""

from __future__ import annotations

from typing import ClassVar

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
        await self.maintenance.request_consolidation(event.ctx.user_id)
