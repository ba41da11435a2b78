"""Served turns on the durable engine (``harness serve --engine temporal://...``).

With an engine, a served turn is a Temporal workflow (:mod:`harness.durable`) that any server's
worker may run, and its events travel through the session's turn log
(:mod:`harness.serve.turn_log`) instead of from the task that runs it:

- the worker side, :func:`turn_log_observer`: the activity that runs the turn writes each of its
  items to the log as the event a served turn sends (``turn.started`` first, then the agent's,
  then how it ended). A worker that takes over a turn after another died goes on with the
  same log, numbering on, so ``Last-Event-ID`` keeps meaning the same event on every server.
  A worker that is shutting down leaves the log open for the worker that takes the turn over;
- the server side, :class:`EngineTurns`: starts the turn (or continues it after decisions) on
  the engine and follows the log, so the route streams the events whichever worker writes them,
  and a client that reconnects to any server gets the rest.

The workflow id holds one turn per session (it replaces the server's turn gate): a second turn
is 409 ``session_busy``. A client that leaves a turn it did not detach cancels it, as in
process; a server that dies cancels nothing.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final

from temporalio import activity

from harness.agent import HarnessAgent
from harness.context import RuntimeContext
from harness.durable import TemporalEngine
from harness.durable.activities import Observe
from harness.durable.refs import TurnRef
from harness.kernel import Outcome, Progress, StreamItem
from harness.serve.events import event_of, outcome_events
from harness.serve.turn_log import TURN_LOG, TurnLogWriter, read_log, replay
from harness.serve.turns import TurnEvent, Turns
from harness.structured import OutputSpec

__all__ = ["EngineTurns", "turn_log_observer"]

_ACCEPTED: Final = Progress("accepted")

POLL_SECONDS: Final = 0.1
"""How often a server reads the log of a turn another worker runs."""


def turn_log_observer(agent: HarnessAgent) -> Observe:
    """What a served agent's worker does with a turn's items: log them as its events."""

    async def observe(
        ref: TurnRef, ctx: RuntimeContext, items: AsyncGenerator[StreamItem, None]
    ) -> AsyncGenerator[StreamItem, None]:
        path = f"{agent.sessions.directory(ctx)}/{TURN_LOG}"
        logged = await read_log(agent.workspace, path)
        going_on = logged is not None and logged.turn == ref.stream and not logged.ended
        events = logged.events if logged is not None and going_on else []
        log = TurnLogWriter(agent.workspace, path, ref.stream, fresh=not going_on)
        n = len(events)
        started = any(name == "turn.started" for name, _ in events)
        ended = False

        def add(event: TurnEvent) -> None:
            nonlocal n
            log.add(n, *event)
            n += 1

        try:
            async for item in items:
                if not started:  # the input is taken (or the turn answers without it)
                    started = True
                    add(("turn.started", {"session_id": ctx.session_id}))
                if isinstance(item, Outcome):
                    for event in outcome_events(item, ctx.session_id):
                        add(event)
                elif item != _ACCEPTED:
                    add(event_of(item))
                yield item
            ended = True
        except asyncio.CancelledError:
            if not activity.is_worker_shutdown():  # cancelled by a client, not handed over
                add(("turn.cancelled", {"session_id": ctx.session_id}))
                ended = True
            raise
        finally:
            await log.close(end=ended)

    return observe


class EngineTurns:
    """Served turns on the engine: start or continue one, and follow its events."""

    def __init__(self, turns: Turns, engine: TemporalEngine) -> None:
        self.turns = turns
        self.engine = engine

    async def run(
        self, ctx: RuntimeContext, text: str | None, stream: str, output: OutputSpec | None = None
    ) -> AsyncIterator[TurnEvent]:
        """The events of the turn ``stream`` (``text`` None continues a paused turn).

        ``output``: the output type a new turn's answer must fit (:mod:`harness.structured`).

        Raises:
            SessionBusy: Before the first event, when the session has a turn on the engine.
        """
        agent = self.turns.agent
        if text is not None:
            await self.engine.submit(agent, text, ctx=ctx, stream=stream, output=output)
        else:
            await self.engine.proceed(agent, ctx=ctx, stream=stream)
        path = f"{agent.sessions.directory(ctx)}/{TURN_LOG}"

        async def running() -> bool:
            return await self.engine.running(agent, ctx=ctx)

        while (logged := await read_log(agent.workspace, path)) is None or logged.turn != stream:
            if not await running():  # it ended before any worker ran it (it failed to start)
                yield "error", {"code": "turn_lost", "message": "no worker ran the turn"}
                return
            await asyncio.sleep(POLL_SECONDS)
        follow = replay(
            lambda: read_log(agent.workspace, path),
            -1,
            running,
            math.inf,
            poll_seconds=POLL_SECONDS,
        )
        async for event in follow:
            if event is not None:
                yield event[1], event[2]

    async def cancel(self, ctx: RuntimeContext) -> bool:
        return await self.engine.cancel(self.turns.agent, ctx=ctx)

    async def running(self, ctx: RuntimeContext) -> bool:
        return await self.engine.running(self.turns.agent, ctx=ctx)
