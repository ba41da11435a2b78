"""AgentOptions: everything a :class:`~harness.HarnessAgent` is built from, as one frozen value.

``HarnessAgent(**keywords)`` takes these fields as its keywords and
``HarnessAgent.from_options(options)`` takes the value itself; ``agent.options`` is the value
the agent runs with: the one it was given, with what it built in place of specs and defaults
(its models, its :class:`~harness.workspace.WorkspaceManager`, its session leases, its tools and
hooks as tuples), so an agent made from it shares those instead of opening its own.

A subagent is made from its parent's options with :func:`dataclasses.replace`
(:func:`child_options`): what its declaration says replaces the parent's value, and everything
else is the parent's. ``docs/subagents.md`` ("What a child inherits") gives the rule option by
option, and ``tests/unit/subagents/test_inheritance.py`` holds that table and this code equal.

The declarations in ``subagents/*.md`` are the model's to write, so what they can replace only
narrows the parent: ``model:`` is one of ``SubagentsConfig.allowed_models`` (checked by the
catalog), ``max_iters:`` is at most the parent's (likewise), and ``tools:`` is intersected with
the parent's ``allowed_tools``. Tracing, OpenTelemetry, memory and the workspace are not theirs
to change.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from harness.approvals import ApprovalPolicy, ApprovalRule
from harness.compaction import (
    DEFAULT_TOOL_RESULT_EVICTION,
    CompactionConfig,
    ToolResultEvictionConfig,
)
from harness.filesystem.base import AbstractFilesystem
from harness.kernel import DEFAULT_MAX_ITERS, ChatModel, Hook, Tool, Toolkit
from harness.mcp import MCPServerConfig
from harness.memory.config import DEFAULT_MEMORY, MemoryConfig
from harness.session.lease import DEFAULT_SESSION_WAIT, SessionLeases
from harness.session.store import SessionFsync
from harness.stores.base import BaseStore
from harness.subagents import (
    DEFAULT_SUBAGENTS,
    SUBAGENT_CONTEXT,
    Declaration,
    SubagentFactory,
    SubagentsConfig,
)
from harness.workspace import WorkspaceManager
from harness.workspace.context import DEFAULT_WORKSPACE_CONTEXT, WorkspaceContextConfig

__all__ = [
    "DEFAULT_AGENT_NAME",
    "WORKSPACE_ENV",
    "AgentOptions",
    "child_options",
    "default_workspace",
]

DEFAULT_AGENT_NAME: Final = "harness"
"""The name of an agent given none; it names its directory under ``agents/``."""

WORKSPACE_ENV: Final = "HARNESS_WORKSPACE"


def default_workspace() -> Path:
    """``$HARNESS_WORKSPACE``, or ``./.harness/workspace``: where an agent given none works."""
    return Path(os.environ.get(WORKSPACE_ENV) or Path.cwd() / ".harness" / "workspace")


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    """Every option of a :class:`~harness.HarnessAgent`, with its default.

    Sequences given as lists or generators are kept as tuples, and a :class:`Toolkit` given
    as ``tools`` as the tuple of its tools, so the value stays what it was when it was made.

    Args:
        model: A :class:`ChatModel`, or a model spec such as ``"openai:gpt-4o-mini"``
            (the agent then owns the model and closes it in ``aclose``).
        name: The agent's name; it also names its directory under ``agents/``.
        workspace: The workspace directory; default ``$HARNESS_WORKSPACE`` or
            ``./.harness/workspace``.
        sys_prompt: The base system prompt; the workspace section is appended to it.
        tools: Functions (or a :class:`Toolkit`) the model may call.
        hooks: Your own hooks (default priority 100).
        max_iters: Reasoning steps per call.
        workspace_context: What the workspace section holds; None leaves it out.
        filesystem: Where the workspace's files live (:mod:`harness.filesystem`): the local
            directory by default, a sandbox, a store shared by several workers, a composite.
            Memory, sessions, transcripts, tool results and task records all go through it.
        store: A key-value store shared by several workers (e.g. ``RedisStore(url)``): the
            files live there (unless ``filesystem`` says otherwise) and so do the throttles of
            consolidation and maintenance, so one worker at a time runs them.
        filesystem_tools: Offer the model ``read_file``, ``write_file``, ``edit_file``,
            ``grep_files``, ``glob_files``, ``list_files`` (and ``execute`` when the backend can
            run commands) in the caller's namespace.
        allowed_tools: Offer the model only the tools of these names, whatever the other
            options add (MCP servers' tools too); None offers every tool.
        skills: List the workspace's ``skills/<name>/SKILL.md`` in the prompt (names and
            descriptions) and offer ``load_skill`` (unless ``allowed_tools`` leaves it out).
        mcp_servers: MCP servers whose tools join the toolkit as ``<server>__<tool>``; they
            start at the first call (the ``mcp`` extra is needed only when there are some).
        mcp_config: A ``tools.json`` file on this machine listing more MCP servers; it must
            lie outside the workspace, whose files the agent can write (a ``tools.json`` in
            the workspace is not read: ``docs/security.md``).
        memory: Long-term memory (flush, transcripts, search index, memory tools); None turns
            it off.
        memory_model: The model (or spec) that extracts and consolidates memories; the agent's
            model by default.
        tool_result_eviction: Move tool results too large for the context (over 80,000
            characters by default) to files under ``large_tool_results/`` and keep a placeholder
            with their head and tail; the agent gets ``read_file`` to read them back in pieces.
            None keeps every result in the conversation.
        compaction: Summarize long history before it fills the context window, and recover
            from a context overflow by compacting by force and trying the step again; None
            turns it off.
        compaction_model: The model (or spec) that writes summaries; the agent's by default.
        subagents: Delegation to subagents (the built-in ``general-purpose`` one, those of
            ``subagents/*.md``, and yours: a :class:`SubagentsConfig` or a list of
            declarations) with durable background tasks; None turns it off.
        trace: Log every event on the ``harness.trace`` logger and keep a per-session trace,
            ``agents/<agent>/traces/<session>.jsonl`` (read it with ``harness trace``): calls,
            reasoning steps with tokens and latency, tool calls, compactions, evictions, memory
            flushes and background tasks.
        otel: Also emit OpenTelemetry spans following the GenAI semantic conventions, to the
            global tracer provider (the ``otel`` extra).
        session_wait: How long a call waits for its session while another call, in this
            process or another worker, is using it; then it raises :class:`~harness.SessionBusy`.
            One call at a time per session (:mod:`harness.session.lease`).
        session_leases: How calls on one session exclude each other; by default an ``flock``
            beside a local workspace, a lease record in ``store`` (30 s expiry) for a shared
            one (``StoreLeases(store, ttl=...)`` to choose the expiry).
        session_fsync: When the session's saves are synced to the disk, so they survive a power
            loss and not only a crash: ``"step"`` before every model request, ``"turn"`` at
            the end of every call, None (the default) never beyond what a rewrite does
            (:data:`~harness.session.SessionFsync`, ``docs/durability.md``).
        approvals: Tool calls that wait for a person before they run (``docs/approvals.md``):
            an :class:`~harness.approvals.ApprovalPolicy`, ``{tool name or pattern:
            ApprovalRule() or True}``, or a list of tool names. Tools marked with
            :func:`~harness.approvals.requires_approval` wait with or without it. Kept as the
            policy it stands for.
        durable: Journal every step so a turn can be taken over by another worker after its
            own died (the Temporal engine, :mod:`harness.durable`): the model's reply is saved
            before its tools run, every tool call's start and end go to the approvals ledger,
            and a call found unanswered is decided from there: run if it never started, its
            recorded result if it finished, "outcome unknown" if it started and its tool is not
            declared idempotent (``ApprovalPolicy(idempotent=...)``). Costs one save and two
            ledger writes per tool call.
    """

    model: ChatModel | str
    name: str = DEFAULT_AGENT_NAME
    workspace: str | Path | WorkspaceManager | None = None
    sys_prompt: str = ""
    tools: Toolkit | Iterable[Callable[..., Any] | Tool] = ()
    hooks: Iterable[Hook] = ()
    max_iters: int = DEFAULT_MAX_ITERS
    workspace_context: WorkspaceContextConfig | None = DEFAULT_WORKSPACE_CONTEXT
    filesystem: AbstractFilesystem | None = None
    store: BaseStore | None = None
    filesystem_tools: bool = True
    allowed_tools: Iterable[str] | None = None
    memory: MemoryConfig | None = DEFAULT_MEMORY
    memory_model: ChatModel | str | None = None
    tool_result_eviction: ToolResultEvictionConfig | None = DEFAULT_TOOL_RESULT_EVICTION
    compaction: CompactionConfig | None = None
    compaction_model: ChatModel | str | None = None
    subagents: SubagentsConfig | Sequence[Declaration] | None = DEFAULT_SUBAGENTS
    skills: bool = True
    mcp_servers: Sequence[MCPServerConfig] = ()
    mcp_config: str | Path | None = None
    trace: bool = True
    otel: bool = False
    session_wait: float = DEFAULT_SESSION_WAIT
    session_leases: SessionLeases | None = None
    session_fsync: SessionFsync = None
    approvals: ApprovalPolicy | Mapping[str, ApprovalRule | bool] | Iterable[str] | None = None
    durable: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "approvals", ApprovalPolicy.of(self.approvals))
        tools = self.tools.tools if isinstance(self.tools, Toolkit) else self.tools
        object.__setattr__(self, "tools", tuple(tools))
        object.__setattr__(self, "hooks", tuple(self.hooks))
        object.__setattr__(self, "mcp_servers", tuple(self.mcp_servers))
        if self.allowed_tools is not None:
            if isinstance(self.allowed_tools, str):
                msg = (
                    "allowed_tools must be a list of tool names, not the text "
                    f"{self.allowed_tools!r}"
                )
                raise ValueError(msg)
            object.__setattr__(self, "allowed_tools", tuple(self.allowed_tools))
        if self.subagents is not None and not isinstance(self.subagents, SubagentsConfig):
            object.__setattr__(self, "subagents", tuple(self.subagents))


def child_options(parent: AgentOptions, declaration: Declaration) -> AgentOptions:
    """The options of the child ``declaration`` describes, made from its parent's.

    The rule, option by option, is the table of ``docs/subagents.md``. In short: the child has
    the declaration's name, prompt (followed by :data:`~harness.subagents.SUBAGENT_CONTEXT`),
    model and steps, the declaration's tools within the parent's ``allowed_tools``, no
    subagents of its own, and everything else of the parent's, the same objects. A
    :class:`SubagentFactory` receives these options with the parent's model and steps and the
    subagent context alone as the prompt, and may replace anything: it is the operator's code.

    ``parent`` should be an agent's ``options`` (as it runs), so the child shares the parent's
    models, workspace and leases rather than opening its own.
    """
    if isinstance(declaration, SubagentFactory):
        return dataclasses.replace(
            parent, name=declaration.name, sys_prompt=SUBAGENT_CONTEXT, subagents=None
        )
    prompt = "\n\n".join(p for p in (declaration.sys_prompt.strip(), SUBAGENT_CONTEXT) if p)
    return dataclasses.replace(
        parent,
        name=declaration.name,
        sys_prompt=prompt,
        model=declaration.model if declaration.model is not None else parent.model,
        max_iters=declaration.max_iters,
        allowed_tools=_narrowed(parent.allowed_tools, declaration.tools),
        subagents=None,
    )


def _narrowed(
    allowed: Iterable[str] | None, declared: Sequence[str] | None
) -> tuple[str, ...] | None:
    """The tools a child may have: those declared that the parent allows (None: no limit)."""
    if declared is None:
        return None if allowed is None else tuple(allowed)
    if allowed is None:
        return tuple(declared)
    kept = set(allowed)
    return tuple(name for name in declared if name in kept)
