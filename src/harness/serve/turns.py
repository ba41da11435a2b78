"""Running one served turn: one at a time per session, bounded in time, stopped by a disconnect.

Every endpoint that runs the agent starts its turn with
:meth:`harness.serve.streams.TurnStreams.start`, which runs :meth:`Turns.run` in a task of its
own; :meth:`Turns.run` yields the turn's events (:mod:`harness.serve.events`). Before the
first event it takes the session's *turn gate*: a lease on the session
(:mod:`harness.session.lease`, so it holds across workers on one store or one disk) that a
second request waits for up to ``session_wait`` seconds and then gets
:class:`~harness.errors.SessionBusy` (409). The gate is taken before any response is sent, so
the 409 is a status code, not an event in a stream that already said 200.

``turn.started`` goes out once the agent has taken the turn's input (the kernel's
``accepted``): from then on, however the turn ends, the session keeps the input. A turn ends in
one of five ways, and the session keeps what it accepted in each:

- it finishes: the ``turn.completed`` event carries the reply, once the agent's call has
  ended and saved the session; the session is free for the next turn at once, and the stream
  stays open until the turn's memory flush has run in the background (``memory.flushed``; at
  most ``flush_wait`` seconds);
- it fails (the model failed, say): an ``error`` event; the user's turn stays in the session.
  A reply whose session could not be saved is such a failure (``turn_not_saved``), never a
  ``turn.completed``: nothing may tell the client a turn was kept that was not;
- it pauses before tool calls that wait for approval: an ``approval.requested`` event for
  each, then ``turn.paused``; the session keeps the model's turn with its calls, and decisions
  posted to ``/v1/sessions/{id}/approvals`` continue it (``docs/approvals.md``);
- it runs past ``turn_timeout``: it is interrupted, an ``error`` event with ``turn_timeout``;
- the client goes away: the turn is interrupted as a stopped ``harness run`` is; the session
  keeps the user's turn and every step completed before the disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Final

from harness.agent import HarnessAgent
from harness.context import RuntimeContext
from harness.errors import HarnessError, SessionBusy
from harness.kernel import Outcome, Progress
from harness.memory import FlushResult
from harness.serve.config import ServeConfig
from harness.serve.events import error_code, event_of, outcome_events
from harness.session.keys import session_key
from harness.structured import OutputSpec
from harness.workspace import user_prefix

__all__ = ["SESSION_ID", "TurnEvent", "Turns", "check_session_id", "failure_status"]

TurnEvent = tuple[str, Mapping[str, Any]]

SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""The session ids a client may use: they name a directory and show in URLs as they are."""


_ACCEPTED_ITEM: Final = Progress("accepted")
_ACCEPTED: Final[TurnEvent] = ("accepted", {})
"""The agent took the turn's input: what ``turn.started`` waits for, never sent itself."""

_TURN: Final = "harness.serve.turn"
"""The key, in a turn's ``RuntimeContext.extra``, of the id that ties a flush to its turn."""


def check_session_id(session_id: str) -> str:
    """``session_id`` if a client may use it; otherwise ValueError with what to use."""
    if not SESSION_ID.fullmatch(session_id):
        msg = (
            f"session id {session_id[:80]!r} is not allowed: use 1 to 128 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit"
        )
        raise ValueError(msg)
    return session_id


