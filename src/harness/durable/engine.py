"""The durable engine: a session's turns run as Temporal workflows, on whichever worker is alive.

:class:`TemporalEngine` is the client side and the worker side of one Temporal namespace and
task queue. A process that serves turns calls :meth:`TemporalEngine.call` (or ``resume``,
``cancel``); a process that runs them keeps :meth:`TemporalEngine.worker` open with its agent
(a process may do both). The agent of every worker on a queue must be the same agent (name,
model, tools, a workspace in the same store), made with ``durable=True``: the engine moves a
turn from a dead worker to a live one, and the live one continues it from the store.

What travels through Temporal is references and outcomes (:mod:`harness.durable.refs`); the
conversation stays in the store. A turn's reply is read from the session once the workflow says
it finished.

Trust boundary: whoever can reach the Temporal server's frontend can start, signal and cancel
these workflows (Temporal's own authorization, mTLS or API keys, governs that; run it on a
private network). A signal carries no decision: decisions are recorded in the approvals ledger,
out of the model's reach, by a caller holding the agent, and the signal only says "look again".
A workflow's input names the agent, session and user: a client of the engine acts for any
user, as a caller of ``HarnessAgent.call`` does, so only the operator's processes hold one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Final
from urllib.parse import parse_qs, urlsplit

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from harness.agent import HarnessAgent
from harness.approvals import ReviewerDecision
from harness.approvals.policy import DecisionKind
from harness.context import DEFAULT_SESSION_ID, RuntimeContext
from harness.durable.activities import Observe, TurnActivities
from harness.durable.refs import SegmentEnd, TaskRef, TurnRef
from harness.durable.workflows import (
    TaskInput,
    TaskWorkflow,
    TurnInput,
    TurnSettings,
    TurnWorkflow,
    task_workflow_id,
    turn_workflow_id,
)
from harness.errors import (
    AgentInterrupted,
    EngineUnavailable,
    HarnessError,
    SessionBusy,
    TurnFailed,
)
from harness.kernel import Ended, Finished, Paused
from harness.structured import OutputSpec, OutputType, check
from harness.subagents.children import spawn_depth
from harness.subagents.tasks import Launcher, TaskRecord

__all__ = ["SCHEME", "EngineConfig", "TemporalEngine"]

SCHEME: Final = "temporal"


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Where the engine is and how it runs turns.

    Args:
        address: The Temporal frontend, ``host:port``.
        namespace: The Temporal namespace.
        task_queue: The queue the agent's workers poll: one agent per queue.
        heartbeat_seconds: How long a worker may go silent before Temporal gives its turn to
            another worker (the worker heartbeats three times as often).
        turn_seconds: The longest one run of a turn may take, its retries included.
        max_attempts: Runs of a turn's activity before the turn fails (0: no limit).
        first_retry_seconds: The pause before the first retry; each next one doubles, to 30 s.
        sticky_seconds: How long the next step of a turn waits for the worker that ran its
            last step before any worker may take it (Temporal's sticky queue): after a worker
            dies, its turns stall this long once.
    """

    address: str
    namespace: str = "default"
    task_queue: str = "harness"
    heartbeat_seconds: float = 30.0
    turn_seconds: float = 3600.0
    max_attempts: int = 20
    first_retry_seconds: float = 1.0
    sticky_seconds: float = 2.0

    def __post_init__(self) -> None:
        times = (self.heartbeat_seconds, self.turn_seconds, self.first_retry_seconds)
        if min(times) <= 0 or self.sticky_seconds <= 0:
            msg = "an engine's heartbeat, turn, retry and sticky times must be positive"
            raise ValueError(msg)
        if self.max_attempts < 0:
            msg = f"max_attempts must be 0 (no limit) or more, got {self.max_attempts}"
            raise ValueError(msg)

    @classmethod
    def parse(cls, url: str) -> EngineConfig:
        """``temporal://HOST:PORT[/NAMESPACE][?OPTION=VALUE&...]``; ValueError says what to use.

        The options are this config's fields but the address and namespace: ``task_queue``,
        ``heartbeat_seconds``, ``sticky_seconds``, ``first_retry_seconds``, ``max_attempts``,
        ``turn_seconds``.
        """
        parts = urlsplit(url)
        usage = (
            "use temporal://HOST:PORT, optionally /NAMESPACE and ?OPTION=VALUE (one of "
            f"{', '.join(_URL_OPTIONS)})"
        )
        if parts.scheme != SCHEME or not parts.hostname:
            msg = f"engine {url!r} is not a Temporal address; {usage}"
            raise ValueError(msg)
        try:
            port = parts.port or 7233
        except ValueError:
            msg = f"engine {url!r} has a port that is not a number; {usage}"
            raise ValueError(msg) from None
        namespace = parts.path.strip("/") or "default"
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        unknown = set(query) - set(_URL_OPTIONS)
        if unknown:
            msg = f"engine {url!r} has unknown options {sorted(unknown)}; {usage}"
            raise ValueError(msg)
        given: dict[str, str | float | int] = {}
        for name, value in query.items():
            kind = _URL_OPTIONS[name]
            try:
                given[name] = kind(value)
            except ValueError:
                msg = f"engine {url!r}: {name} must be a {kind.__name__}, not {value!r}"
                raise ValueError(msg) from None
        return cls(f"{parts.hostname}:{port}", namespace=namespace, **given)  # type: ignore[arg-type]

    @property
    def settings(self) -> TurnSettings:
        return TurnSettings(
            heartbeat_seconds=self.heartbeat_seconds,
            turn_seconds=self.turn_seconds,
            max_attempts=self.max_attempts,
            first_retry_seconds=self.first_retry_seconds,
        )


