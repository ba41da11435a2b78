"""What the security tests share: one step of the scripted model standing in for a hostile one.

The model calls the given tools in one step and then finishes; the tests read what the tools
answered from the model's last request, which holds every tool result of the session so far.
Memory is on (its tools and the search index are part of what is attacked) but neither flushes
nor consolidates, so the script needs no turns for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext
from harness.kernel import ToolResultBlock
from harness.memory import MemoryConfig
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

QUIET = MemoryConfig(flush=False, auto_consolidate=False)


def tool_results(model: ScriptedChatModel) -> list[str]:
    """The tool results in the model's last request, oldest first."""
    return [
        str(block.output)
        for message in model.requests[-1]
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


async def one_step(
    workspace: Path | WorkspaceManager, calls: list[dict[str, Any]], ctx: RuntimeContext
) -> list[str]:
    """One call in which the model runs ``calls`` at once; the session's tool results."""
    model = ScriptedChatModel([{"tool_calls": calls}, {"text": "done", "repeat": True}])
    async with HarnessAgent(model=model, workspace=workspace, memory=QUIET) as agent:
        await agent.call("go", ctx=ctx)
    return tool_results(model)
