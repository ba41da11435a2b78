"""Tool-result eviction: a too-large tool result is saved to a file before memory keeps it.

On PostActing, a result whose text is longer than ``max_result_chars`` is written to
``large_tool_results/<agent>/<tool>-<hash>.txt`` in the caller's namespace of the workspace
and replaced by a placeholder giving its size, that path, how to read it in pieces with
``read_file``, and its first and last characters. Results of the excluded tools (the file and
memory readers) are left alone, and so are placeholders. If the file cannot be written, the
original result stays and a warning is logged. See :mod:`harness.compaction.eviction` for the
file names, the placeholder's layout and how a placeholder is recognised.

It works on ``PostActing.result``, the result memory keeps, before the tool message exists
anywhere else. No later hook or step ever sees the full text, so nothing that reshapes a
request (compaction, a PreReasoning hook) can let a large result slip past eviction.

Priority 50: at PostActing, before user hooks (100) and the approval hook (1000), so they see
the result as memory will keep it, and the ledger records that one. Only the trace hook (0)
sees the full result.
"""

from __future__ import annotations

from typing import ClassVar

from harness.compaction.eviction import (
    DEFAULT_TOOL_RESULT_EVICTION,
    ToolResultEvictionConfig,
    evict_tool_result,
)
from harness.kernel import Event, Hook, PostActing
from harness.workspace import WorkspaceManager

__all__ = ["ToolResultEvictionHook"]


class ToolResultEvictionHook(Hook):
    """Replaces too-large tool results with a placeholder pointing to a workspace file.

    Args:
        workspace: Where evicted results are written (the agent's workspace).
        agent_name: The agent's name; evicted files are grouped per agent.
        config: Limits, directory and excluded tools.
    """

    priority = 50
    events: ClassVar[tuple[type[Event], ...]] = (PostActing,)

    def __init__(
        self,
        workspace: WorkspaceManager,
        *,
        agent_name: str,
        config: ToolResultEvictionConfig = DEFAULT_TOOL_RESULT_EVICTION,
    ) -> None:
        self.workspace = workspace
        self.agent_name = agent_name
        self.config = config

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PostActing)
        event.result = await evict_tool_result(
            self.workspace,
            event.result,
            tool_name=event.tool_call.name,
            agent_name=self.agent_name,
            user_id=event.ctx.user_id,
            config=self.config,
        )
