"""The served agent as every route sees it: its turns, its limits, who is calling."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request
from starlette.background import BackgroundTask

from harness.context import RuntimeContext
from harness.errors import RequestRefused, SessionBusy
from harness.kernel.cancelling import cancel_and_wait
from harness.serve.config import ServeConfig
from harness.serve.http import caller
from harness.serve.turns import TurnEvent, Turns

__all__ = ["ServeState", "TurnStream", "stream_turn", "until_disconnected"]

logger = logging.getLogger("harness.serve")


@dataclass(frozen=True, slots=True)
class ServeState:
    turns: Turns
    config: ServeConfig

    def authenticate(self, request: Request) -> str | None:
        """The caller's user (see :func:`~harness.serve.http.caller`), noted for the log."""
        user = caller(request, self.config)
        request.scope.setdefault("state", {})["user"] = user
        return user

    def context(self, user_id: str | None, session_id: str) -> RuntimeContext:
        try:
            return self.turns.context(user_id, session_id)
        except ValueError as exc:
            raise RequestRefused(400, "invalid_session_id", str(exc)) from None

    async def refuse_while_waiting(self, ctx: RuntimeContext) -> None:
        """409 before a new turn on a session whose tool calls wait for approval.

        A background task's request does not block the conversation: the task waits, not the
        session's turn.
        """
        pending = await self.turns.agent.pending_approvals(ctx)
        waiting = [request for request in pending if request.task_id is None]
        if waiting:
            msg = (
                f"session {ctx.session_id!r} waits for {len(waiting)} approval(s); decide them "
                f"at /v1/sessions/{ctx.session_id}/approvals before a new turn"
            )
            raise RequestRefused(409, "approvals_pending", msg)

    def checked_input(self, text: str) -> str:
        limit = self.config.max_input_chars
        if len(text) > limit:
            msg = f"the new turn is {len(text):,} characters; at most {limit:,} are accepted"
            raise RequestRefused(413, "input_too_long", msg)
        if not text.strip():
            raise RequestRefused(400, "empty_input", "the new turn has no text")
        return text


class TurnStream:
    """A running turn that holds its session: its events, read by one response.

    The turn runs in a task of its own, from taking the session's gate to releasing it, so its
    time limit and its lease belong to one task whatever the response does. Closing the stream
    (the response ended, the client left) stops the turn if it is still running.
    """

    def __init__(
        self, pump: asyncio.Task[None], queue: asyncio.Queue[TurnEvent | None], first: TurnEvent
    ) -> None:
        self._pump = pump
        self._queue = queue
        self._first = first

    async def events(self, ping_seconds: float | None = None) -> AsyncIterator[TurnEvent | None]:
        """The events in order; a None after each ``ping_seconds`` of silence, when given."""
        try:
            yield self._first
            while True:
                try:
                    event = await asyncio.wait_for(self._queue.get(), ping_seconds)
                except TimeoutError:
                    yield None
                    continue
                if event is None:
                    break
                yield event
            await asyncio.wait({self._pump})  # it is in its last line: the end is near
            failure = None if self._pump.cancelled() else self._pump.exception()
            if failure is not None:
                logger.error("a served turn failed", exc_info=failure)
                yield "error", {"code": "internal_error", "message": "the turn failed; see the log"}
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if not self._pump.done():
            await cancel_and_wait(self._pump)

    def closing(self) -> BackgroundTask:
        """Closes the turn after its response, however that ended."""
        return BackgroundTask(self.aclose)


async def stream_turn(turns: Turns, ctx: RuntimeContext, text: str | None) -> TurnStream:
    """Start a turn; once this returns it holds the session and has sent ``turn.started``.

    ``text`` None continues a turn that paused for approval.

    Raises:
        RequestRefused: 409 ``session_busy`` when another turn kept the session for
            ``session_wait`` seconds.
    """
    queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async with contextlib.aclosing(turns.run(ctx, text)) as events:
                async for event in events:
                    queue.put_nowait(event)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(pump())
    first = await queue.get()
    if first is None:
        try:
            await task
        except SessionBusy:
            msg = (
                f"session {ctx.session_id!r} is running another turn; retry when it has "
                f"finished (waited {turns.config.session_wait:g} s)"
            )
            raise RequestRefused(409, "session_busy", msg) from None
        raise AssertionError("a turn ended before it started")  # pragma: no cover
    return TurnStream(task, queue, first)


async def until_disconnected(request: Request, work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work``; if the client goes away first, cancel it (499: nobody reads the answer)."""
    job = asyncio.ensure_future(work())
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not job.done():
            await cancel_and_wait(job)
    if job.cancelled():
        raise RequestRefused(499, "client_closed", "the client closed the connection")
    job.result()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