_URL_OPTIONS: Final[dict[str, type[str] | type[float] | type[int]]] = {
    "task_queue": str,
    "heartbeat_seconds": float,
    "sticky_seconds": float,
    "first_retry_seconds": float,
    "max_attempts": int,
    "turn_seconds": float,
}


class TemporalEngine:
    """Turns as workflows on a Temporal server (module docs); :meth:`connect` makes one."""

    def __init__(self, client: Client, config: EngineConfig) -> None:
        self.client = client
        self.config = config

    @classmethod
    async def connect(cls, engine: str | EngineConfig) -> TemporalEngine:
        """Connect to the server ``engine`` names (a ``temporal://`` URL or a config).

        Raises:
            EngineUnavailable: The server cannot be reached.
            ValueError: ``engine`` is not a Temporal address.
        """
        config = engine if isinstance(engine, EngineConfig) else EngineConfig.parse(engine)
        try:
            client = await Client.connect(config.address, namespace=config.namespace)
        except (RuntimeError, RPCError) as exc:
            msg = (
                f"cannot reach the Temporal server at {config.address} (namespace "
                f"{config.namespace!r}): {exc}; start one (temporal server start-dev) or fix "
                "--engine"
            )
            raise EngineUnavailable(msg) from None
        return cls(client, config)

    def worker(self, agent: HarnessAgent, *, observe: Observe | None = None) -> Worker:
        """A worker that runs ``agent``'s turns: ``async with engine.worker(agent): ...``.

        ``observe`` sees each run's items (``harness serve`` logs them as the turn's events).
        From now on the agent hands its background tasks to the engine too: each is a
        workflow of its own, run by whichever worker of the queue is alive.
        """
        activities = TurnActivities(
            agent, heartbeat_seconds=self.config.heartbeat_seconds, observe=observe
        )
        if agent.tasks is not None:
            agent.tasks.launcher = self._launcher(agent)
        return Worker(
            self.client,
            task_queue=self.config.task_queue,
            workflows=[TurnWorkflow, TaskWorkflow],
            activities=[activities.segment, activities.task],
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=self.config.sticky_seconds),
            # The workflow's module is Harness's: its package is imported once, outside the
            # sandbox (the workflow itself uses only the references of harness.durable.refs).
            workflow_runner=SandboxedWorkflowRunner(
                restrictions=SandboxRestrictions.default.with_passthrough_modules("harness")
            ),
        )

    async def call(
        self,
        agent: HarnessAgent,
        text: str,
        *,
        ctx: RuntimeContext | None = None,
        output: OutputType | OutputSpec | None = None,
    ) -> Ended:
        """Run a turn on the engine; how it ended, as :meth:`HarnessAgent.call` says it.

        ``output``: the output type its answer must fit, as for :meth:`HarnessAgent.call`
        (its schema travels to the worker; ``Finished.output`` is the model's instance, or the
        parsed JSON of a schema).

        Raises:
            SessionBusy: The session has a turn running, or one waiting for decisions.
            TurnFailed: The turn failed in its worker.
            AgentInterrupted: The turn was cancelled.
            EngineUnavailable: The server went away.
        """
        ctx = _bound(agent, ctx)
        spec = OutputSpec.of(output) if output is not None else None
        handle = await self._start(agent, ctx, _ref(agent, ctx, text, uuid.uuid4().hex, spec))
        ended = await self._next(agent, ctx, handle, 0)
        if spec is not None and isinstance(ended, Finished):
            fits = check(spec, ended.reply.text)  # what the worker checked: the value again
            if not isinstance(fits, str):
                return Finished(ended.reply, output=fits[1])
        return ended

    async def submit(
        self,
        agent: HarnessAgent,
        text: str,
        *,
        ctx: RuntimeContext,
        stream: str,
        output: OutputSpec | None = None,
    ) -> None:
        """Start a turn and return once the engine holds it; its events are ``stream``'s.

        ``output``: the output type its answer must fit (:mod:`harness.structured`).

        Raises:
            SessionBusy: The session has a turn running, or one waiting for decisions.
        """
        await self._start(agent, _bound(agent, ctx), _ref(agent, ctx, text, stream, output))

    async def proceed(self, agent: HarnessAgent, *, ctx: RuntimeContext, stream: str) -> int:
        """Continue the session's paused turn (its decisions recorded) as ``stream``.

        Signals the turn's workflow, or starts one when none holds the turn (it paused without
        the engine, or its workflow was terminated). Returns how many runs of the turn had
        ended before: what :meth:`call` and :meth:`resume` wait past.
        """
        ctx = _bound(agent, ctx)
        handle = self._handle(agent, ctx)
        if await self._running(handle):
            seen = await handle.query(TurnWorkflow.seen)
            await handle.signal(TurnWorkflow.decided, stream)
            return seen
        await self._start(agent, ctx, _ref(agent, ctx, None, stream))
        return 0

    async def running(self, agent: HarnessAgent, *, ctx: RuntimeContext) -> bool:
        """Whether the session has a turn on the engine, running or waiting for decisions."""
        return await self._running(self._handle(agent, _bound(agent, ctx)))

    async def resume(
        self,
        agent: HarnessAgent,
        decisions: Mapping[str, ReviewerDecision | DecisionKind] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        by: str | None = None,
    ) -> Ended:
        """Record decisions, then continue the session's paused turn, in whichever worker.

        Raises as :meth:`HarnessAgent.resume` and :meth:`call` do.
        """
        ctx = _bound(agent, ctx)
        if decisions:
            await agent.decide(decisions, ctx=ctx, by=by)
        seen = await self.proceed(agent, ctx=ctx, stream=uuid.uuid4().hex)
        return await self._next(agent, ctx, self._handle(agent, ctx), seen)

    async def cancel(self, agent: HarnessAgent, *, ctx: RuntimeContext | None = None) -> bool:
        """Stop the session's running or waiting turn; whether there was one."""
        handle = self._handle(agent, _bound(agent, ctx))
        if not await self._running(handle):
            return False
        await handle.cancel()
        return True

    # -- how -------------------------------------------------------------------------------

    def _launcher(self, agent: HarnessAgent) -> Launcher:
        async def launch(record: TaskRecord, text: str, ctx: RuntimeContext) -> None:
            ref = TaskRef(agent.name, record.task_id, record.user_id, text, spawn_depth(ctx))
            try:
                await self.client.start_workflow(
                    TaskWorkflow.run,
                    TaskInput(ref, self.config.settings),
                    id=task_workflow_id(agent.name, record.user_id, record.task_id),
                    task_queue=self.config.task_queue,
                )
            except RPCError as exc:
                raise _unavailable(self.config, exc) from None

        return launch

    def _handle(
        self, agent: HarnessAgent, ctx: RuntimeContext
    ) -> WorkflowHandle[TurnWorkflow, SegmentEnd]:
        wid = turn_workflow_id(agent.name, ctx.user_id, str(ctx.session_id))
        return self.client.get_workflow_handle_for(TurnWorkflow.run, wid)

    async def _running(self, handle: WorkflowHandle[TurnWorkflow, SegmentEnd]) -> bool:
        try:
            description = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise _unavailable(self.config, exc) from None
        return description.status is not None and description.status.name == "RUNNING"

    async def _start(
        self, agent: HarnessAgent, ctx: RuntimeContext, ref: TurnRef
    ) -> WorkflowHandle[TurnWorkflow, SegmentEnd]:
        wid = turn_workflow_id(agent.name, ctx.user_id, str(ctx.session_id))
        try:
            return await self.client.start_workflow(
                TurnWorkflow.run,
                TurnInput(ref, self.config.settings),
                id=wid,
                task_queue=self.config.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            )
        except WorkflowAlreadyStartedError:
            msg = (
                f"session {ctx.session_id!r} has a turn running or waiting for decisions on the "
                "engine; wait for it, decide its approvals, or cancel it"
            )
            raise SessionBusy(msg) from None
        except RPCError as exc:
            raise _unavailable(self.config, exc) from None

    async def _next(
        self,
        agent: HarnessAgent,
        ctx: RuntimeContext,
        handle: WorkflowHandle[TurnWorkflow, SegmentEnd],
        seen: int,
    ) -> Ended:
        try:
            end = await handle.execute_update(TurnWorkflow.next_end, seen)
        except RPCError as exc:
            raise _unavailable(self.config, exc) from None
        if end.kind == "failed":
            raise TurnFailed(f"the turn failed in its worker: {end.error}")
        if end.kind == "cancelled":
            raise AgentInterrupted(f"the turn of session {ctx.session_id!r} was cancelled")
        messages = await agent.sessions.load(ctx)
        reply = next((m for m in reversed(messages) if m.role == "assistant"), None)
        if reply is None:  # pragma: no cover - a finished or paused turn saved its reply
            msg = f"session {ctx.session_id!r} has no reply after its turn ended"
            raise HarnessError(msg)
        if end.kind == "paused":
            pending = await agent.pending_approvals(ctx)
            return Paused(tuple(request.as_dict() for request in pending), reply=reply)
        return Finished(reply)


def _ref(
    agent: HarnessAgent,
    ctx: RuntimeContext,
    text: str | None,
    stream: str,
    output: OutputSpec | None = None,
) -> TurnRef:
    session = str(_bound(agent, ctx).session_id)
    schema, name = (dict(output.schema), output.name) if output is not None else (None, "answer")
    return TurnRef(agent.name, session, uuid.uuid4().hex, ctx.user_id, text, stream, schema, name)


def _bound(agent: HarnessAgent, ctx: RuntimeContext | None) -> RuntimeContext:
    return (ctx or RuntimeContext()).with_defaults(session_id=DEFAULT_SESSION_ID, agent=agent.name)


def _unavailable(config: EngineConfig, exc: BaseException) -> EngineUnavailable:
    return EngineUnavailable(f"the Temporal server at {config.address} failed: {exc}")
