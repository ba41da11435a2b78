"""The ReAct core: messages, tools, models, hooks and the agent loop.

Usable without the rest of Harness; it depends only on :mod:`harness.errors` and
:mod:`harness.context`.
"""

from harness.kernel.agent import DEFAULT_MAX_ITERS, ReActAgent, new_call_id
from harness.kernel.events import (
    Error,
    Event,
    PostActing,
    PostCall,
    PostCompact,
    PostReasoning,
    PreActing,
    PreCall,
    PreCompact,
    PreReasoning,
)
from harness.kernel.hooks import DEFAULT_HOOK_PRIORITY, Hook, HookChain
from harness.kernel.message import (
    ContentBlock,
    ImageBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    as_messages,
    drop_unanswered_tail,
    new_id,
)
from harness.kernel.model import (
    CACHE_KEY,
    CACHE_PREFIX_BLOCKS,
    INVALID_ARGUMENTS_KEY,
    ChatChunk,
    ChatModel,
    ChatResponse,
    ToolSchema,
    Usage,
    complete,
)
from harness.kernel.streaming import (
    Progress,
    Reply,
    StreamItem,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    report,
)
from harness.kernel.toolkit import Tool, Toolkit

__all__ = [
    "CACHE_KEY",
    "CACHE_PREFIX_BLOCKS",
    "DEFAULT_HOOK_PRIORITY",
    "DEFAULT_MAX_ITERS",
    "INVALID_ARGUMENTS_KEY",
    "ChatChunk",
    "ChatModel",
    "ChatResponse",
    "ContentBlock",
    "Error",
    "Event",
    "Hook",
    "HookChain",
    "ImageBlock",
    "Msg",
    "PostActing",
    "PostCall",
    "PostCompact",
    "PostReasoning",
    "PreActing",
    "PreCall",
    "PreCompact",
    "PreReasoning",
    "Progress",
    "ReActAgent",
    "Reply",
    "Role",
    "StreamItem",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "Tool",
    "ToolFinished",
    "ToolResultBlock",
    "ToolSchema",
    "ToolStarted",
    "ToolUseBlock",
    "Toolkit",
    "Usage",
    "as_messages",
    "complete",
    "drop_unanswered_tail",
    "new_call_id",
    "new_id",
    "report",
]
