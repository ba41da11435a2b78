"""Sandbox lifecycle: get a sandboxed filesystem ready before a call, clean up after it.

On :class:`~harness.kernel.PreCall` the hook calls the backend's ``start(ctx)`` (for
:class:`~harness.filesystem.SandboxFilesystem`: check once that bubblewrap works, create the
call's ``/workspace`` directory); on :class:`~harness.kernel.PostCall` and
:class:`~harness.kernel.Error` (a failed or interrupted call) its ``release(ctx)``, which kills
whatever the call's commands left running. Any backend with those two coroutines can be managed
this way; for one without them the hook does nothing. It keeps no state: the backend tracks
the call's processes by the call's context.

Priority 50: at PreCall, after the trace (0) and the MCP servers (1) and before user hooks
(100), so a user hook that runs a command when a call starts finds the sandbox ready; at
PostCall and Error, after the memory hooks (5, 6), which only queue work for later, and before
user hooks and the session's last save (900). It shares 50 with tool-result eviction, which
handles other events, so their relative order does not matter.
"""

from __future__ import annotations

from typing import ClassVar

from harness.filesystem.base import ManagedFilesystem
from harness.kernel import Error, Event, Hook, PostCall, PreCall

__all__ = ["SandboxLifecycleHook"]


class SandboxLifecycleHook(Hook):
    """Calls ``fs.start(ctx)`` as a call begins and ``fs.release(ctx)`` when it ends or fails.

    Args:
        fs: The filesystem backend; one without ``start``/``release`` is left alone.
    """

    priority = 50
    events: ClassVar[tuple[type[Event], ...]] = (PreCall, PostCall, Error)

    def __init__(self, fs: object) -> None:
        self.fs = fs

    async def on_event(self, event: Event) -> None:
        fs = self.fs
        if not isinstance(fs, ManagedFilesystem):
            return
        if isinstance(event, PreCall):
            await fs.start(event.ctx)
        else:
            await fs.release(event.ctx)
