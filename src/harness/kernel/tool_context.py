"""What a running tool may know of the call it runs in.

A tool function that declares a parameter annotated :class:`ToolContext` receives one when the
agent runs it (the parameter is not shown to the model, as a :class:`RuntimeContext` parameter
is not): who the call is for, which call and which tool call this is, the conversation as it
stands while the tool runs and the session's state. So a tool that must judge the conversation
(``memory_save`` weighs how far the model's words may be believed from what the model has
read) reads it here, at its own call, instead of a hook handing it over beside the tool.

The conversation is a snapshot, taken as the tool starts: a tool never changes the call's
(what a tool gives back is its result), and a context kept past the tool's run does not follow
the conversation on. Called directly, outside an agent's call, a tool gets ``None`` for
its :class:`ToolContext` parameter when the parameter has that default, and must decide what
that means: for the harness's tools, the operator's own code calling them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.context import RuntimeContext
from harness.kernel.message import Msg, ToolUseBlock
from harness.kernel.state import SessionState

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The call a tool runs in (module docs)."""

    ctx: RuntimeContext
    """Who the call is for: user, session, agent, and the caller's extras."""
    agent: str
    call_id: str
    """The call's id, as every event of the call carries it."""
    tool_call: ToolUseBlock
    """The model's request that runs the tool, with the arguments it runs with."""
    messages: Sequence[Msg]
    """The conversation as the tool starts: every message the model has seen in the call."""
    state: SessionState
