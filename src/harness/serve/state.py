"""The served agent as every route sees it: its turns, its limits, who is calling."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.background import BackgroundTask

from harness.context import RuntimeContext
from harness.errors import RequestRefused, SessionBusy
from harness.kernel.cancelling import cancel_and_wait
from harness.serve.config import ServeConfig
from harness.serve.http import caller
from harness.serve.metrics import TURN_METRICS
from harness.serve.turn_log import (
    CANCEL_FILE,
    TURN_LOG,
    CancelWatch,
    TurnLogWriter,
    event_id,
    read_log,
    replay,
    request_cancel,
)
from harness.serve.turns import TurnEvent, Turns

__all__ = ["IdentifiedEvent", "ServeState", "TurnStream", "stream_turn", "until_disconnected"]

IdentifiedEvent = tuple[str, str, Mapping[str, Any]]
"""An event as a stream sends it: its id (``<turn>.<n>``), its name and its payload."""

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

    async def running(self, ctx: RuntimeContext) -> bool:
        """Whether a turn of the session runs now, here or in another worker."""
        live = self.turns.live.get(self._directory(ctx))
        if live is not None:
            return not live.done
        logged = await read_log(self.turns.agent.workspace, self._log_path(ctx))
        return logged is not None and not logged.ended and await self.turns.busy(ctx)

    async def reattach(
        self, ctx: RuntimeContext, since: tuple[str, int] | None
    ) -> AsyncIterator[IdentifiedEvent | None] | None:
        """The events of the session's latest turn after ``since``; None if it has none.

        ``since`` of another turn (an earlier one) starts from this turn's first event.
        """
        ping = self.config.ping_seconds
        live = self.turns.live.get(self._directory(ctx))
        if live is not None:
            after = since[1] if since is not None and since[0] == live.id else -1
            return live.identified(ping, after)
        workspace, path = self.turns.agent.workspace, self._log_path(ctx)
        logged = await read_log(workspace, path)
        if logged is None:
            return None
        after = since[1] if since is not None and since[0] == logged.turn else -1
        return replay(lambda: read_log(workspace, path), after, lambda: self.turns.busy(ctx), ping)

    async def cancel(self, ctx: RuntimeContext) -> bool:
        """Stop the session's running turn; whether one was running.

        A turn of this process stops before this returns; one of another worker stops within
        a second, when it reads the request (:class:`~harness.serve.turn_log.CancelWatch`).
        """
        live = self.turns.live.get(self._directory(ctx))
        if live is not None and not live.done:
            live.stop()
            await live.wait()
            return True
        workspace = self.turns.agent.workspace
        logged = await read_log(workspace, self._log_path(ctx))
        if logged is None or logged.ended or not await self.turns.busy(ctx):
            return False
        await request_cancel(workspace, f"{self._directory(ctx)}/{CANCEL_FILE}", logged.turn)
        return True

    async def delete(self, ctx: RuntimeContext) -> bool:
        """Delete the session (:meth:`HarnessAgent.delete_session`); whether it existed.

        Raises:
            RequestRefused: 409 ``session_busy`` while a turn runs on it.
        """
        try:
            async with self.turns.gate(ctx):
                return await self.turns.agent.delete_session(ctx)
        except SessionBusy:
            msg = f"session {ctx.session_id!r} is running a turn; stop it or wait, then delete"
            raise RequestRefused(409, "session_busy", msg) from None

    def _directory(self, ctx: RuntimeContext) -> str:
        return self.turns.agent.sessions.directory(ctx)

    def _log_path(self, ctx: RuntimeContext) -> str:
        return f"{self._directory(ctx)}/{TURN_LOG}"

    def checked_input(self, text: str) -> str:
        limit = self.config.max_input_chars
        if len(text) > limit:
            msg = f"the new turn is {len(text):,} characters; at most {limit:,} are accepted"
            raise RequestRefused(413, "input_too_long", msg)
        if not text.strip():
            raise RequestRefused(400, "empty_input", "the new turn has no text")
        return text


class TurnStream:
    """A running turn that holds its session: its events, kept for every reader.

    The turn runs in a task of its own, from taking the session's gate to releasing it, so its
    time limit and its lease belong to one task whatever the responses do. Its events are kept
    in order (and in the session's turn log, :mod:`harness.serve.turn_log`), so a reader that
    comes later, a client that reconnected, starts where it left off.

    Closing the stream (its response ended, the client left) stops the turn if it is still
    running, unless the turn was started ``detach``-ed: then it runs on (within the turn time
    limit) and a client may come back for it. :meth:`stop` stops it either way.
    """

    def __init__(self, turns: Turns, ctx: RuntimeContext, text: str | None, detach: bool) -> None:
        self.ctx = ctx
        self.detach = detach
        self.id = uuid.uuid4().hex
        self.emitted: list[TurnEvent] = []
        """Every event so far, in order: what a late reader starts from."""
        self.done = False
        self._turns = turns
        self._wake = asyncio.Event()
        self._stopping = False
        self._log: TurnLogWriter | None = None
        self._pump = asyncio.create_task(self._run(text), name=f"turn-{self.id[:8]}")
        turns.running.add(self)
        self._pump.add_done_callback(lambda _: turns.running.discard(self))

    @property
    def directory(self) -> str:
        return self._turns.agent.sessions.directory(self.ctx)

    def _add(self, event: TurnEvent) -> None:
        if not self.emitted:  # turn.started: the gate is ours, so is the session's turn log
            workspace = self._turns.agent.workspace
            self._log = TurnLogWriter(workspace, f"{self.directory}/{TURN_LOG}", self.id)
            self._turns.live[self.directory] = self
        if self._log is not None:
            self._log.add(len(self.emitted), *event)
        self.emitted.append(event)
        self._wake.set()
        self._wake = asyncio.Event()

    async def _run(self, text: str | None) -> None:
        watch: CancelWatch | None = None
        try:
            turn = TURN_METRICS.observe(self._turns.run(self.ctx, text))
            async with contextlib.aclosing(turn) as events:
                async for event in events:
                    if watch is None:
                        watch = CancelWatch(
                            self._turns.agent.workspace,
                            f"{self.directory}/{CANCEL_FILE}",
                            self.id,
                            self.stop,
                        )
                    self._add(event)
        except asyncio.CancelledError:
            if self._stopping and self.emitted:
                self._add(("turn.cancelled", {"session_id": self.ctx.session_id}))
            raise
        except SessionBusy:
            raise
        except Exception:
            logger.exception("a served turn failed")
            self._add(
                ("error", {"code": "internal_error", "message": "the turn failed; see the log"})
            )
        finally:
            self.done = True
            self._wake.set()
            if watch is not None:
                await watch.aclose()
            if self._log is not None:
                await self._log.close()
            if self._turns.live.get(self.directory) is self:
                del self._turns.live[self.directory]

    async def started(self) -> None:
        """Wait for ``turn.started``.

        Raises:
            RequestRefused: 409 ``session_busy`` when another turn kept the session for
                ``session_wait`` seconds.
        """
        while not self.emitted and not self.done:
            await self._wake.wait()
        if self.emitted:
            return
        try:
            await self._pump
        except SessionBusy:
            msg = (
                f"session {self.ctx.session_id!r} is running another turn; retry when it has "
                f"finished (waited {self._turns.config.session_wait:g} s)"
            )
            raise RequestRefused(409, "session_busy", msg) from None
        raise AssertionError("a turn ended before it started")  # pragma: no cover

    async def identified(
        self, ping_seconds: float | None = None, after: int = -1
    ) -> AsyncIterator[IdentifiedEvent | None]:
        """The events after the ``after``-th, with their ids, until the turn ends.

        A None after each ``ping_seconds`` of silence, when given.
        """
        n = after + 1
        while True:
            if n < len(self.emitted):
                name, data = self.emitted[n]
                yield event_id(self.id, n), name, data
                n += 1
                continue
            if self.done:
                return
            wake = self._wake
            try:
                await asyncio.wait_for(wake.wait(), ping_seconds)
            except TimeoutError:
                yield None

    async def events(self, ping_seconds: float | None = None) -> AsyncIterator[TurnEvent | None]:
        """The events in order from the first; a None after each ``ping_seconds`` of silence.

        Leaving the loop early closes the stream (:meth:`aclose`).
        """
        try:
            async for item in self.identified(ping_seconds):
                yield None if item is None else (item[1], item[2])
        finally:
            await self.aclose()

    def stop(self) -> None:
        """Stop the turn, as a stopped ``harness run`` is; it ends with ``turn.cancelled``."""
        if not self._pump.done():
            self._stopping = True
            self._pump.cancel()

    async def aclose(self) -> None:
        """The response is done with the turn: stop it, unless it was started detached."""
        if not self.detach and not self._pump.done():
            await cancel_and_wait(self._pump)

    async def wait(self) -> None:
        await asyncio.wait({self._pump})

    def closing(self) -> BackgroundTask:
        """Closes the turn after its response, however that ended."""
        return BackgroundTask(self.aclose)


async def stream_turn(
    turns: Turns, ctx: RuntimeContext, text: str | None, *, detach: bool = False
) -> TurnStream:
    """Start a turn; once this returns it holds the session and has sent ``turn.started``.

    ``text`` None continues a turn that paused for approval. ``detach``: the turn goes on
    when its client leaves.

    Raises:
        RequestRefused: 409 ``session_busy`` when another turn kept the session for
            ``session_wait`` seconds.
    """
    turn = TurnStream(turns, ctx, text, detach)
    try:
        await turn.started()
    except BaseException:  # the request went away before its turn began: so does the turn
        await turn.aclose()
        raise
    return turn


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
