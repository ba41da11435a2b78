"""Session persistence: the conversation is saved as it grows, and after every call.

Before every reasoning step (PreReasoning) it saves the call's memory as it stands: the user's
input before the first step, then each completed step (the model's turn and all its tool
results); and the session's state (:mod:`harness.kernel.state`) when a hook changed it, so what
the model is about to be shown is on record before it is shown. So a process killed in the
middle of a long call (SIGKILL, a crash, the machine going away) keeps everything completed
before the kill; saves of a grown conversation only append. On PostCall it saves how the call
ended: the reply, or for a paused call (:class:`~harness.kernel.Paused`) the model's turn whose
calls wait for approval. On Error (a failed or interrupted call) it saves what was accepted:
the user's input and every completed turn. The agent has already dropped an assistant turn
whose tool calls never got their results, and a half-streamed answer is never in memory in the
first place.
With ``replies`` (a durable agent: :mod:`harness.durable`), the model's reply is also saved
as soon as it calls tools (PostReasoning), before any of them runs, so a worker that takes the
turn over after a crash finds the calls and decides each from the ledger instead of asking the
model again.
A save survives the process being killed; with ``session_fsync`` (``"step"``, ``"turn"``:
:data:`~harness.session.SessionFsync`) it is also synced to the disk before every request or
at the end of the call (PostCall and Error), so it survives a power loss.
Writes go to ``agents/<agent>/context/<session>/messages.jsonl`` and ``state.json`` in the
user's namespace; see :class:`~harness.session.SessionStore` for the format and the atomicity
rules.

A save that fails is a failed call, never a success or a pause:
:class:`~harness.errors.TurnNotSaved`, with the reply the model gave (``exc.reply``) for a
caller that wants to show it as lost. Before
a step, nothing is asked of the model until the session holds every step before it (a tool
with side effects must never run twice after a crash); at the end, the caller is not told the
turn was kept when it was not. The file then holds what the last successful save wrote (the
user's input, and the steps before the failure): the Error that follows does not try again, so
the file never holds more than the caller was told. After a call that failed for another
reason, a failed save is logged and noted on the original error.

Priority 900, after every hook that changes memory or state (compaction at 10 rewrites memory,
workspace context at 900, added before it, sets the state of this step's prompt), so what is
saved is what the model is shown and what the call ended with. Only the approval hook (1000)
runs after it (``HOOK_ORDER`` in ``assembly.py``), and it writes the approvals ledger, never
the session. The memory
flush (5) only queues its work at PostCall; it starts once the call has returned
(:meth:`~harness.memory.MemoryMaintenance.holding`) and writes memory files, never the session.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from harness.errors import TurnNotSaved
from harness.kernel import Error, Event, Finished, Hook, PostCall, PostReasoning, PreReasoning
from harness.session import SessionStore

__all__ = ["SessionPersistenceHook"]

logger = logging.getLogger(__name__)


class SessionPersistenceHook(Hook):
    """Saves the session's messages before every step and at the end of every call."""

    priority = 900
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning, PostReasoning, PostCall, Error)

    def __init__(self, store: SessionStore, *, replies: bool = False) -> None:
        self.store = store
        self.replies = replies

    async def on_event(self, event: Event) -> None:
        if event.ctx.session_id is None:
            return
        if isinstance(event, PostReasoning) and not (self.replies and event.message.tool_uses):
            return
        if isinstance(event, Error) and isinstance(event.error, TurnNotSaved):
            return  # this hook's own failure: the file keeps what the caller was told
        try:
            # The agent holds the session's lease for the whole call: nobody else writes it.
            end = isinstance(event, PostCall | Error)  # the call ends
            # The state goes with the messages: one trip to the storage per step.
            await self.store.save(
                event.ctx, event.memory, exclusive=True, end=end, state=event.state
            )
        except Exception as exc:
            if isinstance(event, Error):  # failed already: said beside its error
                logger.error(
                    "could not save session %r of agent %r: %s",
                    event.ctx.session_id,
                    event.agent,
                    exc,
                )
                event.error.add_note(f"the session could not be saved: {exc}")
                return
            outcome = event.outcome if isinstance(event, PostCall) else None
            reply = outcome.reply if isinstance(outcome, Finished) else None
            when = (
                "the turn before the model ran"
                if outcome is None
                else "the reply"
                if reply is not None
                else "the tool calls waiting for approval"
            )
            msg = f"session {event.ctx.session_id!r} could not be saved ({when}): {exc}"
            raise TurnNotSaved(msg, reply=reply) from exc
