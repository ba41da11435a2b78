"""The subagent tools: ``agent_spawn``, ``agent_send`` and ``agent_list``.

A spawned child is registered under an *agent key* (``agent:<agent id>:<hex>``) and, if given, a
label, in the registry of the caller's (user, session): one user's session never sees, and
cannot send to, another's children. ``agent_send`` continues the same child, so follow-ups keep
its conversation.

Waiting: ``timeout_seconds`` None waits 30 s, 0 (or less) runs in the background and returns a
task id at once, more is capped at 600 s. A run still going when the wait ends is *promoted*:
it keeps running as a background task whose result ``task_output`` returns later (the
original reported an error and left the child running unobserved). If the parent's call is
cancelled while it waits, the child is cancelled with it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.context import RuntimeContext
from harness.errors import HarnessError
from harness.subagents.children import (
    SPAWN_DEPTH_KEY,
    ChildSettings,
    SubagentAgent,
    build_child,
    close_child,
    spawn_depth,
)
from harness.subagents.config import SubagentsConfig
from harness.subagents.declarations import SubagentCatalog
from harness.subagents.tasks import TaskRepository

__all__ = ["SubagentTools", "accepted_block"]


@dataclass(frozen=True, slots=True)
class _Child:
    key: str
    agent_id: str
    label: str | None
    depth: int
    session_id: str
    agent: SubagentAgent


@dataclass(slots=True)
class _Registry:
    """The children of one (user, session)."""

    by_key: dict[str, _Child]
    by_label: dict[str, str]


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
        catalog: SubagentCatalog,
        settings: ChildSettings,
        tasks: TaskRepository,
        config: SubagentsConfig,
    ) -> None:
        self.catalog = catalog
        self.settings = settings
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
    ) -> str:
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
            return "Error: agent_id is required"
        depth = spawn_depth(ctx) + 1
        if depth > self.config.max_depth:
            return f"Error: Maximum spawn depth exceeded (max={self.config.max_depth})"
        entries = await self.catalog.entries(ctx.user_id)
        declaration = entries.get(agent_id.strip())
        if declaration is None:
            available = ", ".join(entries) or "none"
            return f"Error: Unknown agent_id: {agent_id}. Available agent ids: {available}"
        registry = self._registry(ctx)
        label = label.strip() if label and label.strip() else None
        if label is not None and label.lower() in registry.by_label:
            return f"Error: Label already in use: {label}"
        try:
            agent = build_child(declaration, self.settings)
        except HarnessError as exc:
            return f"Error: could not start subagent {declaration.name!r}: {exc}"
        suffix = uuid.uuid4().hex[:16]
        child = _Child(
            key=f"agent:{declaration.name}:{suffix}",
            agent_id=declaration.name,
            label=label,
            depth=depth,
            session_id=f"sub-{suffix}",
            agent=agent,
        )
        registry.by_key[child.key] = child
        if label is not None:
            registry.by_label[label.lower()] = child.key
        header = "\n".join(
            [
                f"agent_key: {child.key}",
                f"agent_id: {child.agent_id}",
                f"session_id: {child.session_id}",
            ]
        )
        if task is None or not task.strip():
            return f"{header}\nstatus: accepted"
        return f"{header}\n{await self._run(child, ctx, task, timeout_seconds, header=True)}"

    async def agent_send(
        self,
        message: str,
        ctx: RuntimeContext,
        agent_key: str | None = None,
        label: str | None = None,
        timeout_seconds: float | None = None,
    ) -> str:
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
            return "Error: Provide either agent_key or label, not both."
        if not agent_key and not label:
            return "Error: Either agent_key or label is required."
        if not message or not message.strip():
            return "Error: message is required"
        registry = self._registry(ctx)
        if label:
            key = registry.by_label.get(label.strip().lower())
            if key is None:
                return f"Error: Unknown label: {label}"
        else:
            key = agent_key
        child = registry.by_key.get(key or "")
        if child is None:
            return f"Error: Unknown agent_key: {agent_key}"
        return await self._run(child, ctx, message, timeout_seconds, header=False)

    async def agent_list(self, ctx: RuntimeContext) -> str:
        """List the subagents you started in this conversation."""
        children = list(self._registry(ctx).by_key.values())
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
            for child in registry.by_key.values():
                await close_child(child.agent)

    def _registry(self, ctx: RuntimeContext) -> _Registry:
        key = (ctx.user_id, ctx.session_id)
        registry = self._registries.get(key)
        if registry is None:
            registry = self._registries[key] = _Registry({}, {})
        return registry

    async def _run(
        self,
        child: _Child,
        ctx: RuntimeContext,
        text: str,
        timeout_seconds: float | None,
        *,
        header: bool,
    ) -> str:
        """Run one turn of the child: wait for it, or hand it to the task repository."""
        child_ctx = RuntimeContext(
            session_id=child.session_id,
            user_id=ctx.user_id,
            extra={**ctx.extra, SPAWN_DEPTH_KEY: child.depth},
        )

        async def turn() -> str:
            return (await child.agent.call(text, ctx=child_ctx)).text

        info: dict[str, Any] = {
            "agent_id": child.agent_id,
            "task": text,
            "agent_key": child.key,
            "label": child.label,
        }
        timeout = self.config.timeout(timeout_seconds)
        if timeout == 0:
            record = await self.tasks.submit(ctx, work=turn, **info)
            return accepted_block(record.task_id)
        running = asyncio.create_task(turn())
        try:
            async with asyncio.timeout(timeout):
                reply = await asyncio.shield(running)
        except TimeoutError:
            record = await self.tasks.adopt(ctx, running=running, **info)
            promoted = _promoted_block(record.task_id, timeout)
            return promoted if header else f"agent_key: {child.key}\n{promoted}"
        except asyncio.CancelledError:
            running.cancel()  # the parent stopped waiting: the child stops too
            raise
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            return f"status: error\nerror: {message}" if header else f"Error: {message}"
        ok = f"status: ok\nreply:\n{reply}"
        return ok if header else f"agent_key: {child.key}\n{ok}"
