"""How a HarnessAgent is put together: :func:`assemble` builds its parts from its options.

One pass, in the order of :meth:`_Assembler.build`: the models and where things are kept (the
workspace, its sessions and their leases), then one capability per line, each adding its hooks
to the chain and its tools to the toolkit, then the kernel's agent around both. Building is
pure: nothing here runs a call or reads or writes storage, so an agent can be made anywhere (a
subagent, a worker) and costs nothing until its first call.

The chain runs each hook by its own priority; the order of the capability lines only breaks
ties between equal priorities and orders the tools. :data:`HOOK_ORDER` says, event by event,
what runs in which order when every capability is on (``tests/unit/test_hook_order.py`` holds
it to the chain, and ``docs/architecture.md`` shows it). A capability that is off adds nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.approvals import ApprovalDesk, ApprovalGate, ApprovalPolicy, ledger_for
from harness.approvals.policy import marked
from harness.compaction import (
    DEFAULT_TOOL_RESULT_EVICTION,
    ConversationCompactor,
    evictions_cleanup,
)
from harness.context import RuntimeContext
from harness.errors import ConfigError
from harness.filesystem.base import AbstractFilesystem, FileTools, ManagedFilesystem
from harness.hooks import (
    AgentTraceHook,
    ApprovalHook,
    CompactionHook,
    FixedPartCheck,
    MemoryFlushHook,
    MemoryMaintenanceHook,
    SessionPersistenceHook,
    SkillsHook,
    SubagentsHook,
    ToolResultEvictionHook,
    WorkspaceContextHook,
)
from harness.hooks.sandbox_lifecycle import SandboxLifecycleHook
from harness.kernel import ChatModel, Hook, ReActAgent, Toolkit
from harness.mcp import MCPHook
from harness.memory.consolidation import ConsolidationResult
from harness.memory.flush import FlushResult, MemoryFlushManager, flush_mark_path
from harness.memory.gate import PROCESS_GATE, StoreGate
from harness.memory.maintenance import MemoryMaintenance
from harness.memory.provenance import Provenance
from harness.memory.transcript import TranscriptWriter
from harness.models import resolve_model
from harness.observability import record, trace_path
from harness.options import AgentOptions, default_workspace
from harness.session import CompactionLog, SessionFiles, SessionStore
from harness.session.lease import SessionLeases, leases_for
from harness.stores.base import BaseStore
from harness.subagents import (
    SubagentCatalog,
    SubagentsConfig,
    TaskRecord,
    TaskRepository,
    general_purpose,
    waiting_approvals,
)
from harness.tools import FilesystemTools, MemoryTools, SessionTools, SubagentTools
from harness.workspace import WorkspaceManager, safe_segment

__all__ = ["HOOK_ORDER", "USER_HOOKS", "Assembly", "FlushObserver", "MakeAgent", "assemble"]

logger = logging.getLogger(__name__)

FlushObserver = Callable[[RuntimeContext, FlushResult, float], Awaitable[object]]
"""Told of a memory flush: the call's context, what the flush did, and its seconds."""

MakeAgent = Callable[[AgentOptions], Any]
"""Builds an agent from options (``HarnessAgent.from_options``): how a subagent is made."""

USER_HOOKS: Final = "(your hooks)"
"""Where the hooks an application passes in run: at the default priority, 100."""

HOOK_ORDER: Final[Mapping[str, tuple[str, ...]]] = {
    "PreCall": ("AgentTraceHook", "MCPHook", "SandboxLifecycleHook", USER_HOOKS),
    "PreReasoning": (
        "AgentTraceHook",
        "CompactionHook",
        "SubagentsHook",
        "SkillsHook",
        USER_HOOKS,
        "WorkspaceContextHook",
        "SessionPersistenceHook",
        "FixedPartCheck",
    ),
    "ContextOverflow": ("AgentTraceHook", "CompactionHook", USER_HOOKS),
    "PostReasoning": ("AgentTraceHook", USER_HOOKS, "SessionPersistenceHook"),
    "ToolDecision": ("AgentTraceHook", USER_HOOKS, "ApprovalHook"),
    "PreActing": ("AgentTraceHook", USER_HOOKS),
    "PostActing": ("AgentTraceHook", "ToolResultEvictionHook", USER_HOOKS, "ApprovalHook"),
    "PreCompact": ("AgentTraceHook", USER_HOOKS),
    "PostCompact": ("AgentTraceHook", USER_HOOKS, "WorkspaceContextHook"),
    "PostCall": (
        "AgentTraceHook",
        "MemoryFlushHook",
        "MemoryMaintenanceHook",
        "SandboxLifecycleHook",
        USER_HOOKS,
        "SessionPersistenceHook",
        "ApprovalHook",
    ),
    "Error": (
        "AgentTraceHook",
        "SandboxLifecycleHook",
        USER_HOOKS,
        "SessionPersistenceHook",
    ),
}
"""The built-in hooks each event runs, in order, when every capability is on (module docs).

Why each hook sits where it does is in its module's docstring: the trace sees every event
first; memory is flushed before anything else reacts to the end of a call; compaction shapes
the request before the hooks that add to it; the workspace section is appended after them, so
what comes before it stays a stable prefix; the session is saved after every hook that changes
what is saved; the approvals hook has the last word on whether a tool runs.
"""


