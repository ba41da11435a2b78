"""Messages as plain text, for the flush prompt and the session transcript."""

from __future__ import annotations

import json
from typing import Final

from harness.kernel import Msg, TextBlock, ToolResultBlock, ToolUseBlock, written_by_harness

__all__ = ["SUMMARY_NAME", "is_summary", "render_content", "render_conversation"]

SUMMARY_NAME: Final = "__compaction_summary__"
"""The ``name`` of a message that summarizes compacted history."""

MAX_TOOL_INPUT_CHARS: Final = 500
MAX_TOOL_RESULT_CHARS: Final = 1000


def is_summary(message: Msg) -> bool:
    """True for a compaction summary: history already flushed once, never flushed again."""
    return message.name == SUMMARY_NAME


def render_content(message: Msg) -> str:
    """The message's blocks as text: text as is, tool calls and results in brackets, shortened."""
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                parts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            args = json.dumps(block.input, ensure_ascii=False)
            if len(args) > MAX_TOOL_INPUT_CHARS:
                args = args[:MAX_TOOL_INPUT_CHARS] + "..."
            parts.append(f"[tool_call: {block.name}({args})]")
        elif isinstance(block, ToolResultBlock):
            text = block.text
            if len(text) > MAX_TOOL_RESULT_CHARS:
                text = text[:MAX_TOOL_RESULT_CHARS] + "...(truncated)"
            parts.append(f"[tool_result: {block.name}] {text}")
    return "\n".join(parts)


def render_conversation(messages: list[Msg]) -> str:
    """``[ROLE]: text`` per message, system messages and summaries left out.

    A message the harness wrote in the user's turn is ``[HARNESS NOTICE]``, so the extraction
    model does not take it for the user's words.
    """
    lines = []
    for message in messages:
        if message.role == "system" or is_summary(message):
            continue
        body = render_content(message)
        if body:
            who = "HARNESS NOTICE" if written_by_harness(message) else message.role.upper()
            lines.append(f"[{who}]: {body}")
    return "\n".join(lines)
