"""What a child is: the subagent context of its prompt, its spawn depth, how it is closed.

A child is made from its parent's options (:func:`harness.options.child_options`, and the
table "What a child inherits" of ``docs/subagents.md``) and built by the subagent tools
(:mod:`harness.tools.subagents`). A child declared by a prompt is a *leaf*: it has no subagent
tools, so it cannot spawn further agents. It runs with the caller's ``user_id`` and context
extras, so its memory search, files and sessions are the caller's, never another tenant's.

Its system prompt is the declaration's prompt followed by :data:`SUBAGENT_CONTEXT`.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from harness.context import RuntimeContext
from harness.kernel import Ended

__all__ = [
    "SPAWN_DEPTH_KEY",
    "SUBAGENT_CONTEXT",
    "SubagentAgent",
    "close_child",
    "spawn_depth",
]

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
    """What a child must be: something that answers a text for a context, or pauses."""

    async def call(self, msgs: str, *, ctx: RuntimeContext) -> Ended: ...


def spawn_depth(ctx: RuntimeContext) -> int:
    """How many spawns deep the call of ``ctx`` runs (0 for a call from the application)."""
    depth = ctx.get(SPAWN_DEPTH_KEY, 0)
    return depth if isinstance(depth, int) and depth >= 0 else 0


async def close_child(child: Any) -> None:
    """Release what a child holds (its share of the memory worker, its own model client)."""
    close = getattr(child, "aclose", None)
    if close is not None:
        await close()
