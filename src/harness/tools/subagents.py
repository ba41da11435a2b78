"""The subagent tools: ``agent_spawn``, ``agent_send`` and ``agent_list``.

A spawned child is registered under an *agent key* (``agent:<agent id>:<hex>``) and, if given, a
label, in the registry of the caller's (user, session): one user's session never sees, and
cannot send to, another's children. ``agent_send`` continues the same child, so follow-ups keep
its conversation. The registry is also kept in the workspace
(``agents/<agent>/children/<session>.json`` in the caller's namespace), so a later process, or
another worker on the same store, continues the child: it is rebuilt from its declaration and
its session is restored (the original forgot every child on restart).

Waiting: ``timeout_seconds`` None waits 30 s, 0 (or less) runs in the background and returns a
task id at once, more is capped at 600 s. A run still going when the wait ends is *promoted*:
it keeps running as a background task whose result ``task_output`` returns later (the
original reported an error and left the child running unobserved). If the parent's call is
cancelled while it waits, the child is cancelled with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, cast

from harness.approvals import ReviewerDecision
from harness.context import DEFAULT_SESSION_ID, RuntimeContext
from harness.errors import HarnessError
from harness.kernel import Ended, Finished, Paused, ToolFailure
from harness.mcp.config import TOOL_SEPARATOR
from harness.options import AgentOptions, child_options
from harness.subagents.children import SPAWN_DEPTH_KEY, SubagentAgent, close_child, spawn_depth
from harness.subagents.config import SubagentsConfig
from harness.subagents.declarations import Declaration, SubagentCatalog, SubagentFactory
from harness.subagents.tasks import TaskRecord, TaskRepository
from harness.workspace import AGENTS_DIR, CHILDREN_DIR, WorkspaceManager, safe_segment

__all__ = ["SubagentTools", "accepted_block", "build_child"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Child:
    """A spawned child, as its registry keeps it."""

    key: str
    agent_id: str
    label: str | None
    depth: int
    session_id: str


@dataclass(slots=True)
class _Registry:
    """The children of one (user, session), and the agents built for them in this process."""

    by_key: dict[str, _Child]
    by_label: dict[str, str]
    agents: dict[str, SubagentAgent]

    def add(self, child: _Child) -> None:
        self.by_key.setdefault(child.key, child)
        if child.label is not None:
            self.by_label.setdefault(child.label.lower(), child.key)


def build_child(
    declaration: Declaration,
    parent: AgentOptions,
    make_agent: Callable[[AgentOptions], Any],
) -> SubagentAgent:
    """Build the agent a declaration describes, from its parent's options.

    ``make_agent`` builds an agent from options (``HarnessAgent.from_options``: the parent
    passes it, so nothing here imports the agent module). A :class:`SubagentFactory` builds
    its own child from the same options.

    Raises:
        ConfigError: The declaration's model spec is malformed or its provider is missing.
    """
    options = child_options(parent, declaration)
    if isinstance(declaration, SubagentFactory):
        return declaration.build(options)
    child = make_agent(options)
    if declaration.tools is not None:
        names = set(child.delegate.toolkit.names)
        mcp = bool(options.mcp_servers) or options.mcp_config is not None
        unknown = sorted(
            name
            for name in set(declaration.tools) - names
            if not (mcp and TOOL_SEPARATOR in name)  # an MCP server's: registered at its start
        )
        if unknown:
            logger.warning(
                "subagent %r (%s) allows tools it does not have: %s",
                declaration.name,
                declaration.source,
                ", ".join(unknown),
            )
    return cast(SubagentAgent, child)


def accepted_block(task_id: str) -> str:
    """What the model is told when a task is accepted to run in the background."""
    return (
        f"status: accepted\ntask_id: {task_id}\n"
        f"It runs in the background. Use task_output(task_id='{task_id}') for its result, "
        f"task_cancel(task_id='{task_id}') to stop it, or task_list() to see all tasks."
    )


def _promoted_block(task_id: str, waited: float) -> str:
    return (
        f"status: timeout_promoted\ntask_id: {task_id}\n"
        f"No reply within {waited:g} s; the run continues in the background. "
        f"Use task_output(task_id='{task_id}') for its result when it finishes."
    )


class SubagentTools:
    """Spawning and talking to subagents, for one parent agent."""

    def __init__(
        self,
        *,
        agent: str,
        catalog: SubagentCatalog,
        workspace: WorkspaceManager,
        options: AgentOptions,
        make_agent: Callable[[AgentOptions], Any],
        tasks: TaskRepository,
        config: SubagentsConfig,
    ) -> None:
        self.directory = f"{AGENTS_DIR}/{safe_segment(agent)}/{CHILDREN_DIR}"
        self.catalog = catalog
        self.workspace = workspace
        self.options = options
        self.make_agent = make_agent
        self.tasks = tasks
        self.config = config
        self._registries: dict[tuple[str | None, str | None], _Registry] = {}

    def tools(self) -> list[Callable[..., Any]]:
        return [self.agent_spawn, self.agent_send, self.agent_list]

    async def agent_spawn(
        self,
        agent_id: str,
        ctx: RuntimeContext,
        task: str | None = None,
        label: str | None = None,
        timeout_seconds: float | None = None,
    ) -> str | Paused:
        """Start a subagent, optionally giving it a task.

        The reply always holds an ``agent_key:`` line; pass that key to agent_send to continue
        the same subagent.

        Args:
            agent_id: Which subagent to start (one of the available agent ids).
            task: The task to give it. Omit to start a persistent subagent you talk to with
                agent_send.
            label: A short name of your own for this subagent, usable in agent_send.
            timeout_seconds: How long to wait for its reply (default 30, at most 600). 0 runs
                it in the background and returns a task_id at once.
        """
        if not agent_id or not agent_id.strip():
            return ToolFailure("Error: agent_id is required")
        depth = spawn_depth(ctx) + 1
        if depth > self.config.max_depth:
            return ToolFailure(f"Error: Maximum spawn depth exceeded (max={self.config.max_depth})")
        entries = await self.catalog.entries(ctx.user_id)
        declaration = entries.get(agent_id.strip())
        if declaration is None:
            available = ", ".join(entries) or "none"
            return ToolFailure(
                f"Error: Unknown agent_id: {agent_id}. Available agent ids: {available}"
            )
        registry = await self._registry(ctx, reload=True)
        label = label.strip() if label and label.strip() else None
        if label is not None and label.lower() in registry.by_label:
            return ToolFailure(f"Error: Label already in use: {label}")
        try:
            agent = build_child(declaration, self.options, self.make_agent)
        except HarnessError as exc:
            return ToolFailure(f"Error: could not start subagent {declaration.name!r}: {exc}")
        suffix = uuid.uuid4().hex[:16]
        child = _Child(
            key=f"agent:{declaration.name}:{suffix}",
            agent_id=declaration.name,
            label=label,
            depth=depth,
            session_id=f"sub-{suffix}",
        )
        try:
            await self.workspace.update_text(
                self._path(ctx), lambda text: _with_child(text, child), ctx.user_id
            )
        except BaseException:
            await close_child(agent)  # not registered: nobody else would release it
            raise
        registry.add(child)
        registry.agents[child.key] = agent
        header = "\n".join(
            [
                f"agent_key: {child.key}",
                f"agent_id: {child.agent_id}",
                f"session_id: {child.session_id}",
            ]
        )
        if task is None or not task.strip():
            return f"{header}\nstatus: accepted"
        return await self._run(child, ctx, task, timeout_seconds, header=header)

    async def agent_send(
        self,
        message: str,
        ctx: RuntimeContext,
        agent_key: str | None = None,
        label: str | None = None,
        timeout_seconds: float | None = None,
    ) -> str | Paused:
        """Send a message to a subagent you started, continuing its conversation.

        Args:
            message: What to tell or ask it.
            agent_key: The full agent_key from agent_spawn (it starts with "agent:"); not the
                agent_id, session_id or task_id.
            label: Instead of agent_key, the label you gave it.
            timeout_seconds: How long to wait for its reply (default 30, at most 600). 0 runs
                it in the background and returns a task_id at once.
        """
        if agent_key and label:
            return ToolFailure("Error: Provide either agent_key or label, not both.")
        if not agent_key and not label:
            return ToolFailure("Error: Either agent_key or label is required.")
        if not message or not message.strip():
            return ToolFailure("Error: message is required")
        child = self._find(await self._registry(ctx), agent_key, label)
        if child is None:  # perhaps started by another worker since this one last looked
            child = self._find(await self._registry(ctx, reload=True), agent_key, label)
        if child is None:
            return ToolFailure(
                f"Error: Unknown label: {label}"
                if label
                else f"Error: Unknown agent_key: {agent_key}"
            )
        return await self._run(child, ctx, message, timeout_seconds)

    @staticmethod
    def _find(registry: _Registry, agent_key: str | None, label: str | None) -> _Child | None:
        key = registry.by_label.get(label.strip().lower()) if label else agent_key
        return registry.by_key.get(key or "")

    async def agent_list(self, ctx: RuntimeContext) -> str:
        """List the subagents you started in this conversation."""
        children = list((await self._registry(ctx, reload=True)).by_key.values())
        if not children:
            return "No active subagents."
        lines = [f"Active subagents ({len(children)}):"]
        for child in children:
            lines += [f"- agent_key: {child.key}", f"  agent_id: {child.agent_id}"]
            if child.label:
                lines.append(f"  label: {child.label}")
            lines.append(f"  spawn_depth: {child.depth}")
        return "\n".join(lines)

    async def aclose(self) -> None:
        """Close every child (their share of the memory worker, their own model clients)."""
        registries, self._registries = self._registries, {}
        for registry in registries.values():
            for agent in registry.agents.values():
                await close_child(agent)

    async def continue_child(
        self, agent_key: str, decisions: Mapping[str, ReviewerDecision], ctx: RuntimeContext
    ) -> str | Paused:
        """Continue a child whose call waited for approval, with the parent's decisions.

        What the parent's waiting call (its ``agent_spawn`` or ``agent_send``) gets as its
        result: the child's reply, as a run of that tool would have shown it, or the child's
        pause (surfaced as the parent's) while it waits again.
        """
        child = self._find(await self._registry(ctx, reload=True), agent_key, None)
        if child is None:
            return ToolFailure(f"Error: Unknown agent_key: {agent_key}")
        try:
            outcome = await self._resume(child, decisions, ctx)
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            return ToolFailure(f"agent_key: {child.key}\nstatus: error\nerror: {message}")
        return _told(outcome, child, f"agent_key: {child.key}\n")

    async def continue_task(
        self,
        task_id: str,
        agent_key: str,
        decisions: Mapping[str, ReviewerDecision],
        ctx: RuntimeContext,
    ) -> bool:
        """Continue a background task whose child waited for approval, with the decisions.

        The task runs in this process, in the background, like a new one; whether this call
        continued it (another decision, here or in another process, may have first).
        """
        child = self._find(await self._registry(ctx, reload=True), agent_key, None)
        if child is None:
            logger.warning("task %s waits on %s, not a child of this session", task_id, agent_key)
            return False

        async def work() -> str | Paused:
            return _told(await self._resume(child, decisions, ctx), child)

        return await self.tasks.resume(task_id, ctx.user_id, work)

    async def _resume(
        self, child: _Child, decisions: Mapping[str, ReviewerDecision], ctx: RuntimeContext
    ) -> Ended:
        """The child's turn, continued with ``decisions``: answered, or waiting again.

        Raises:
            HarnessError: The child cannot be rebuilt or continued.
        """
        agent = await self._agent(child, ctx)
        resume = getattr(agent, "resume", None)
        if resume is None:  # a factory's agent that cannot be resumed
            msg = f"subagent {child.agent_id!r} cannot be continued"
            raise HarnessError(msg)
        outcome: Ended = await resume(dict(decisions), ctx=self._child_ctx(child, ctx))
        return outcome

    async def task_child(
        self, record: TaskRecord, depth: int
    ) -> tuple[SubagentAgent, RuntimeContext, Callable[[Ended], str | Paused]]:
        """The child a background task runs, its context, and its outcome as the task's value.

        For the durable engine's worker that runs the task (``TaskRepository.run_here``).
        ``depth`` is the spawning call's subagent depth, which the engine kept: a registry the
        model rewrote cannot lower it.

        Raises:
            HarnessError: The task names no child of its session, or the child's declaration
                is gone.
        """
        ctx = RuntimeContext(
            session_id=record.session_id, user_id=record.user_id, extra={SPAWN_DEPTH_KEY: depth}
        )
        child = (await self._registry(ctx, reload=True)).by_key.get(record.agent_key or "")
        if child is None:
            msg = f"task {record.task_id} names no child of session {record.session_id!r}"
            raise HarnessError(msg)
        agent = await self._agent(child, ctx)
        return agent, self._child_ctx(child, ctx), lambda outcome: _told(outcome, child)

    def _child_ctx(self, child: _Child, ctx: RuntimeContext) -> RuntimeContext:
        return RuntimeContext(
            session_id=child.session_id,
            user_id=ctx.user_id,
            # From the caller, as at the spawn: a registry entry the model rewrote cannot
            # lower a child's depth below the limit.
            extra={**ctx.extra, SPAWN_DEPTH_KEY: spawn_depth(ctx) + 1},
        )

    def _path(self, ctx: RuntimeContext) -> str:
        return f"{self.directory}/{safe_segment(ctx.session_id or DEFAULT_SESSION_ID)}.json"

    async def _registry(self, ctx: RuntimeContext, *, reload: bool = False) -> _Registry:
        """The children of the caller's session; ``reload`` adds those spawned elsewhere since."""
        key = (ctx.user_id, ctx.session_id)
        registry = self._registries.get(key)
        if registry is None or reload:
            if registry is None:
                registry = self._registries[key] = _Registry({}, {}, {})
            path = self._path(ctx)
            for child in _children(await self.workspace.read_own(path, ctx.user_id), path):
                registry.add(child)
        return registry

    async def _agent(self, child: _Child, ctx: RuntimeContext) -> SubagentAgent:
        """The agent of a child: built at its spawn, or rebuilt here from its declaration.

        Raises:
            HarnessError: Its declaration is gone, or its model cannot be built.
        """
        registry = await self._registry(ctx)
        agent = registry.agents.get(child.key)
        if agent is None:
            declaration = (await self.catalog.entries(ctx.user_id)).get(child.agent_id)
            if declaration is None:
                msg = f"its subagent {child.agent_id!r} is no longer declared; spawn another one"
                raise HarnessError(msg)
            agent = build_child(declaration, self.options, self.make_agent)
            registry.agents[child.key] = agent
        return agent

    async def _run(
        self,
        child: _Child,
        ctx: RuntimeContext,
        text: str,
        timeout_seconds: float | None,
        *,
        header: str | None = None,
    ) -> str | Paused:
        """Run one turn of the child: wait for it, or hand it to the task repository.

        ``header`` is ``agent_spawn``'s (the new child's key, id and session), said before
        whatever the turn gives; ``agent_send`` names the child instead.
        """
        head = f"{header}\n" if header is not None else f"agent_key: {child.key}\n"
        child_ctx = self._child_ctx(child, ctx)

        try:
            agent = await self._agent(child, ctx)
        except HarnessError as exc:
            failure = f"Error: cannot continue {child.key}: {exc}"
            return ToolFailure(failure if header is None else f"{head}{failure}")

        async def turn() -> str | Paused:  # as a background task keeps it
            return _told(await agent.call(text, ctx=child_ctx), child)

        info: dict[str, Any] = {
            "agent_id": child.agent_id,
            "task": text,
            "agent_key": child.key,
            "label": child.label,
        }
        timeout = self.config.timeout(timeout_seconds)
        if timeout == 0:
            record = await self.tasks.submit(ctx, work=turn, **info)
            accepted = accepted_block(record.task_id)
            return accepted if header is None else f"{head}{accepted}"
        running = asyncio.create_task(agent.call(text, ctx=child_ctx))
        try:
            async with asyncio.timeout(timeout):
                outcome = await asyncio.shield(running)
        except TimeoutError:

            async def adopted() -> str | Paused:
                return _told(await running, child)

            record = await self.tasks.adopt(ctx, running=adopted(), **info)
            return head + _promoted_block(record.task_id, timeout)
        except asyncio.CancelledError:
            running.cancel()  # the parent stopped waiting: the child stops too
            raise
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            return ToolFailure(
                f"{head}status: error\nerror: {message}" if header else f"Error: {message}"
            )
        return _told(outcome, child, head)


def _told(outcome: Ended, child: _Child, head: str | None = None) -> str | Paused:
    """A child's turn as its parent's tool tells it: its reply, or its pause made the parent's.

    With ``head`` (a turn the parent waited for), the reply as the tool shows it; without, the
    bare text a background task keeps. A pause is surfaced: each request says which subagent
    it is of, and the parent's call waits with it (:mod:`harness.kernel.outcome`).
    """
    match outcome:
        case Paused(pending, accepted):
            about = {"subagent": child.agent_id, "child_key": child.key}
            surfaced = tuple({**request, **about} for request in pending)
            return Paused(surfaced, accepted, reply=outcome.reply)
        case Finished(reply):
            return reply.text if head is None else f"{head}status: ok\nreply:\n{reply.text}"


def _children(text: str | None, path: str) -> list[_Child]:
    """The children a registry file lists; an unreadable file is logged and lists none."""
    if not text:
        return []
    try:
        children = [_Child(**entry) for entry in json.loads(text)["children"]]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        logger.warning("ignored the unreadable subagent registry %s: %s", path, exc)
        return []
    kept = [child for child in children if _well_formed(child)]
    if len(kept) < len(children):
        logger.warning("ignored %d malformed entries of %s", len(children) - len(kept), path)
    return kept


def _well_formed(child: _Child) -> bool:
    """Whether an entry read back has the types a spawn writes (the model can edit the file)."""
    texts = (child.key, child.agent_id, child.session_id)
    return (
        all(isinstance(text, str) and text for text in texts)
        and (child.label is None or isinstance(child.label, str))
        and isinstance(child.depth, int)
    )


def _with_child(text: str, child: _Child) -> str:
    """A registry file with ``child`` added (to a fresh list if the file was unreadable)."""
    known = _children(text, "(being updated)")
    entries = [asdict(c) for c in known] + [asdict(child)]
    return json.dumps({"children": entries}, ensure_ascii=False, indent=1) + "\n"
