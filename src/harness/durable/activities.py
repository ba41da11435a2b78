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

A background task runs the same way (:meth:`TurnActivities.task`): its child's session is
continued from the store with the task's id marking its input, and its record is settled
(:meth:`~harness.subagents.TaskRepository.run_here`) with the child's reply, its failure, or
its pause. While it runs, a cancel asked of its record (``task_cancel``, ``harness tasks
cancel``) stops it at the next heartbeat.

Trust boundary: what runs is the worker's agent, built by the operator in the worker process;
the workflow passes only which session and turn (and the turn's input text, which is the
user's message, as over HTTP).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable

from temporalio import activity

from harness.agent import HarnessAgent
from harness.context import RuntimeContext
from harness.durable.refs import TURN_KEY, SegmentEnd, TaskRef, TurnRef
from harness.durable.workflows import SEGMENT, TASK
from harness.kernel import (
    Cancelled,
    Ended,
    Failed,
    Msg,
    Outcome,
    Paused,
    StreamItem,
    ended,
    pending_of,
    unanswered_calls,
)
from harness.kernel.cancelling import cancel_and_wait
from harness.session import EVERY_CALL
from harness.session.lease import LEASE_HOLDER
from harness.structured import OutputSpec

__all__ = ["Observe", "TurnActivities"]

Observe = Callable[
    [TurnRef, RuntimeContext, AsyncGenerator[StreamItem, None]], AsyncGenerator[StreamItem, None]
]
"""Sees a run's items as they come and yields them on: how ``harness serve`` keeps a turn's
events in the session's turn log, where a client reads them from any server."""


class TurnActivities:
    """The activities a worker runs for ``agent`` (a durable one: ``durable=True``)."""

    def __init__(
        self, agent: HarnessAgent, *, heartbeat_seconds: float, observe: Observe | None = None
    ) -> None:
        if not agent.options.durable:
            msg = (
                f"agent {agent.name!r} is not durable; a worker of the durable engine runs "
                "agents made with durable=True"
            )
            raise ValueError(msg)
        self.agent = agent
        self.heartbeat_seconds = heartbeat_seconds
        self.observe = observe

    @activity.defn(name=SEGMENT)
    async def segment(self, ref: TurnRef) -> SegmentEnd:
        """Continue the turn ``ref`` names until it finishes, pauses or fails (module docs)."""
        if ref.agent != self.agent.name:
            msg = f"this worker runs agent {self.agent.name!r}, not {ref.agent!r}"
            raise ValueError(msg)
        ctx = RuntimeContext(session_id=ref.session_id, user_id=ref.user_id)
        info = activity.info()
        # Every attempt of this run of the turn is one holder: a retry after its worker died
        # takes the session's lease over at once.
        LEASE_HOLDER.set(f"turn:{info.workflow_id}:{info.workflow_run_id}:{ref.stream}")
        beating = asyncio.create_task(self._heartbeat())
        try:
            outcome: Outcome | None = None
            output = OutputSpec(ref.output_schema, ref.output_name) if ref.output_schema else None
            items = await continued(self.agent, ref.turn, ref.text, ctx, output)
            if self.observe is not None:
                items = self.observe(ref, ctx, items)
            async with contextlib.aclosing(items) as items:
                async for item in items:
                    if isinstance(item, Outcome):
                        outcome = item
        finally:
            await cancel_and_wait(beating)
        return _end(outcome)

    @activity.defn(name=TASK)
    async def task(self, ref: TaskRef) -> str:
        """Run the background task ``ref`` names to its end; the status it ends with."""
        tasks = self.agent.tasks
        tools = self.agent.subagents.spawning if self.agent.subagents is not None else None
        record = await tasks.get(ref.task_id, ref.user_id) if tasks is not None else None
        if tasks is None or tools is None or record is None:
            return "unknown"  # its agent has no subagents here, or its record is gone
        info = activity.info()
        LEASE_HOLDER.set(f"task:{info.workflow_id}:{info.workflow_run_id}")
        running = asyncio.current_task()
        assert running is not None

        async def cancelled() -> bool:  # a cancel asked of the record, from anywhere
            now = await tasks.get(ref.task_id, ref.user_id)
            return now is not None and now.cancel_requested

        async def work() -> str | Paused:
            child, child_ctx, told = await tools.task_child(record, ref.depth)
            if not isinstance(child, HarnessAgent):  # a factory's own agent: no journal
                outcome: Ended = await child.call(ref.text, ctx=child_ctx)
            else:
                outcome = await ended(await continued(child, ref.task_id, ref.text, child_ctx))
            return told(outcome)

        beating = asyncio.create_task(self._heartbeat(cancelled, running.cancel))
        try:
            ended_as = await tasks.run_here(record, work, handed_over=activity.is_worker_shutdown)
        finally:
            await cancel_and_wait(beating)
        return ended_as.status.value

    async def _heartbeat(
        self,
        cancelled: Callable[[], Awaitable[bool]] | None = None,
        cancel: Callable[[], object] | None = None,
    ) -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(self.heartbeat_seconds / 3)
            if cancelled is not None and cancel is not None and await cancelled():
                cancel()
                return


async def continued(
    agent: HarnessAgent,
    marker: str,
    text: str | None,
    ctx: RuntimeContext,
    output: OutputSpec | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """The rest of the turn ``marker`` names, from what the session holds (module docs).

    ``output``: what a new turn's answer must fit (a turn taken over after its input was
    accepted, or continued after decisions, goes on as a plain one).
    """
    memory = await agent.sessions.load(ctx, waiting=EVERY_CALL)
    accepted = any(message.metadata.get(TURN_KEY) == marker for message in memory)
    if text is not None and not accepted:
        asked = Msg(role="user", content=text, metadata={TURN_KEY: marker})
        return agent.stream(asked, ctx=ctx, output=output)
    if unanswered_calls(memory) or (memory and memory[-1].role == "assistant"):
        return agent.resume_stream(ctx=ctx)  # decides the calls, or the answer stands
    return agent.stream(None, ctx=ctx)


def _end(outcome: Outcome | None) -> SegmentEnd:
    if pending := pending_of(outcome):
        expiries = [r.get("expires_at") for r in pending]
        last = max((e for e in expiries if isinstance(e, int | float)), default=None)
        # A second past the last expiry: the gate then reads every request as expired.
        expires_in = None if last is None else max(0.0, last - time.time()) + 1.0
        ids = [str(request.get("id")) for request in pending]
        return SegmentEnd("paused", pending=ids, expires_in=expires_in)
    match outcome:
        case Failed(error=error):
            return SegmentEnd("failed", error=f"{type(error).__name__}: {error}")
        case Cancelled():
            return SegmentEnd("cancelled")
        case None:
            return SegmentEnd("failed", error="the turn ended without an outcome")
        case _:
            return SegmentEnd("finished")