class Turns:
    """The served agent's turns."""

    def __init__(self, agent: HarnessAgent, config: ServeConfig) -> None:
        self.agent = agent
        self.config = config
        # The flushes of each turn still waiting for them, by turn id: the agent tells us of
        # each flush with the context of the call it flushed, which carries the turn's id.
        self._flushes: dict[str, list[TurnEvent]] = {}
        agent.flush_observers.append(self._flushed)

    def context(self, user_id: str | None, session_id: str) -> RuntimeContext:
        return RuntimeContext(user_id=user_id, session_id=check_session_id(session_id))

    def gate(
        self, ctx: RuntimeContext, wait: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """The session's turn gate: held by its running turn, in whichever worker runs it.

        Raises:
            SessionBusy: On entry, when another holder kept it for ``wait`` seconds (the
                configured ``session_wait`` by default).
        """
        # Its own key, beside the one the agent's call holds inside it: the two never meet.
        key = f"serve/{self.agent.sessions.directory(ctx)}"
        return self.agent.leases.hold(key, wait=self.config.session_wait if wait is None else wait)

    async def busy(self, ctx: RuntimeContext) -> bool:
        """Whether a turn holds the session's gate now, in this process or another."""
        try:
            async with self.gate(ctx, wait=0):
                return False
        except SessionBusy:
            return True

    async def run(
        self,
        ctx: RuntimeContext,
        text: str | None,
        output: OutputSpec | None = None,
        *,
        rewind: bool = False,
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn's events, ``turn.started`` first, then the agent's, then how it ended.

        ``text`` None continues a turn that paused for approval (its decisions recorded).
        ``output``: the output type its answer must fit (:mod:`harness.structured`).
        ``rewind``: ``text`` replaces the session's last input (:mod:`harness.session.rewinds`).

        Raises:
            SessionBusy: Before the first event, when another turn keeps the session.
        """
        turn = uuid.uuid4().hex
        ctx = dataclasses.replace(ctx, extra={**ctx.extra, _TURN: turn})
        self._flushes[turn] = []
        try:
            async with contextlib.aclosing(self._run(ctx, text, output, rewind)) as events:
                async for event in events:
                    yield event
        finally:
            del self._flushes[turn]

    async def _run(
        self, ctx: RuntimeContext, text: str | None, output: OutputSpec | None, rewind: bool
    ) -> AsyncGenerator[TurnEvent, None]:
        completed = False
        started = ("turn.started", {"session_id": ctx.session_id})
        async with self.gate(ctx):
            first = True
            try:
                events = self._agent_events(ctx, text, output, rewind)
                async with contextlib.aclosing(events):
                    async for event in events:
                        if first:
                            # Sent once the agent has taken the turn's input (the kernel's
                            # ``accepted``), or answers without it: a stop from then on leaves
                            # the input in the session, so a client told the turn started never
                            # loses its question.
                            first = False
                            yield started
                            if event is _ACCEPTED:
                                continue
                        completed = event[0] == "turn.completed"
                        yield event
            except Exception:
                if first:  # a turn that failed unexpectedly still starts with turn.started
                    yield started
                raise
        if completed:
            # The session is free again; its memory flush runs on in the background.
            async for event in self._memory_flushes(ctx):
                yield event

    async def _agent_events(
        self, ctx: RuntimeContext, text: str | None, output: OutputSpec | None, rewind: bool
    ) -> AsyncGenerator[TurnEvent, None]:
        """The agent's items as events, and how its call ended as the last ones."""
        outcome: Outcome | None = None
        deadline = asyncio.timeout(self.config.turn_timeout)
        try:
            async with (
                deadline,
                contextlib.aclosing(
                    self.agent.stream(text, ctx=ctx, output=output, rewind=rewind)
                    if text is not None
                    else self.agent.resume_stream(ctx=ctx)
                ) as items,
            ):
                async for item in items:
                    if isinstance(item, Outcome):  # the last item: said once the call is over
                        outcome = item
                    else:
                        yield _ACCEPTED if item == _ACCEPTED_ITEM else event_of(item)
        except TimeoutError:
            if not deadline.expired():
                raise  # a timeout of something inside the turn, not the turn's own
            yield (
                "error",
                {
                    "code": "turn_timeout",
                    "message": f"the turn ran longer than {self.config.turn_timeout:g} s and "
                    "was stopped; the session keeps its completed steps",
                },
            )
        except HarnessError as exc:  # before the turn began (a busy session), or after its
            # outcome (a save that failed as the call let go of the session): a failure
            yield "error", {"code": error_code(exc), "message": f"{exc}"}
        else:
            assert outcome is not None  # a stream ends with its outcome
            for event in outcome_events(outcome, ctx.session_id):
                yield event

    async def _memory_flushes(self, ctx: RuntimeContext) -> AsyncIterator[TurnEvent]:
        """``memory.flushed`` for each flush of the turn's messages, once it has run.

        The flush runs after the turn, queued with the session's background work; this waits
        for that work (at most ``flush_wait`` seconds) and reports the flushes the agent told
        of (:attr:`HarnessAgent.flush_observers`), with or without a trace.
        """
        maintenance = self.agent.maintenance
        job = maintenance.pending(session_key(ctx)) if maintenance is not None else None
        if job is None or self.config.flush_wait <= 0:
            return
        try:
            await asyncio.wait_for(asyncio.shield(job), self.config.flush_wait)
        except TimeoutError:
            return
        for event in self._flushes.get(ctx.extra[_TURN], []):
            yield event

    async def _flushed(self, ctx: RuntimeContext, result: FlushResult, seconds: float) -> None:
        """Keep a flush for the turn it belongs to, if that turn still waits for it."""
        flushes = self._flushes.get(ctx.get(_TURN))
        if flushes is None:
            return  # not a served turn's, or its turn has stopped waiting
        path = result.path.removeprefix(user_prefix(ctx.user_id)) if result.path else None
        flushes.append(
            (
                "memory.flushed",
                {"path": path, "messages": result.messages, "latency_s": round(seconds, 4)},
            )
        )


_FAILURE_STATUS: Final = {
    "turn_timeout": 504,
    "turn_not_saved": 503,  # the store or the disk failed: this server's fault, not the model's
    "storage_error": 503,
    "internal_error": 500,
}


def failure_status(code: str) -> int:
    """The HTTP status of a turn that failed with ``code``.

    502 (the model failed) unless the failure was the server's own: its storage (503), itself.
    """
    return _FAILURE_STATUS.get(code, 502)
