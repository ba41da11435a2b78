"""The turn's activity: continue a session's turn from where its store says it is.

Every run of :meth:`TurnActivities.segment` (the first, a retry on another worker after this
one died, a continuation after decisions) reads the session and decides what is left of the
turn from it alone:

- the turn's input is not in the session (no message carries the turn's id,
  :data:`~harness.durable.refs.TURN_KEY`): the turn starts with it;
- the last assistant turn has calls without results: the agent's approval gate decides each
  from its journal (a durable agent journals every call, ``durable=True``): never started, it
  runs; finished, its recorded result; started and not finished, "outcome unknown" unless its
  tool is idempotent. Then the turn goes on;
- the last message is the model's answer: the turn is over; nothing is asked again;
- otherwise (the input, or tool results, last): the model is asked for the next step.

So a model call whose reply was saved is never made again (a durable agent saves a reply that
calls tools before they run), and no tool call runs twice. The activity heartbeats every third
of its heartbeat timeout while the turn runs (a slow model call or a long tool call included),
which is how Temporal learns that its worker died, and how a cancel reaches it.

Trust boundary: what runs is the worker's agent, built by the operator in the worker process;
the workflow passes only which session and turn (and the turn's input text, which is the
user's message, as over HTTP).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from temporalio import activity

from harness.agent import HarnessAgent
from harness.context import RuntimeContext
from harness.durable.refs import TURN_KEY, SegmentEnd, TurnRef
from harness.durable.workflows import SEGMENT
from harness.kernel import (
    Cancelled,
    Failed,
    Msg,
    Outcome,
    StreamItem,
    pending_of,
    unanswered_calls,
)
from harness.kernel.cancelling import cancel_and_wait
from harness.session import EVERY_CALL

__all__ = ["TurnActivities"]


class TurnActivities:
    """The activities a worker runs for ``agent`` (a durable one: ``durable=True``)."""

    def __init__(self, agent: HarnessAgent, *, heartbeat_seconds: float) -> None:
        if not agent.options.durable:
            msg = (
                f"agent {agent.name!r} is not durable; a worker of the durable engine runs "
                "agents made with durable=True"
            )
            raise ValueError(msg)
        self.agent = agent
        self.heartbeat_seconds = heartbeat_seconds

    @activity.defn(name=SEGMENT)
    async def segment(self, ref: TurnRef) -> SegmentEnd:
        """Continue the turn ``ref`` names until it finishes, pauses or fails (module docs)."""
        if ref.agent != self.agent.name:
            msg = f"this worker runs agent {self.agent.name!r}, not {ref.agent!r}"
            raise ValueError(msg)
        ctx = RuntimeContext(session_id=ref.session_id, user_id=ref.user_id)
        beating = asyncio.create_task(self._heartbeat())
        try:
            outcome: Outcome | None = None
            async with contextlib.aclosing(await self._continue(ref, ctx)) as items:
                async for item in items:
                    if isinstance(item, Outcome):
                        outcome = item
        finally:
            await cancel_and_wait(beating)
        return _end(outcome)

    async def _continue(
        self, ref: TurnRef, ctx: RuntimeContext
    ) -> AsyncGenerator[StreamItem, None]:
        memory = await self.agent.sessions.load(ctx, waiting=EVERY_CALL)
        accepted = any(message.metadata.get(TURN_KEY) == ref.turn for message in memory)
        if ref.text is not None and not accepted:
            turn = Msg(role="user", content=ref.text, metadata={TURN_KEY: ref.turn})
            return self.agent.stream(turn, ctx=ctx)
        if unanswered_calls(memory) or (memory and memory[-1].role == "assistant"):
            return self.agent.resume_stream(ctx=ctx)  # decides the calls, or the answer stands
        return self.agent.stream(None, ctx=ctx)

    async def _heartbeat(self) -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(self.heartbeat_seconds / 3)


def _end(outcome: Outcome | None) -> SegmentEnd:
    if pending := pending_of(outcome):
        return SegmentEnd("paused", pending=[str(request.get("id")) for request in pending])
    match outcome:
        case Failed(error=error):
            return SegmentEnd("failed", error=f"{type(error).__name__}: {error}")
        case Cancelled():
            return SegmentEnd("cancelled")
        case None:
            return SegmentEnd("failed", error="the turn ended without an outcome")
        case _:
            return SegmentEnd("finished")