@dataclass(frozen=True, slots=True)
class Assembly:
    """The parts of one agent, as :func:`assemble` built them."""

    options: AgentOptions
    """The options as the agent runs them: what was built in place of specs and defaults, so
    an agent made from them (a subagent, a sibling) shares those objects."""
    model: ChatModel
    owned: tuple[ChatModel, ...]
    """Models built here from a spec: the agent's to close."""
    workspace: WorkspaceManager
    sessions: SessionStore
    leases: SessionLeases
    provenance: Provenance
    compactions: CompactionLog
    mcp: MCPHook
    flush_observers: list[FlushObserver]
    """Told of every memory flush once it has run, in the background after its call (the trace,
    when on, records it too); ``harness serve`` reports a turn's flush this way."""
    files: SessionFiles
    """What a session keeps besides its directory, forgotten when it is deleted."""
    delegate: ReActAgent
    own_hooks: tuple[Hook, ...]
    """The hooks built here, closed with the agent (the caller's own hooks stay the caller's)."""
    maintenance: MemoryMaintenance | None = None
    compactor: ConversationCompactor | None = None
    tasks: TaskRepository | None = None
    subagents: SubagentsHook | None = None
    approvals: ApprovalGate | None = None
    desk: ApprovalDesk | None = None


def assemble(options: AgentOptions, *, make_agent: MakeAgent) -> Assembly:
    """The parts of the agent ``options`` describe (module docs).

    Raises:
        ConfigError: The options cannot make an agent (a backend without file tools, say).
    """
    return _Assembler(options, make_agent).build()


