"""Stopping a task without losing the stopper's own cancellation.

``task.cancel()`` followed by ``await task`` inside ``suppress(CancelledError)`` is the usual
way to stop a helper task, and it has a hole: asyncio hands a cancellation of the *awaiting*
task to the task it awaits. If the caller is cancelled while it waits (a SIGTERM between two
turns, a client that goes away), that cancel lands in the helper, which ends cancelled as it
was asked to, the ``suppress`` swallows it, and the caller goes on as if it had never been
cancelled. Waiting through :func:`asyncio.wait` keeps the two cancellations apart.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended, whatever it ends with.

    Its outcome is retrieved (so asyncio does not log it as never retrieved) and dropped; read
    ``task.result()`` afterwards for a task that returns when cancelled.

    Raises:
        asyncio.CancelledError: The caller itself was cancelled meanwhile. It is raised once
            ``task`` has ended, so nothing the task does outlives the caller's cleanup.
    """
    task.cancel()
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if not task.cancelled():
        task.exception()
    if cancelled:
        raise asyncio.CancelledError
