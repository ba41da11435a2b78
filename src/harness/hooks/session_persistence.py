"""Session persistence: the conversation is saved as it grows, and after every call.

Before every reasoning step (PreReasoning) it saves the call's memory as it stands: the user's
input before the first step, then each completed step (the model's turn and all its tool
results). So a process killed in the middle of a long call (SIGKILL, a crash, the machine
going away) keeps everything completed before the kill; saves of a grown conversation only
append. On PostCall it saves the reply. On Error (a failed or interrupted call) it saves what
was accepted: the user's input and every completed turn. The agent has already dropped an
assistant turn whose tool calls never got their results, and a half-streamed answer is never in
memory in the first place.
Writes go to ``agents/<agent>/context/<session>/messages.jsonl`` in the user's namespace; see
:class:`~harness.session.SessionStore` for the format and the atomicity rules.

A save that fails after a successful call is logged as an error and does not take the reply
away from the caller; after a failed call it is logged and noted on the original error.

Priority 900: it runs after every other hook (memory flush at 5 writes memory files before the
snapshot), so what is saved is what the call ended with.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from harness.kernel import Error, Event, Hook, PostCall, PreReasoning
from harness.session import SessionStore

__all__ = ["SessionPersistenceHook"]

logger = logging.getLogger(__name__)


class SessionPersistenceHook(Hook):
    """Saves the session's messages before every step and at the end of every call."""

    priority = 900
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning, PostCall, Error)

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    async def on_event(self, event: Event) -> None:
        if event.ctx.session_id is None:
            return
        try:
            # The agent holds the session's lease for the whole call: nobody else writes it.
            await self.store.save(event.ctx, event.memory, exclusive=True)
        except Exception as exc:
            logger.error(
                "could not save session %r of agent %r: %s", event.ctx.session_id, event.agent, exc
            )
            if isinstance(event, Error):
                event.error.add_note(f"the session could not be saved: {exc}")
