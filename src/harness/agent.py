"""HarnessAgent: a ReActAgent with a workspace, saved sessions and the harness's hooks.

It is not a second reasoning loop. Its parts are built from its options by
:func:`harness.assembly.assemble` (the kernel's agent with the built-in hooks and tools); for
each call it binds the call's :class:`RuntimeContext`, loads that session's saved conversation,
and hands both to the kernel's agent. Nothing about a call is kept in the agent's fields, so one
agent serves concurrent calls for different users and sessions; calls on the *same* session are
serialized so they cannot overwrite each other's turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import weakref
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from harness.approvals import (
    ApprovalPolicy,
    ApprovalRule,
    DecisionKind,
    PendingApproval,
    ReviewerDecision,
)
from harness.assembly import FlushObserver, assemble
from harness.compaction import (
    DEFAULT_TOOL_RESULT_EVICTION,
    CompactionConfig,
    ToolResultEvictionConfig,
)
from harness.context import DEFAULT_SESSION_ID, RuntimeContext
from harness.errors import (
    CannotRewind,
    ContextOverflowError,
    HarnessError,
    OutputInvalid,
    UnknownApproval,
)
from harness.filesystem.base import AbstractFilesystem
from harness.kernel import (
    DEFAULT_MAX_ITERS,
    OUTPUT_SCHEMA,
    SYNTHETIC,
    ChatModel,
    Ended,
    Failed,
    Finished,
    Hook,
    Msg,
    SessionState,
    StreamItem,
    TextBlock,
    Tool,
    Toolkit,
    as_messages,
    constrains_output,
    ended,
    unanswered_calls,
    written_by_harness,
)
from harness.mcp import MCPServerConfig
from harness.memory.config import DEFAULT_MEMORY, MemoryConfig
from harness.memory.transcript import TranscriptWriter
from harness.options import DEFAULT_AGENT_NAME, AgentOptions, default_workspace
from harness.session import EVERY_CALL, SessionFsync
from harness.session.keys import session_key
from harness.session.lease import DEFAULT_SESSION_WAIT, FileLeases, SessionLeases
from harness.session.rewinds import rewind_point, set_aside
from harness.stores.base import BaseStore
from harness.structured import OutputSpec, OutputType, check, correction, instruction
from harness.subagents import DEFAULT_SUBAGENTS, Declaration, SubagentsConfig, spawn_depth
from harness.workspace import WorkspaceManager
from harness.workspace.context import DEFAULT_WORKSPACE_CONTEXT, WorkspaceContextConfig

__all__ = ["DEFAULT_AGENT_NAME", "FlushObserver", "HarnessAgent", "default_workspace"]

logger = logging.getLogger(__name__)

_OPTION_NAMES: Final = frozenset(field.name for field in dataclasses.fields(AgentOptions))


def _last_reply(memory: Sequence[Msg], ctx: RuntimeContext) -> Msg:
    """The session's last answer, for a resume that finds nothing waiting."""
    for message in reversed(memory):
        if message.role == "assistant":
            return message
    msg = f"session {ctx.session_id!r} has no tool call waiting for a decision, and no reply"
    raise UnknownApproval(msg)