class _Assembler:
    """What one assembly has built so far: each capability adds to it, in order."""

    def __init__(self, options: AgentOptions, make_agent: MakeAgent) -> None:
        safe_segment(options.name)  # rejects an empty name early
        self.given = options
        self.name = options.name
        self.make_agent = make_agent
        self.owned: list[ChatModel] = []
        self.model = self._model(options.model)
        self.workspace = (
            options.workspace
            if isinstance(options.workspace, WorkspaceManager)
            else WorkspaceManager(
                options.workspace or default_workspace(),
                options.filesystem or _remote(options.store),
                store=options.store,
            )
        )
        if options.store is not None and self.workspace.store is None:
            # Leases and ledgers are shared through the store, whoever made the workspace.
            self.workspace.store = options.store
        self.sessions = SessionStore(self.workspace, self.name, fsync=options.session_fsync)
        self.leases = options.session_leases or leases_for(self.workspace)
        # Our own toolkit: the built-in tools are added to it, never to the caller's.
        tools = options.tools
        self.toolkit = Toolkit(tools.tools if isinstance(tools, Toolkit) else tools)
        self.user_tools = tuple(self.toolkit.tools)
        self.memory_model = (
            self._model(options.memory_model) if options.memory_model is not None else self.model
        )
        self.summarizer = (
            self._model(options.compaction_model) if options.compaction_model else self.model
        )
        self.options = dataclasses.replace(
            options,
            model=self.model,
            workspace=self.workspace,
            tools=self.user_tools,
            memory_model=self.memory_model,
            compaction_model=self.summarizer,
            session_leases=self.leases,
        )
        self.transcript = TranscriptWriter(self.workspace, self.name)
        self.compactions = CompactionLog(self.workspace, self.name)
        # Where each memory entry came from, out of the model's reach.
        self.provenance = Provenance.for_workspace(self.workspace)
        self.flush = (
            MemoryFlushManager(self.workspace, self.memory_model, agent=self.name)
            if options.memory is not None
            else None
        )
        self.flush_observers: list[FlushObserver] = []
        self.mcp = MCPHook(
            options.mcp_servers,
            config_file=options.mcp_config,
            workspace=self.workspace,
            allowed=options.allowed_tools,
        )
        # What the capabilities set when they are on.
        self.maintenance: MemoryMaintenance | None = None
        self.compactor: ConversationCompactor | None = None
        self.tasks: TaskRepository | None = None
        self.subagents: SubagentsHook | None = None
        self.approvals: ApprovalGate | None = None
        self.desk: ApprovalDesk | None = None

    def build(self) -> Assembly:
        options = self.options
        user_hooks = tuple(options.hooks)
        # One line per capability (module docs).
        chain: list[Hook] = [
            *self._tracing(),
            self.mcp,
            *self._memory(),
            *self._compacting(),
            *self._file_tools(),
            *self._sandbox(),
            *self._delegation(),
            *self._skills(),
            *user_hooks,
            *self._workspace_context(),
            *self._gating(),
            SessionPersistenceHook(self.sessions, replies=options.durable),
        ]
        delegate = ReActAgent(
            name=self.name,
            model=self.model,
            sys_prompt=options.sys_prompt,
            toolkit=self.toolkit,
            hooks=chain,
            max_iters=options.max_iters,
        )
        if self.approvals is not None:  # edits are checked against the tools the model has
            self.approvals.tools = delegate.toolkit.get  # MCP's too, registered as they start
        allowed = options.allowed_tools
        if allowed is not None:  # after the hooks added theirs; the MCP hook filters its own
            for tool_name in delegate.toolkit.names:
                if tool_name not in allowed:
                    delegate.toolkit.remove(tool_name)
        return Assembly(
            options=options,
            model=self.model,
            owned=tuple(self.owned),
            workspace=self.workspace,
            sessions=self.sessions,
            leases=self.leases,
            provenance=self.provenance,
            compactions=self.compactions,
            mcp=self.mcp,
            flush_observers=self.flush_observers,
            files=SessionFiles(self.workspace, self._session_files),
            delegate=delegate,
            own_hooks=tuple(hook for hook in chain if hook not in user_hooks),
            maintenance=self.maintenance,
            compactor=self.compactor,
            tasks=self.tasks,
            subagents=self.subagents,
            approvals=self.approvals,
            desk=self.desk,
        )

    # --- capabilities: each builds its hooks (and registers its tools) -----------------------

    def _tracing(self) -> list[Hook]:
        """A trace of every event of every call (and OpenTelemetry spans with ``otel``)."""
        if not self.options.trace:
            return []
        return [AgentTraceHook(self.workspace, agent_name=self.name, otel=self.options.otel)]

    def _memory(self) -> list[Hook]:
        """Memory: its flush, transcript and consolidation after each call, and its tools."""
        memory, store = self.options.memory, self.options.store
        if memory is None:
            return []
        eviction = self.options.tool_result_eviction or DEFAULT_TOOL_RESULT_EVICTION
        self.maintenance = maintenance = MemoryMaintenance.for_workspace(
            self.workspace,
            gate=StoreGate(store) if store is not None else PROCESS_GATE,
            config=memory,
            model=self.memory_model,
            cleanup=evictions_cleanup(self.workspace, eviction),
        )
        hooks: list[Hook] = [
            MemoryFlushHook(
                flush=self.flush if memory.flush else None,
                transcript=self.transcript if memory.offload else None,
                maintenance=maintenance,
                on_flush=self._flushed,
            )
        ]
        if memory.auto_consolidate:
            hooks.append(
                MemoryMaintenanceHook(
                    maintenance,
                    on_consolidated=self._trace_consolidation if self.options.trace else None,
                )
            )
        if memory.tools:
            tools = MemoryTools(self.workspace, maintenance)
            for tool in [*tools.tools(), *SessionTools(self.workspace, self.name).tools()]:
                self.toolkit.register(tool)
        return hooks

    def _compacting(self) -> list[Hook]:
        """Compaction before each model call; the same hook recovers from an overflow."""
        compaction = self.options.compaction
        if compaction is None:
            return []
        self.compactor = ConversationCompactor(
            self.summarizer,
            flush=self.flush if compaction.flush_before else None,
            transcript=self.transcript if compaction.offload_before else None,
        )
        hooks: list[Hook] = [CompactionHook(self.compactor, compaction, log=self.compactions)]
        if compaction.context_window is not None:  # a fixed part too big for it is refused
            hooks.append(FixedPartCheck(compaction))
        return hooks

    def _file_tools(self) -> list[Hook]:
        """The file tools, and big tool results evicted to files that ``read_file`` reads.

        Raises:
            ConfigError: The workspace's backend only stores (no file tools), and file tools or
                eviction (whose placeholder says to read the result back) are asked for.
        """
        backend, toolkit = self.workspace.backend, self.toolkit
        enabled, eviction = self.options.filesystem_tools, self.options.tool_result_eviction
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

    def _delegation(self) -> list[Hook]:
        """Subagents: their catalog, the task repository, and the tools that spawn them."""
        subagents = self.options.subagents
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
            on_finish=self._trace_task if self.options.trace else None,
        )
        # A child is made from these options (harness.options.child_options), and built by
        # the agent class passed down, so nothing below imports the agent module.
        spawning = SubagentTools(
            agent=self.name,
            catalog=catalog,
            workspace=self.workspace,
            options=self.options,
            make_agent=self.make_agent,
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

    def _skills(self) -> list[Hook]:
        """The workspace's skills, listed in the system prompt."""
        allowed = self.options.allowed_tools
        enabled = self.options.skills and (allowed is None or "load_skill" in allowed)
        return [SkillsHook(self.workspace)] if enabled else []

    def _workspace_context(self) -> list[Hook]:
        """AGENTS.md, MEMORY.md and the recent daily logs in the system prompt."""
        config, memory = self.options.workspace_context, self.options.memory
        if config is None:
            return []
        return [
            WorkspaceContextHook(
                self.workspace,
                agent_name=self.name,
                config=config,
                auto_memory=memory is not None and memory.flush,
            )
        ]

    def _gating(self) -> list[Hook]:
        """Approvals: the operator's gates, and tools that say they need one."""
        policy = ApprovalPolicy.of(self.options.approvals)
        durable = self.options.durable  # every call is journaled in the ledger, gated or not
        if policy is None and not durable and not any(marked(t.func) for t in self.user_tools):
            return []
        gate = ApprovalGate(policy or ApprovalPolicy(), ledger_for(self.workspace), journal=durable)
        self.approvals = gate
        self.desk = ApprovalDesk(
            gate,
            session_of=self.sessions.directory,
            waiting=functools.partial(waiting_approvals, gate, self.sessions, self.tasks),
            continue_task=self.subagents.spawning.continue_task if self.subagents else None,
        )
        if self.subagents is not None:  # a subagent's waiting call is decided through this one
            gate.continue_child = self.subagents.spawning.continue_child
            self.subagents.tasks.on_wait = self._task_waits
        return [ApprovalHook(gate, self.sessions.directory)]

    # --- what the capabilities are told, and what a deleted session leaves -------------------

    async def _task_waits(self, record: TaskRecord, pending: Sequence[Mapping[str, Any]]) -> None:
        """A background task's child waits: its requests become its parent session's."""
        assert self.approvals is not None
        ctx = RuntimeContext(session_id=record.session_id, user_id=record.user_id)
        key = self.sessions.directory(ctx)
        await self.approvals.delegated(key, self.name, ctx, pending, task_id=record.task_id)

    async def _flushed(self, ctx: RuntimeContext, result: FlushResult, seconds: float) -> None:
        if self.options.trace:
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

    def _session_files(self, ctx: RuntimeContext) -> list[str]:
        """The files of a session outside its directory (its trace, flush mark, compactions)."""
        assert ctx.session_id is not None
        return [
            flush_mark_path(self.name, ctx),
            trace_path(self.name, ctx.session_id),
            self.compactions.path(ctx.session_id),
        ]

    def _model(self, model: ChatModel | str) -> ChatModel:
        if isinstance(model, str):
            built = resolve_model(model)
            self.owned.append(built)
            return built
        return model


def _remote(store: BaseStore | None) -> AbstractFilesystem | None:
    """The workspace kept in ``store`` (None without a store)."""
    if store is None:
        return None
    from harness.filesystem.remote import RemoteFilesystem

    return RemoteFilesystem(store)
