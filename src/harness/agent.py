"""HarnessAgent: a ReActAgent with a workspace, saved sessions and the harness's hooks.

It is not a second reasoning loop. It builds a :class:`~harness.kernel.ReActAgent` with the
built-in hooks and tools, and for each call it binds the call's :class:`RuntimeContext`, loads
that session's saved conversation, and hands both to the delegate. Nothing about a call is kept
in the agent's fields, so one agent serves concurrent calls for different users and sessions;
calls on the *same* session are serialized so they cannot overwrite each other's turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from harness.approvals import (
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRule,
    DecisionKind,
    PendingApproval,
    ReviewerDecision,
    ledger_for,
)
from harness.approvals.policy import marked
from harness.compaction import (
    DEFAULT_TOOL_RESULT_EVICTION,
    CompactionConfig,
    ConversationCompactor,
    ToolResultEvictionConfig,
    evictions_cleanup,
)
from harness.context import DEFAULT_SESSION_ID, RuntimeContext
from harness.errors import ConfigError, ContextOverflowError, HarnessError, UnknownApproval
from harness.filesystem.base import AbstractFilesystem, FileTools, ManagedFilesystem
from harness.hooks import (
    DEFAULT_WORKSPACE_CONTEXT,
    AgentTraceHook,
    ApprovalHook,
    CompactionHook,
    FixedPartCheck,
    MemoryFlushHook,
    MemoryMaintenanceHook,
    MemoryProvenanceHook,
    SessionPersistenceHook,
    SkillsHook,
    SubagentsHook,
    ToolResultEvictionHook,
    WorkspaceContextConfig,
    WorkspaceContextHook,
)
from harness.hooks.sandbox_lifecycle import SandboxLifecycleHook
from harness.kernel import (
    DEFAULT_MAX_ITERS,
    SYNTHETIC,
    ChatModel,
    Ended,
    Failed,
    Finished,
    Hook,
    Msg,
    ReActAgent,
    SessionState,
    StreamItem,
    Tool,
    Toolkit,
    as_messages,
    ended,
    unanswered_calls,
    written_by_harness,
)
from harness.mcp import MCPHook, MCPServerConfig
from harness.memory.config import DEFAULT_MEMORY, MemoryConfig
from harness.memory.consolidation import ConsolidationResult
from harness.memory.flush import FlushResult, MemoryFlushManager, flush_mark_path
from harness.memory.gate import PROCESS_GATE, StoreGate
from harness.memory.maintenance import MemoryMaintenance
from harness.memory.provenance import Provenance, TurnTrust
from harness.memory.transcript import TranscriptWriter
from harness.models import resolve_model
from harness.observability import record, trace_path
from harness.options import DEFAULT_AGENT_NAME, AgentOptions
from harness.session import CompactionLog, SessionFsync, SessionStore
from harness.session.keys import session_key
from harness.session.lease import DEFAULT_SESSION_WAIT, FileLeases, SessionLeases, leases_for
from harness.stores.base import BaseStore
from harness.subagents import (
    DEFAULT_SUBAGENTS,
    Declaration,
    SubagentCatalog,
    SubagentsConfig,
    TaskRecord,
    TaskRepository,
    general_purpose,
    spawn_depth,
    waiting_approvals,
)
from harness.tools import FilesystemTools, MemoryTools, SessionTools, SubagentTools
from harness.workspace import WorkspaceManager, safe_segment, scoped

__all__ = ["DEFAULT_AGENT_NAME", "FlushObserver", "HarnessAgent", "default_workspace"]

logger = logging.getLogger(__name__)

FlushObserver = Callable[[RuntimeContext, FlushResult, float], Awaitable[object]]
"""Told of a memory flush: the call's context, what the flush did, and its seconds."""

WORKSPACE_ENV: Final = "HARNESS_WORKSPACE"


def _remote(store: BaseStore | None) -> AbstractFilesystem | None:
    """The workspace kept in ``store`` (None without a store)."""
    if store is None:
        return None
    from harness.filesystem.remote import RemoteFilesystem

    return RemoteFilesystem(store)


_OPTION_NAMES: Final = frozenset(field.name for field in dataclasses.fields(AgentOptions))


def _last_reply(memory: Sequence[Msg], ctx: RuntimeContext) -> Msg:
    """The session's last answer, for a resume that finds nothing waiting."""
    for message in reversed(memory):
        if message.role == "assistant":
            return message
    msg = f"session {ctx.session_id!r} has no tool call waiting for a decision, and no reply"
    raise UnknownApproval(msg)


