"""Building a child: what a subagent inherits from its parent, and how it is called.

Every child is a *leaf*: it has no subagent tools, so it cannot spawn further agents. It
inherits from the parent (the original lost several of these, each a bug of its own):

- the caller's identity: the child runs with the caller's ``user_id`` and context extras, so
  its memory search, files and sessions are the caller's, never another tenant's;
- the workspace (the same :class:`WorkspaceManager`, hence the same filesystem backend and the
  same memory worker: building a child starts no thread and opens no database);
- the memory, compaction and tool-result eviction configuration, and their models;
- the parent's own tools and user hooks (the same instances).

Its system prompt is the declaration's prompt followed by :data:`SUBAGENT_CONTEXT`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from harness.compaction import CompactionConfig, ToolResultEvictionConfig
from harness.context import RuntimeContext
from harness.kernel import ChatModel, Hook, Msg, Tool
from harness.memory.config import MemoryConfig
from harness.subagents.declarations import Declaration, SubagentFactory
from harness.workspace import WorkspaceManager

if TYPE_CHECKING:
    from harness.workspace.context import WorkspaceContextConfig

__all__ = [
    "SPAWN_DEPTH_KEY",
    "SUBAGENT_CONTEXT",
    "ChildSettings",
    "SubagentAgent",
    "build_child",
    "close_child",
    "spawn_depth",
]

logger = logging.getLogger(__name__)

SPAWN_DEPTH_KEY: Final = "harness.spawn_depth"
"""The context extra that counts how deep in a chain of spawns a call runs (0 = top)."""

SUBAGENT_CONTEXT: Final = """\
# Subagent Context

You are a subagent: another agent started you to do one task, and your final message goes back \
to it automatically.

- Stay on the task you were given; do not start other work or follow-ups of your own.
- Finish the task in this run; nobody will answer questions you ask.
- If a tool's output was cut short, read it again in smaller pieces instead of guessing.
- You cannot start further subagents, and you do not talk to the user: do not pretend to be \
the main agent.

End with a plain-text report: what you did or found, the details the main agent needs \
(names, paths, numbers), and nothing else."""


class SubagentAgent(Protocol):
    """What a child must be: something that answers a text for a context."""

    async def call(self, msgs: str, *, ctx: RuntimeContext) -> Msg: ...


@dataclass(frozen=True, kw_only=True)
class ChildSettings:
    """What a parent passes down to the children it builds (and to your factories).

    ``make_agent`` builds a child declared by a prompt, with ``HarnessAgent``'s keyword
    arguments: the parent passes its own class, so this package never imports the agent
    module that imports it.
    """

    model: ChatModel
    workspace: WorkspaceManager
    tools: tuple[Tool, ...]
    hooks: tuple[Hook, ...]
    max_iters: int
    memory: MemoryConfig | None
    memory_model: ChatModel | None
    compaction: CompactionConfig | None
    compaction_model: ChatModel | None
    tool_result_eviction: ToolResultEvictionConfig | None
    workspace_context: WorkspaceContextConfig | None
    trace: bool
    make_agent: Callable[..., Any]


def spawn_depth(ctx: RuntimeContext) -> int:
    """How many spawns deep the call of ``ctx`` runs (0 for a call from the application)."""
    depth = ctx.get(SPAWN_DEPTH_KEY, 0)
    return depth if isinstance(depth, int) and depth >= 0 else 0


def build_child(declaration: Declaration, settings: ChildSettings) -> SubagentAgent:
    """Build the agent a declaration describes.

    Raises:
        ConfigError: The declaration's model spec is malformed or its provider is missing.
    """
    if isinstance(declaration, SubagentFactory):
        return declaration.build(settings)
    prompt = "\n\n".join(p for p in (declaration.sys_prompt.strip(), SUBAGENT_CONTEXT) if p)
    child = settings.make_agent(
        model=declaration.model if declaration.model is not None else settings.model,
        name=declaration.name,
        workspace=settings.workspace,
        sys_prompt=prompt,
        tools=settings.tools,
        hooks=settings.hooks,
        max_iters=declaration.max_iters,
        workspace_context=settings.workspace_context,
        memory=settings.memory,
        memory_model=settings.memory_model,
        tool_result_eviction=settings.tool_result_eviction,
        compaction=settings.compaction,
        compaction_model=settings.compaction_model,
        subagents=None,
        trace=settings.trace,
    )
    if declaration.tools is not None:
        toolkit = child.delegate.toolkit
        unknown = sorted(set(declaration.tools) - set(toolkit.names))
        if unknown:
            logger.warning(
                "subagent %r (%s) allows tools it does not have: %s",
                declaration.name,
                declaration.source,
                ", ".join(unknown),
            )
        for name in toolkit.names:
            if name not in declaration.tools:
                toolkit.remove(name)
    return cast(SubagentAgent, child)


async def close_child(child: Any) -> None:
    """Release what a child holds (its share of the memory worker, its own model client)."""
    close = getattr(child, "aclose", None)
    if close is not None:
        await close()