class HarnessAgent:
    """An agent with a workspace, persistent sessions and the harness hook chain.

    Every keyword is a field of :class:`~harness.AgentOptions`, which documents it (and
    ``docs/configuration.md``); :meth:`from_options` builds an agent from such a value, and
    :attr:`options` is the one the agent runs with. A model given as a spec (such as
    ``"openai:gpt-4o-mini"``) is built and owned by the agent, which closes it in
    :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        model: ChatModel | str,
        name: str = DEFAULT_AGENT_NAME,
        workspace: str | Path | WorkspaceManager | None = None,
        sys_prompt: str = "",
        tools: Toolkit | Iterable[Callable[..., Any] | Tool] = (),
        hooks: Iterable[Hook] = (),
        max_iters: int = DEFAULT_MAX_ITERS,
        workspace_context: WorkspaceContextConfig | None = DEFAULT_WORKSPACE_CONTEXT,
        filesystem: AbstractFilesystem | None = None,
        store: BaseStore | None = None,
        filesystem_tools: bool = True,
        allowed_tools: Iterable[str] | None = None,
        memory: MemoryConfig | None = DEFAULT_MEMORY,
        memory_model: ChatModel | str | None = None,
        tool_result_eviction: ToolResultEvictionConfig | None = DEFAULT_TOOL_RESULT_EVICTION,
        compaction: CompactionConfig | None = None,
        compaction_model: ChatModel | str | None = None,
        subagents: SubagentsConfig | Sequence[Declaration] | None = DEFAULT_SUBAGENTS,
        skills: bool = True,
        mcp_servers: Sequence[MCPServerConfig] = (),
        mcp_config: str | Path | None = None,
        trace: bool = True,
        otel: bool = False,
        session_wait: float = DEFAULT_SESSION_WAIT,
        session_leases: SessionLeases | None = None,
        session_fsync: SessionFsync = None,
        approvals: ApprovalPolicy | Mapping[str, ApprovalRule | bool] | Iterable[str] | None = None,
        durable: bool = False,
    ) -> None:
        # The keywords are the options' fields, so the value is made from the arguments as
        # they came (tests/unit/test_options.py holds the signature and the fields equal).
        given = {key: value for key, value in locals().items() if key in _OPTION_NAMES}
        parts = assemble(AgentOptions(**given), make_agent=HarnessAgent.from_options)
        self.options = parts.options
        self.name = parts.options.name
        self.model = parts.model
        self.workspace = parts.workspace
        self.sessions = parts.sessions
        self.leases = parts.leases
        self.session_wait = parts.options.session_wait
        self.compactions = parts.compactions
        self.provenance = parts.provenance
        self.mcp = parts.mcp
        self.flush_observers: list[FlushObserver] = parts.flush_observers
        self.maintenance = parts.maintenance
        self.compaction = parts.options.compaction
        self.compactor = parts.compactor
        self.tasks = parts.tasks
        self.subagents = parts.subagents  # holds the subagent tools, for direct use
        self.approvals = parts.approvals
        self.delegate = parts.delegate
        self._parts = parts
        self._owned = list(parts.owned)
        self._own_hooks = parts.own_hooks
        self._session_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._checked = False

    @classmethod
    def from_options(cls, options: AgentOptions) -> Self:
        """The agent ``options`` describe: the same as passing their fields as keywords.

        Given another agent's :attr:`options`, the new agent shares that agent's models,
        workspace and leases (the agent that built a model from a spec still owns it).
        """
        return cls(**{name: getattr(options, name) for name in _OPTION_NAMES})

    async def call(
        self,
        msgs: str | Msg | Sequence[Msg] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        output: OutputType | OutputSpec | None = None,
        rewind: bool = False,
    ) -> Ended:
        """Continue the context's session with new input; returns how the turn ended.

        :class:`~harness.kernel.Finished` carries the reply; :class:`~harness.kernel.Paused`
        the tool calls that wait for a decision (:meth:`resume` continues the turn). A
        cancelled or failed turn raises its error. This is :meth:`stream`, consumed: one turn
        engine whether or not anyone watches.

        Args:
            msgs: A user text, a message, a list of messages, or nothing.
            ctx: Who the call is for and which session it continues (``"default"`` if unset).
            output: A pydantic model or a JSON schema the final answer must fit
                (:mod:`harness.structured`): ``Finished.output`` is then the value, and an
                answer that never fits raises :class:`~harness.errors.OutputInvalid`.
            rewind: The input replaces the session's last input, and what followed it: a
                chat's "edit" (or, with the same text, "regenerate"). What it replaces is kept
                in the session's ``rewound.jsonl`` (:mod:`harness.session.rewinds`); a session
                with nothing to replace raises :class:`~harness.errors.CannotRewind`.
        """
        return await ended(self.stream(msgs, ctx=ctx, output=output, rewind=rewind))

    def stream(
        self,
        msgs: str | Msg | Sequence[Msg] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        output: OutputType | OutputSpec | None = None,
        rewind: bool = False,
    ) -> AsyncGenerator[StreamItem, None]:
        """Continue the context's session, yielding deltas and tool activity, then the outcome.

        The last item is the turn's outcome (:mod:`harness.kernel.outcome`), a failure
        included. A call refused before its turn began raises instead, as :meth:`call` does:
        input that is not a message, a session another call keeps past ``session_wait``
        (:class:`~harness.errors.SessionBusy`), a session that cannot be read, a ``rewind``
        with nothing to replace (:class:`~harness.errors.CannotRewind`). The session's
        messages and state are loaded under its lease and saved as the turn goes
        (:mod:`harness.hooks.session_persistence`); a context overflow is compacted and the step
        tried again when ``compaction`` is on (:mod:`harness.hooks.compaction`).
        """
        if rewind and not as_messages(msgs):
            raise CannotRewind("a rewind replaces the session's last input: give the new input")
        spec = OutputSpec.of(output) if output is not None else None
        return self._stream(msgs, self._bind(ctx), output=spec, rewind=rewind)  # no layer between

    async def _stream(
        self,
        msgs: str | Msg | Sequence[Msg] | None,
        ctx: RuntimeContext,
        *,
        resuming: bool = False,
        output: OutputSpec | None = None,
        rewind: bool = False,
    ) -> AsyncGenerator[StreamItem, None]:
        # The memory work the call leaves behind starts once it has returned (and let go of
        # the session), not beside its last save.
        held = self.maintenance.holding(ctx) if self.maintenance else contextlib.nullcontext()
        if spawn_depth(ctx) > 0:  # a subagent's task is its parent model's words, not a user's
            msgs = [_as_task(msg) for msg in as_messages(msgs)] if msgs is not None else None
        with held:
            async with self._session_lock(ctx), self._lease(ctx), self.sessions.holding(ctx):
                memory, state = await self._restore(ctx)
                if resuming and not unanswered_calls(memory):
                    # Nothing waits (a decision sent again, a turn another worker resumed):
                    # the turn's reply stands, and the model is not asked again.
                    yield Finished(_last_reply(memory, ctx))
                    return
                if rewind:
                    cut = rewind_point(memory)  # before anything is set aside
                    await set_aside(self.workspace, self.sessions.directory(ctx), memory[cut:])
                    del memory[cut:]
                if output is not None:
                    asked = [*as_messages(msgs), instruction(output)]
                    async for item in self._structured(asked, ctx, memory, state, output):
                        yield item
                    return
                async for item in self.delegate.stream(msgs, ctx=ctx, memory=memory, state=state):
                    yield self._advised(item)

    async def _structured(
        self,
        msgs: list[Msg],
        ctx: RuntimeContext,
        memory: list[Msg],
        state: SessionState,
        output: OutputSpec,
    ) -> AsyncGenerator[StreamItem, None]:
        """The turn, asked again while its answer does not fit ``output`` (module structured)."""
        # A model that can hold its answer to the schema is given it (the local model's grammar).
        held = {OUTPUT_SCHEMA: dict(output.schema)} if constrains_output(self.model) else None
        for attempt in range(output.retries + 1):
            stream = self.delegate.stream(
                msgs, ctx=ctx, memory=memory, state=state, model_options=held
            )
            async for item in stream:
                if not isinstance(item, Finished):
                    yield self._advised(item)
                    continue
                fits = check(output, item.reply.text)
                if not isinstance(fits, str):
                    text, value = fits
                    reply = item.reply.model_copy(update={"content": [TextBlock(text=text)]})
                    yield Finished(reply, output=value)
                    return
                if attempt == output.retries:
                    msg = (
                        f"the answer did not fit the output type {output.name} after "
                        f"{output.retries + 1} tries: {fits}"
                    )
                    yield Failed(OutputInvalid(msg))
                    return
                msgs = [correction(output, fits)]

    def _advised(self, item: StreamItem) -> StreamItem:
        """An overflow without compaction says how to turn it on; any other item as it is."""
        if (
            not isinstance(item, Failed)
            or not isinstance(item.error, ContextOverflowError)
            or self.compaction is not None  # it could not make it fit: said in the notes
        ):
            return item
        msg = (
            f"the conversation no longer fits the model's context window ({item.error}); pass "
            "compaction=CompactionConfig() to summarize long history automatically"
        )
        advice = ContextOverflowError(msg)
        advice.__cause__ = item.error
        return Failed(advice)

    def interrupt(self) -> None:
        """Stop every running call; each ends :class:`~harness.kernel.Cancelled`."""
        self.delegate.interrupt()

    async def pending_approvals(self, ctx: RuntimeContext | None = None) -> list[PendingApproval]:
        """The tool calls of the context's session that wait for a decision, oldest first.

        Only those something still waits for: a call the session holds unanswered, or a
        background task (:func:`~harness.subagents.waiting_approvals`).
        """
        desk = self._parts.desk
        return await desk.pending(self._bind(ctx)) if desk is not None else []

    async def delete_session(self, ctx: RuntimeContext | None = None) -> bool:
        """Delete the context's session: its conversation, transcript, trace and records.

        Holds the session's lease, so no call of any process is in it meanwhile (one that
        runs makes this wait up to ``session_wait`` s, then raise
        :class:`~harness.errors.SessionBusy`). What memory already kept from the session
        stays: it is the user's, reviewed and deleted as memory is. Nothing of the
        conversation stays to read, search or list: its transcript goes with its copy in the
        search index and its entry in ``sessions.json``. Returns whether the session had a
        saved directory.
        """
        ctx = self._bind(ctx)
        async with self._session_lock(ctx), self._lease(ctx):
            if self.maintenance is not None:
                # The last call's transcript and flush, still running after it returned,
                # would write the conversation back.
                pending = self.maintenance.pending(session_key(ctx))
                if pending is not None:
                    await asyncio.wait({pending})
            saved = await self._parts.files.delete(self.sessions.directory(ctx), ctx)
            transcripts = await TranscriptWriter(self.workspace, self.name).forget(ctx)
            if self.maintenance is not None:
                for path in transcripts:  # gone: the index drops their rows, every worker's
                    try:
                        await self.maintenance.index_file(path)
                    except HarnessError as exc:  # the next re-index drops them
                        logger.warning("could not drop %s from the memory index: %s", path, exc)
            return saved

    async def resume(
        self,
        decisions: Mapping[str, ReviewerDecision | DecisionKind] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        by: str | None = None,
    ) -> Ended:
        """Record decisions on the session's pending approvals, then continue its turn.

        ``decisions`` maps approval ids (:class:`~harness.kernel.Paused`'s ``pending``) to a
        :class:`~harness.approvals.ReviewerDecision` or just ``"approve"`` / ``"reject"``.
        The calls decided run (once) or get their results, and the turn goes on from there,
        in this process or any other; it ends :class:`~harness.kernel.Paused` again while a
        call still waits. When nothing waits any more (the same decision sent twice), it
        returns the turn's reply without asking the model again.

        Raises:
            UnknownApproval: The session has no pending approval of an id given.
            ApprovalConflict: An approval was already decided otherwise.
            ValueError: A decision its rule does not allow.
        """
        return await ended(self.resume_stream(decisions, ctx=ctx, by=by))

    async def resume_stream(
        self,
        decisions: Mapping[str, ReviewerDecision | DecisionKind] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        by: str | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """:meth:`resume`, streamed as :meth:`stream` is."""
        ctx = self._bind(ctx)
        if decisions:
            await self.decide(decisions, ctx=ctx, by=by)
        async with contextlib.aclosing(self._stream(None, ctx, resuming=True)) as items:
            async for item in items:
                yield item

    async def decide(
        self,
        decisions: Mapping[str, ReviewerDecision | DecisionKind],
        *,
        ctx: RuntimeContext | None = None,
        by: str | None = None,
    ) -> dict[str, str]:
        """Record decisions without continuing the turn (:meth:`resume` does both).

        Decisions on a background task's requests continue that task here, in the background
        (its result reaches the parent at its next step, as any task's does). Returns those:
        ``{approval id: task id}``.

        Raises as :meth:`resume` does; nothing is recorded unless every decision is valid.
        """
        desk = self._parts.desk
        if desk is None:
            msg = "this agent has no approvals to decide (no approvals= and no gated tool)"
            raise UnknownApproval(msg)
        return await desk.decide(decisions, self._bind(ctx), by=by)

    async def aclose(self) -> None:
        """Stop background work and release what the agent owns.

        Background tasks get ``shutdown_grace_seconds`` (30 s by default) to finish, and are
        then cancelled; subagents are closed; the workspace's memory worker stops when its
        last agent closes; model clients built here from a spec are closed.
        """
        hooks, self._own_hooks = self._own_hooks, ()
        for hook in reversed(hooks):  # the latest in the chain first: subagents before MCP
            await hook.aclose()
        if self.maintenance is not None:
            maintenance, self.maintenance = self.maintenance, None
            await maintenance.release()
        for model in self._owned:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
        self._owned.clear()
        if isinstance(self.leases, FileLeases):  # the lock files it kept open between calls
            self.leases.close_idle()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _bind(self, ctx: RuntimeContext | None) -> RuntimeContext:
        ctx = ctx or RuntimeContext()
        return ctx.with_defaults(session_id=DEFAULT_SESSION_ID, agent=self.name)

    def _session_lock(self, ctx: RuntimeContext) -> asyncio.Lock:
        key = self.sessions.directory(ctx)
        lock = self._session_locks.get(key)
        if lock is None:
            lock = self._session_locks[key] = asyncio.Lock()
        return lock

    def _lease(self, ctx: RuntimeContext) -> contextlib.AbstractAsyncContextManager[None]:
        """The session's lease: other processes and workers wait while this call holds it.

        Keyed by the session's directory, so one directory has one lease however its ids are
        spelled, and two sessions never share one.
        """
        return self.leases.hold(self.sessions.directory(ctx), wait=self.session_wait)

    async def _restore(self, ctx: RuntimeContext) -> tuple[list[Msg], SessionState]:
        if not self._checked:
            await asyncio.to_thread(self.workspace.check)
            self._checked = True
        # Calls waiting for approval stay unanswered for the call that decides them; on a
        # durable agent every unanswered call does, and its journal decides it.
        waiting: Collection[str] = ()
        if self.options.durable:
            waiting = EVERY_CALL
        elif self.approvals is not None:
            waiting = await self.approvals.waiting(self.sessions.directory(ctx))
        # Messages and state in one round trip to the storage (one worker-thread hop).
        return await self.sessions.restore(ctx, waiting=waiting)


def _as_task(message: Msg) -> Msg:
    """A subagent's input as the harness's words: memory takes nothing of it on a user's trust."""
    if message.role != "user" or written_by_harness(message):
        return message
    return message.model_copy(update={"metadata": {**message.metadata, SYNTHETIC: True}})