def default_workspace() -> Path:
    """``$HARNESS_WORKSPACE``, or ``./.harness/workspace``."""
    return Path(os.environ.get(WORKSPACE_ENV) or Path.cwd() / ".harness" / "workspace")


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
    ) -> None:
        # The keywords are the options' fields, so the value is made from the arguments as
        # they came (tests/unit/test_options.py holds the signature and the fields equal).
        given = {key: value for key, value in locals().items() if key in _OPTION_NAMES}
        options = AgentOptions(**given)
        safe_segment(options.name)  # rejects an empty name early
        self.name = name = options.name
        # Models built here from a spec are the agent's to close.
        self._owned: list[ChatModel] = []
        self.model = self._model(options.model)
        self.workspace = (
            options.workspace
            if isinstance(options.workspace, WorkspaceManager)
            else WorkspaceManager(
                options.workspace or default_workspace(),
                options.filesystem or _remote(options.store),
            )
        )
        self.sessions = SessionStore(self.workspace, name, fsync=options.session_fsync)
        self.leases = options.session_leases or leases_for(self.workspace, options.store)
        self.session_wait = options.session_wait
        # Our own toolkit: the built-in tools are added to it, never to the caller's.
        tools = options.tools
        toolkit = Toolkit(tools.tools if isinstance(tools, Toolkit) else tools)
        user_tools, user_hooks = tuple(toolkit.tools), tuple(options.hooks)
        allowed = options.allowed_tools
        self.compactions = CompactionLog(self.workspace, name)
        self.mcp = MCPHook(
            options.mcp_servers,
            config_file=options.mcp_config,
            workspace=self.workspace,
            allowed=allowed,
        )
        memory = options.memory
        memory_llm = (
            self._model(options.memory_model) if options.memory_model is not None else self.model
        )
        summarizer = (
            self._model(options.compaction_model) if options.compaction_model else self.model
        )
        # The options as this agent runs them: what it built in place of specs and defaults,
        # so an agent made from them (a subagent, a sibling) shares those objects.
        self.options = dataclasses.replace(
            options,
            model=self.model,
            workspace=self.workspace,
            tools=user_tools,
            memory_model=memory_llm,
            compaction_model=summarizer,
            session_leases=self.leases,
        )
        transcript = TranscriptWriter(self.workspace, name)
        # Where each memory entry came from, out of the model's reach, and the judgement of
        # each running turn that memory_save is recorded with.
        self.provenance = Provenance.for_workspace(self.workspace, options.store)
        self._turns = TurnTrust()
        flush = (
            MemoryFlushManager(self.workspace, memory_llm, agent=name, provenance=self.provenance)
            if memory is not None
            else None
        )
        trace = options.trace
        eviction = options.tool_result_eviction
        # What the capabilities below set when they are on.
        self.maintenance: MemoryMaintenance | None = None
        # Told of every memory flush once it has run, in the background after its call (the
        # trace, when on, records it too); `harness serve` reports a turn's flush this way.
        self.flush_observers: list[FlushObserver] = []
        self.compaction = options.compaction
        self.compactor: ConversationCompactor | None = None
        self.tasks: TaskRepository | None = None
        self.subagents: SubagentsHook | None = None  # holds the subagent tools, for direct use
        self.approvals: ApprovalGate | None = None
        # One line per capability. The chain runs hooks by their own priority (each hook's
        # module says why it is what it is); this order breaks ties and orders the tools.
        chain: list[Hook] = [
            *self._tracing(trace, otel=options.otel),
            self.mcp,
            *self._memory(
                memory,
                memory_llm,
                flush,
                transcript,
                options.store,
                eviction,
                toolkit,
                trace=trace,
            ),
            *self._compacting(options.compaction, summarizer, flush, transcript),
            *self._file_tools(toolkit, options.filesystem_tools, eviction),
            *self._sandbox(),
            *self._delegation(options.subagents, trace=trace),
            *self._skills(options.skills and (allowed is None or "load_skill" in allowed)),
            *user_hooks,
            *self._workspace_context(options.workspace_context, memory),
            *self._gating(ApprovalPolicy.of(options.approvals), user_tools, options.store),
            SessionPersistenceHook(self.sessions),
        ]
        # The hooks built here, closed with the agent; the caller's own hooks stay the caller's.
        self._own_hooks = tuple(hook for hook in chain if hook not in user_hooks)

        self.delegate = ReActAgent(
            name=name,
            model=self.model,
            sys_prompt=options.sys_prompt,
            toolkit=toolkit,
            hooks=chain,
            max_iters=options.max_iters,
        )
        if allowed is not None:  # after the hooks added theirs; the MCP hook filters its own
            for tool_name in self.delegate.toolkit.names:
                if tool_name not in allowed:
                    self.delegate.toolkit.remove(tool_name)
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
        self, msgs: str | Msg | Sequence[Msg] | None = None, *, ctx: RuntimeContext | None = None
    ) -> Ended:
        """Continue the context's session with new input; returns how the turn ended.

        :class:`~harness.kernel.Finished` carries the reply; :class:`~harness.kernel.Paused`
        the tool calls that wait for a decision (:meth:`resume` continues the turn). A
        cancelled or failed turn raises its error. This is :meth:`stream`, consumed: one turn
        engine whether or not anyone watches.

        Args:
            msgs: A user text, a message, a list of messages, or nothing.
            ctx: Who the call is for and which session it continues (``"default"`` if unset).
        """
        return await ended(self.stream(msgs, ctx=ctx))

    def stream(
        self, msgs: str | Msg | Sequence[Msg] | None = None, *, ctx: RuntimeContext | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        """Continue the context's session, yielding deltas and tool activity, then the outcome.

        The last item is the turn's outcome (:mod:`harness.kernel.outcome`), a failure
        included. The session's messages and state
        are loaded under its lease and saved as the turn goes
        (:mod:`harness.hooks.session_persistence`); a context overflow is compacted and the step
        tried again when ``compaction`` is on (:mod:`harness.hooks.compaction`).
        """
        return self._stream(msgs, self._bind(ctx))  # the generator itself: no layer between

    async def _stream(
        self,
        msgs: str | Msg | Sequence[Msg] | None,
        ctx: RuntimeContext,
        *,
        resuming: bool = False,
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
                async for item in self.delegate.stream(msgs, ctx=ctx, memory=memory, state=state):
                    yield self._advised(item)

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
        if self.approvals is None:
            return []
        return await waiting_approvals(self.approvals, self.sessions, self.tasks, self._bind(ctx))

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
        assert ctx.session_id is not None
        async with self._session_lock(ctx), self._lease(ctx):
            if self.maintenance is not None:
                # The last call's transcript and flush, still running after it returned,
                # would write the conversation back.
                pending = self.maintenance.pending(session_key(ctx))
                if pending is not None:
                    await asyncio.wait({pending})
            directory = self.sessions.directory(ctx)
            saved = [info.path for info in await self.workspace.list_own(directory)]
            paths = [
                *saved,
                scoped(flush_mark_path(self.name, ctx), ctx.user_id),
                scoped(trace_path(self.name, ctx.session_id), ctx.user_id),
                scoped(self.compactions.path(ctx.session_id), ctx.user_id),
            ]
            for path in paths:
                await self.workspace.delete(path)
            transcripts = await TranscriptWriter(self.workspace, self.name).forget(ctx)
            if self.maintenance is not None:
                for path in transcripts:  # gone: the index drops their rows, every worker's
                    try:
                        await self.maintenance.index_file(path)
                    except HarnessError as exc:  # the next re-index drops them
                        logger.warning("could not drop %s from the memory index: %s", path, exc)
            return bool(saved)

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
        if self.approvals is None:
            msg = "this agent has no approvals to decide (no approvals= and no gated tool)"
            raise UnknownApproval(msg)
        given = {
            ident: d if isinstance(d, ReviewerDecision) else ReviewerDecision(d)
            for ident, d in decisions.items()
        }
        ctx = self._bind(ctx)
        key = self.sessions.directory(ctx)
        await self.approvals.record(key, given, by=by)
        if self.subagents is None:
            return {}
        tasks = await self.approvals.tasks_decided(key, given)
        for task_id, (child_key, taken) in tasks.items():
            await self.subagents.spawning.continue_task(task_id, child_key, taken, ctx)
        return {ident: task for task, (_, taken) in tasks.items() for ident in given.keys() & taken}

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

    # --- capabilities: each builds its hooks (and registers its tools) -----------------------

    def _tracing(self, trace: bool, *, otel: bool) -> list[Hook]:
        """A trace of every event of every call (and OpenTelemetry spans with ``otel``)."""
        return [AgentTraceHook(self.workspace, agent_name=self.name, otel=otel)] if trace else []

    def _memory(
        self,
        memory: MemoryConfig | None,
        model: ChatModel,
        flush: MemoryFlushManager | None,
        transcript: TranscriptWriter,
        store: BaseStore | None,
        eviction: ToolResultEvictionConfig | None,
        toolkit: Toolkit,
        *,
        trace: bool,
    ) -> list[Hook]:
        """Memory: its flush, transcript and consolidation after each call, and its tools."""
        if memory is None:
            return []
        self.maintenance = MemoryMaintenance.for_workspace(
            self.workspace,
            gate=StoreGate(store) if store is not None else PROCESS_GATE,
            config=memory,
            model=model,
            cleanup=evictions_cleanup(self.workspace, eviction or DEFAULT_TOOL_RESULT_EVICTION),
            provenance=self.provenance,
        )
        hooks: list[Hook] = [
            MemoryFlushHook(
                flush=flush if memory.flush else None,
                transcript=transcript if memory.offload else None,
                maintenance=self.maintenance,
                on_flush=functools.partial(self._flushed, trace=trace),
            )
        ]
        if memory.auto_consolidate:
            hooks.append(
                MemoryMaintenanceHook(
                    self.maintenance,
                    on_consolidated=self._trace_consolidation if trace else None,
                )
            )
        if memory.tools:
            hooks.append(MemoryProvenanceHook(self._turns))
            tools = MemoryTools(
                self.workspace, self.maintenance, provenance=self.provenance, turns=self._turns
            )
            for tool in [
                *tools.tools(),
                *SessionTools(self.workspace, self.name).tools(),
            ]:
                toolkit.register(tool)
        return hooks

    def _compacting(
        self,
        compaction: CompactionConfig | None,
        summarizer: ChatModel,
        flush: MemoryFlushManager | None,
        transcript: TranscriptWriter,
    ) -> list[Hook]:
        """Compaction before each model call; the same hook recovers from an overflow."""
        if compaction is None:
            return []
        self.compactor = ConversationCompactor(
            summarizer,
            flush=flush if compaction.flush_before else None,
            transcript=transcript if compaction.offload_before else None,
        )
        hooks: list[Hook] = [CompactionHook(self.compactor, compaction, log=self.compactions)]
        if compaction.context_window is not None:  # a fixed part too big for it is refused
            hooks.append(FixedPartCheck(compaction))
        return hooks

    def _file_tools(
        self, toolkit: Toolkit, enabled: bool, eviction: ToolResultEvictionConfig | None
    ) -> list[Hook]:
        """The file tools, and big tool results evicted to files that ``read_file`` reads.

        Raises:
            ConfigError: The workspace's backend only stores (no file tools), and file tools or
                eviction (whose placeholder says to read the result back) are asked for.
        """
        backend = self.workspace.backend
        if not isinstance(backend, FileTools):
            if enabled or eviction is not None:
                msg = (
                    f"the workspace's backend {type(backend).__name__} offers no file tools; "
                    "pass filesystem_tools=False and tool_result_eviction=None, or a backend "
                    "that is an AbstractFilesystem"
                )
                raise ConfigError(msg)
            return []
        file_tools = FilesystemTools(backend)
        if enabled:
            for tool in file_tools.tools():
                if tool.__name__ not in toolkit:
                    toolkit.register(tool)
        elif eviction is not None and "read_file" not in toolkit:
            toolkit.register(file_tools.read_file)  # the placeholder says to read it back
        if eviction is None:
            return []
        return [ToolResultEvictionHook(self.workspace, agent_name=self.name, config=eviction)]

    def _sandbox(self) -> list[Hook]:
        """A sandboxed workspace started and stopped around each call."""
        backend = self.workspace.backend
        return [SandboxLifecycleHook(backend)] if isinstance(backend, ManagedFilesystem) else []

    def _delegation(
        self,
        subagents: SubagentsConfig | Sequence[Declaration] | None,
        *,
        trace: bool,
    ) -> list[Hook]:
        """Subagents: their catalog, the task repository, and the tools that spawn them."""
        if subagents is None:
            return []
        config = (
            subagents
            if isinstance(subagents, SubagentsConfig)
            else SubagentsConfig(declarations=tuple(subagents))
        )
        max_iters = self.options.max_iters
        catalog = SubagentCatalog(
            self.workspace,
            config.declarations,
            general_purpose=general_purpose(max_iters) if config.general_purpose else None,
            refresh_seconds=config.refresh_seconds,
            allowed_models=config.allowed_models,
            max_declared_iters=max_iters,
        )
        self.tasks = TaskRepository(
            self.workspace,
            self.name,
            max_running=config.max_running,
            heartbeat_seconds=config.heartbeat_seconds,
            stale_after_seconds=config.stale_after_seconds,
            on_finish=self._trace_task if trace else None,
        )
        # A child is made from these options (harness.options.child_options), and built as a
        # HarnessAgent passed down, so the subagents package never imports this module.
        spawning = SubagentTools(
            agent=self.name,
            catalog=catalog,
            workspace=self.workspace,
            options=self.options,
            make_agent=HarnessAgent.from_options,
            tasks=self.tasks,
            config=config,
        )
        self.subagents = SubagentsHook(
            catalog,
            self.tasks,
            spawning,
            notice_lines=config.notice_lines,
            shutdown_grace_seconds=config.shutdown_grace_seconds,
        )
        return [self.subagents]

    def _gating(
        self, policy: ApprovalPolicy | None, tools: Sequence[Tool], store: BaseStore | None
    ) -> list[Hook]:
        """Approvals: the operator's gates, and tools that say they need one."""
        if policy is None and not any(marked(tool.func) for tool in tools):
            return []
        self.approvals = ApprovalGate(policy or ApprovalPolicy(), ledger_for(self.workspace, store))
        if self.subagents is not None:  # a subagent's waiting call is decided through this one
            self.approvals.continue_child = self.subagents.spawning.continue_child
            self.subagents.tasks.on_wait = self._task_waits
        return [ApprovalHook(self.approvals, self.sessions.directory)]

    async def _task_waits(self, record: TaskRecord, pending: Sequence[Mapping[str, Any]]) -> None:
        """A background task's child waits: its requests become its parent session's."""
        assert self.approvals is not None
        ctx = RuntimeContext(session_id=record.session_id, user_id=record.user_id)
        key = self.sessions.directory(ctx)
        await self.approvals.delegated(key, self.name, ctx, pending, task_id=record.task_id)

    def _skills(self, enabled: bool) -> list[Hook]:
        """The workspace's skills, listed in the system prompt."""
        return [SkillsHook(self.workspace)] if enabled else []

    def _workspace_context(
        self, config: WorkspaceContextConfig | None, memory: MemoryConfig | None
    ) -> list[Hook]:
        """AGENTS.md, MEMORY.md and the recent daily logs in the system prompt."""
        if config is None:
            return []
        auto_memory = memory is not None and memory.flush
        return [
            WorkspaceContextHook(
                self.workspace,
                agent_name=self.name,
                config=config,
                auto_memory=auto_memory,
                provenance=self.provenance,
            )
        ]

    async def _flushed(
        self, ctx: RuntimeContext, result: FlushResult, seconds: float, *, trace: bool
    ) -> None:
        if trace:
            await record(
                self.workspace,
                self.name,
                ctx,
                "memory_flush",
                path=result.path,
                messages=result.messages,
                latency_s=round(seconds, 4),
            )
        for observer in list(self.flush_observers):
            try:
                await observer(ctx, result, seconds)
            except Exception:  # an observer's failure is its own, never the flush's
                logger.exception("a memory flush observer failed")

    async def _trace_consolidation(self, ctx: RuntimeContext, result: ConsolidationResult) -> None:
        await record(
            self.workspace,
            self.name,
            ctx,
            "memory_consolidation",
            updated=result.updated,
            refused=result.refused,
            reason=result.reason,
            merged=list(result.merged),
        )

    async def _trace_task(self, task: TaskRecord) -> None:
        ctx = RuntimeContext(session_id=task.session_id, user_id=task.user_id)
        await record(
            self.workspace,
            self.name,
            ctx,
            "task",
            task_id=task.task_id,
            subagent=task.agent_id,
            status=task.describe_status,
        )

    def _model(self, model: ChatModel | str) -> ChatModel:
        if isinstance(model, str):
            built = resolve_model(model)
            self._owned.append(built)
            return built
        return model

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
        # Calls waiting for approval stay unanswered for the call that decides them.
        waiting = (
            await self.approvals.waiting(self.sessions.directory(ctx)) if self.approvals else ()
        )
        # Messages and state in one round trip to the storage (one worker-thread hop).
        return await self.sessions.restore(ctx, waiting=waiting)


def _as_task(message: Msg) -> Msg:
    """A subagent's input as the harness's words: memory takes nothing of it on a user's trust."""
    if message.role != "user" or written_by_harness(message):
        return message
    return message.model_copy(update={"metadata": {**message.metadata, SYNTHETIC: True}})
