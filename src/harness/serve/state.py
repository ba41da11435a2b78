"""The served agent as every route sees it: its turns, its limits, who is calling.

A route starts a turn with ``state.streams.start`` (:mod:`harness.serve.streams`); what it
asks of a session's turn besides (is one running, its events again, stop it) is here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from fastapi import Request

from harness.context import RuntimeContext
from harness.errors import RequestRefused, SessionBusy
from harness.kernel.cancelling import cancel_and_wait
from harness.serve.config import ServeConfig
from harness.serve.conversations import Conversations, Said, new_session_id
from harness.serve.http import caller
from harness.serve.streams import Ending, IdentifiedEvent, TurnStreams
from harness.serve.turn_log import CANCEL_FILE, TURN_LOG, read_log, replay, request_cancel
from harness.serve.turns import Turns

__all__ = ["ServeState", "until_disconnected"]

logger = logging.getLogger("harness.serve")


@dataclass(frozen=True, slots=True)
class ServeState:
    """What every route holds: this process's turns and the server's configuration."""

    streams: TurnStreams
    config: ServeConfig
    conversations: Conversations
    """Where stateless clients' histories lead (:mod:`harness.serve.conversations`)."""

    @property
    def turns(self) -> Turns:
        """The turn engine the streams run: the served agent, each session's turn gate."""
        return self.streams.turns

    def authenticate(self, request: Request) -> str | None:
        """The caller's user (see :func:`~harness.serve.http.caller`), noted for the log.

        Every route that serves a user calls it, so it counts the user's requests too
        (:meth:`~harness.serve.limits.Limiter.admit_request`: 429 past the minute's limit).
        """
        user = caller(request, self.config)
        request.scope.setdefault("state", {})["user"] = user
        if self.streams.limiter is not None:
            self.streams.limiter.admit_request(user)
        return user

    @contextlib.asynccontextmanager
    async def conversation(
        self, user: str | None, named: str | None, history: Sequence[Said], asked: str, prefix: str
    ) -> AsyncIterator[tuple[RuntimeContext, Ending | None]]:
        """A request's context, and what its turn records as it ends (None: nothing).

        The session ``named``; else the one its resent ``history`` continues, or a new one
        (``<prefix>-<hex>``) that keeps it (:mod:`harness.serve.conversations`). The block
        starts the turn: should it raise (the turn refused), the history's claim is given back
        and a session begun for it deleted, so that the client's retry finds the same.
        """
        if named:
            yield self.context(user, named), None
            return
        found = await self.conversations.continued(user, history)
        ctx = self.context(user, found or new_session_id(prefix))
        if found is None:
            await self.conversations.seed(ctx, history)
        try:
            yield ctx, self.conversations.ending(history, asked)
        except Exception:
            try:
                if found is not None:
                    await self.conversations.release(user, found, history)
                elif history:
                    await self.turns.agent.delete_session(ctx)
            except Exception as exc:  # the refusal is what the client must hear
                logger.warning("could not undo a refused request's session: %s", exc)
            raise

    def context(self, user_id: str | None, session_id: str) -> RuntimeContext:
        try:
            return self.turns.context(user_id, session_id)
        except ValueError as exc:
            raise RequestRefused(400, "invalid_session_id", str(exc)) from None

    async def running(self, ctx: RuntimeContext) -> bool:
        """Whether a turn of the session runs now, here or in another worker."""
        live = self.streams.live.get(self._directory(ctx))
        if live is not None:
            return not live.done
        logged = await read_log(self.turns.agent.workspace, self._log_path(ctx))
        return logged is not None and not logged.ended and await self._busy(ctx)

    async def _busy(self, ctx: RuntimeContext) -> bool:
        """Whether something holds the session's turn: its gate, or its workflow on the engine."""
        engine = self.streams.engine
        return await (self.turns.busy(ctx) if engine is None else engine.running(ctx))

    async def reattach(
        self, ctx: RuntimeContext, since: tuple[str, int] | None
    ) -> AsyncIterator[IdentifiedEvent | None] | None:
        """The events of the session's latest turn after ``since``; None if it has none.

        ``since`` of another turn (an earlier one) starts from this turn's first event.
        """
        ping = self.config.ping_seconds
        live = self.streams.live.get(self._directory(ctx))
        if live is not None:
            after = since[1] if since is not None and since[0] == live.id else -1
            return live.identified(ping, after)
        workspace, path = self.turns.agent.workspace, self._log_path(ctx)
        logged = await read_log(workspace, path)
        if logged is None:
            return None
        after = since[1] if since is not None and since[0] == logged.turn else -1
        return replay(lambda: read_log(workspace, path), after, lambda: self._busy(ctx), ping)

    async def cancel(self, ctx: RuntimeContext) -> bool:
        """Stop the session's running turn; whether one was running.

        A turn of this process stops before this returns; one of another worker stops within
        a second, when it reads the request (:class:`~harness.serve.turn_log.CancelWatch`).
        """
        engine = self.streams.engine
        if engine is not None:  # whichever worker runs it stops at its next heartbeat
            return await engine.cancel(ctx)
        live = self.streams.live.get(self._directory(ctx))
        if live is not None and not live.done:
            live.stop()
            await live.wait()
            return True
        workspace = self.turns.agent.workspace
        logged = await read_log(workspace, self._log_path(ctx))
        if logged is None or logged.ended or not await self._busy(ctx):
            return False
        await request_cancel(workspace, f"{self._directory(ctx)}/{CANCEL_FILE}", logged.turn)
        return True

    async def delete(self, ctx: RuntimeContext) -> bool:
        """Delete the session (:meth:`HarnessAgent.delete_session`); whether it existed.

        Raises:
            RequestRefused: 409 ``session_busy`` while a turn runs on it.
        """
        try:
            if self.streams.engine is not None and await self.streams.engine.running(ctx):
                raise SessionBusy(ctx.session_id)
            async with self.turns.gate(ctx):
                return await self.turns.agent.delete_session(ctx)
        except SessionBusy:
            msg = f"session {ctx.session_id!r} is running a turn; stop it or wait, then delete"
            raise RequestRefused(409, "session_busy", msg) from None

    def _directory(self, ctx: RuntimeContext) -> str:
        return self.turns.agent.sessions.directory(ctx)

    def _log_path(self, ctx: RuntimeContext) -> str:
        return f"{self._directory(ctx)}/{TURN_LOG}"


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
