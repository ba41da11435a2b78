"""Memory provenance: before a tool runs, judge how far the model's words may be believed.

A tool does not see the conversation, so this hook tells ``memory_save`` what it needs: the
trust of the running turn (the lowest of the user's own message and everything the model had
read since, :func:`~harness.memory.provenance.judge_turn`) and the messages it draws on. A save
made after the turn read a web page, a file, an MCP tool's or a subagent's output is therefore
untrusted, whatever the model claims; without this hook every save of an agent's model is.

Priority 990: after every other hook that acts before a tool (a user's hook may add to the
conversation), so the judgement is of the conversation as the tool runs.
"""

from __future__ import annotations

from typing import ClassVar, Final

from harness.kernel import Error, Event, Hook, PostCall, PreActing
from harness.memory.provenance import TurnTrust, judge_turn

__all__ = ["MemoryProvenanceHook"]

JUDGED_TOOLS: Final = frozenset({"memory_save"})


class MemoryProvenanceHook(Hook):
    """Keeps the judgement of each session's turn for the memory tools."""

    priority = 990
    events: ClassVar[tuple[type[Event], ...]] = (PreActing, PostCall, Error)

    def __init__(self, turns: TurnTrust) -> None:
        self.turns = turns

    async def on_event(self, event: Event) -> None:
        if isinstance(event, PreActing):
            if event.tool_call.name in JUDGED_TOOLS:
                self.turns.set(event.ctx, judge_turn(event.memory))
        else:  # the call is over: nothing of it vouches for a later one
            self.turns.forget(event.ctx)
