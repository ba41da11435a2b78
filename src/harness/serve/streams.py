"""A served turn in a task of its own, and the one way a route starts one.

Every route that runs the agent (the native ``/v1/sessions/{id}/turns`` and its approvals'
continuation, chat completions, the Responses API) starts its turn with
:meth:`TurnStreams.start`: it checks a new turn's input, refuses a session whose tool calls wait
for approval, runs :meth:`~harness.serve.turns.Turns.run` in a :class:`TurnStream` and returns
once the turn holds its session and has sent ``turn.started`` (or raises the 409 of a busy
session). How the route then reads the stream (server-sent events, or the whole answer), and
whether the turn outlives its client (``detach``), is the stream's, not the route's.

:class:`TurnStreams` is also what this process knows of its running turns, by session: where a
reconnect reads first, what a cancel stops, what the server's shutdown waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.background import BackgroundTask

from harness.context import RuntimeContext
from harness.errors import CannotRewind, RequestRefused, SessionBusy
from harness.kernel.cancelling import cancel_and_wait
from harness.serve.metrics import TURN_METRICS
from harness.serve.turn_log import (
    CANCEL_FILE,
    ENDINGS,
    TURN_LOG,
    CancelWatch,
    TurnLogWriter,
    event_id,
)
from harness.serve.turns import TurnEvent, Turns
from harness.session.rewinds import rewind_point

if TYPE_CHECKING:
    from harness.serve.engine import EngineTurns
    from harness.serve.limits import Limiter
    from harness.structured import OutputSpec

__all__ = ["IdentifiedEvent", "TurnStream", "TurnStreams"]

Ending = Callable[["TurnStream", TurnEvent], Awaitable[None]]
"""What a route records when its turn ends (:meth:`TurnStreams.start`)."""

IdentifiedEvent = tuple[str, str, Mapping[str, Any]]
"""An event as a stream sends it: its id (``<turn>.<n>``), its name and its payload."""

logger = logging.getLogger("harness.serve")


class TurnStreams:
    """The turns this process runs, each a :class:`TurnStream`: the one place a turn starts."""

    def __init__(
        self, turns: Turns, engine: EngineTurns | None = None, limiter: Limiter | None = None
    ) -> None:
        self.turns = turns
        self.engine = engine
        """The durable engine the turns run on (:mod:`harness.serve.engine`); None: here."""
        self.limiter = limiter
        """The per-user limits (:mod:`harness.serve.limits`); None: none."""
        self.live: dict[str, TurnStream] = {}
        """The turns this process runs, by session directory: what a reconnect reads first."""
        self.running: set[TurnStream] = set()
        """Every turn of this process until it ends, also one not started yet."""

    async def start(
        self,
        ctx: RuntimeContext,
        text: str | None,
        *,
        detach: bool = False,
        output: OutputSpec | None = None,
        rewind: bool = False,
        ending: Ending | None = None,
    ) -> TurnStream:
        """Start a turn; once this returns it holds the session and has sent ``turn.started``.

        ``text`` is the new turn's input, checked here; None continues a turn that paused for
        approval (its decisions recorded). ``detach``: the turn goes on when its client leaves.
        ``output``: the output type the answer must fit (:mod:`harness.structured`).
        ``rewind``: the text replaces the session's last input (:mod:`harness.session.rewinds`).
        ``ending``: awaited with the turn's last event before anyone reads it (so a client
        that sends its next request at once finds what it recorded).

        Raises:
            RequestRefused: 413 or 400 for input that cannot be a turn; 409
                ``approvals_pending`` for a new turn of a session that waits for decisions;
                409 ``session_busy`` when another turn kept the session for ``session_wait``
                seconds; 400 ``nothing_to_rewind`` for a rewind of a session with no input
                to replace.
        """
        if text is not None:
            text = self._checked_input(text)
            await self._refuse_while_waiting(ctx)
        if self.limiter is not None:
            mine = sum(not t.done and t.ctx.user_id == ctx.user_id for t in self.running)
            await self.limiter.admit_turn(ctx.user_id, mine)
        if rewind:
            await self._check_rewind(ctx, text)
        turn = TurnStream(self, ctx, text, detach, output, rewind, ending)
        try:
            await turn.started()
        except BaseException:  # the request went away before its turn began: so does the turn
            await turn.aclose()
            raise
        return turn

    async def aclose(self) -> None:
        """Stop the turns still running and wait for them.

        Detached ones whose clients left, and those whose clients left before they started.
        """
        turns = list(self.running)
        for turn in turns:
            turn.stop()
        for turn in turns:
            await turn.wait()

    async def _check_rewind(self, ctx: RuntimeContext, text: str | None) -> None:
        """400 before a rewind that cannot be: on the engine, with no text, nothing to replace.

        The turn checks again under the session's lease; this answers the common case with a
        status instead of a failed turn.
        """
        if self.engine is not None:
            msg = "replacing the last message is not available on the durable engine"
            raise RequestRefused(400, "unsupported_rewind", msg)
        try:
            if text is None:
                raise CannotRewind("a rewind needs the new input")
            rewind_point(await self.turns.agent.sessions.load(ctx))
        except CannotRewind as exc:
            raise RequestRefused(400, "nothing_to_rewind", str(exc)) from None

    def _checked_input(self, text: str) -> str:
        limit = self.turns.config.max_input_chars
        if len(text) > limit:
            msg = f"the new turn is {len(text):,} characters; at most {limit:,} are accepted"
            raise RequestRefused(413, "input_too_long", msg)
        if not text.strip():
            raise RequestRefused(400, "empty_input", "the new turn has no text")
        return text

    async def _refuse_while_waiting(self, ctx: RuntimeContext) -> None:
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

    def __init__(
        self,
        streams: TurnStreams,
        ctx: RuntimeContext,
        text: str | None,
        detach: bool,
        output: OutputSpec | None = None,
        rewind: bool = False,
        ending: Ending | None = None,
    ) -> None:
        self.ctx = ctx
        self.detach = detach
        self.id = uuid.uuid4().hex
        self.emitted: list[TurnEvent] = []
        """Every event so far, in order: what a late reader starts from."""
        self.done = False
        self._streams = streams
        self._turns = streams.turns
        self._engine = streams.engine
        self._wake = asyncio.Event()
        self._stopping = False
        self._left = False
        """The response closed before the turn ended: its client left (not detached)."""
        self._steps: list[Mapping[str, Any]] = []
        """The ``step.completed`` payloads: what the turn is charged (its tokens, its cost)."""
        self._charged = 0
        self._ending = ending
        self._log: TurnLogWriter | None = None
        self._pump = asyncio.create_task(
            self._run(text, output, rewind), name=f"turn-{self.id[:8]}"
        )
        streams.running.add(self)
        self._pump.add_done_callback(lambda _: streams.running.discard(self))

    @property
    def directory(self) -> str:
        return self._turns.agent.sessions.directory(self.ctx)

    def _add(self, event: TurnEvent) -> None:
        if not self.emitted:  # turn.started: the gate is ours, so is the session's turn log
            if self._engine is None:  # on the engine, the worker that runs the turn writes it
                workspace = self._turns.agent.workspace
                self._log = TurnLogWriter(workspace, f"{self.directory}/{TURN_LOG}", self.id)
            self._streams.live[self.directory] = self
        if self._log is not None:
            self._log.add(len(self.emitted), *event)
        if event[0] == "step.completed":
            self._steps.append(event[1])
        self.emitted.append(event)
        self._wake.set()
        self._wake = asyncio.Event()

    async def _run(self, text: str | None, output: OutputSpec | None, rewind: bool) -> None:
        watch: CancelWatch | None = None
        try:
            turn = TURN_METRICS.observe(
                self._turns.run(self.ctx, text, output, rewind=rewind)
                if self._engine is None
                else self._engine.run(self.ctx, text, self.id, output)
            )
            async with contextlib.aclosing(turn) as events:
                async for event in events:
                    if event[0] in ENDINGS:  # before anyone reads that it ended
                        await self._charge()
                        if self._ending is not None:
                            await self._ending(self, event)
                    if watch is None and self._engine is None:
                        watch = CancelWatch(
                            self._turns.agent.workspace,
                            f"{self.directory}/{CANCEL_FILE}",
                            self.id,
                            self.stop,
                        )
                    self._add(event)
        except asyncio.CancelledError:
            # Stopped, or its client left: the log says so, so a client that re-attaches (or
            # another tab) can tell how the turn ended. A worker shutting down says nothing:
            # the turn's steps are the session's, and it may go on elsewhere.
            why = "stopped" if self._stopping else "client_left" if self._left else None
            if why is not None and self.emitted and self._engine is None:
                self._add(("turn.cancelled", {"session_id": self.ctx.session_id, "reason": why}))
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
            await self._charge()  # however the turn ended: what its steps spent is spent
            if watch is not None:
                await watch.aclose()
            if self._log is not None:
                await self._log.close()
            if self._streams.live.get(self.directory) is self:
                del self._streams.live[self.directory]

    async def _charge(self) -> None:
        """Charge the user what the turn's steps spent since the last charge (limits)."""
        limiter, steps = self._streams.limiter, self._steps[self._charged :]
        if limiter is None or not steps:
            return
        self._charged += len(steps)
        try:
            await limiter.charge(self.ctx.user_id, steps)
        except Exception:
            logger.exception("charging a turn's usage to %r failed", self.ctx.user_id)

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
        """Stop the turn, as a stopped ``harness run`` is; it ends with ``turn.cancelled``.

        On the engine this server only stops following it: the turn goes on in its workflow
        (the server's shutdown), and :meth:`ServeState.cancel` cancels that.
        """
        if not self._pump.done():
            self._stopping = True
            self._pump.cancel()

    async def aclose(self) -> None:
        """The response is done with the turn: stop it, unless it was started detached.

        On the engine, that cancels the turn's workflow: the client left, as in process.
        """
        if not self.detach and not self._pump.done():
            if self._engine is not None and self.emitted:
                await self._engine.cancel(self.ctx)
            self._left = True
            await cancel_and_wait(self._pump)

    async def wait(self) -> None:
        await asyncio.wait({self._pump})

    def closing(self) -> BackgroundTask:
        """Closes the turn after its response, however that ended."""
        return BackgroundTask(self.aclose)
