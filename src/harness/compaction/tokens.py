"""Token accounting: a fast estimate, corrected by what the provider reported.

The estimate is the original's (``TokenCounterUtil``): 2.5 characters per token, every
division rounded up, plus a fixed overhead per message and per block::

    message      5 + est(ROLE) + est(name) + sum(blocks)
    text         est(text)
    tool call    10 + est(name) + est(id) + est({"key":"value",...})
    tool result  8 + est(name) + est(id) + sum(est(text part) or 5 per image)
    other        5 (thinking, image)

It overestimates English prose (about 4 characters per token) on purpose: a trigger that fires
a little early is harmless, one that fires late overflows the window.

A provider's reported usage is exact, so :func:`count_tokens` starts from the last response
that carries one (the kernel stores it as ``metadata["usage"]`` on the assistant message) and
estimates only the messages after it. Usage recorded before the latest compaction describes a
request that no longer exists and is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from harness.kernel import (
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from harness.memory.render import is_summary

__all__ = [
    "CHARS_PER_TOKEN",
    "count_tokens",
    "estimate_message",
    "estimate_text",
    "estimate_tokens",
    "usage_anchor",
]

CHARS_PER_TOKEN: Final = 2.5
"""Characters per estimated token (the original's ratio)."""

MESSAGE_OVERHEAD: Final = 5
TOOL_USE_OVERHEAD: Final = 10
TOOL_RESULT_OVERHEAD: Final = 8
OTHER_BLOCK_TOKENS: Final = 5


def estimate_text(text: str) -> int:
    """``ceil(len(text) / 2.5)``, in integers so no float rounding creeps in."""
    return (2 * len(text) + 4) // 5


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _input_text(arguments: Mapping[str, Any]) -> str:
    """The JSON-like rendering the original estimated: ``{"k":"v","n":1}``."""
    return "{" + ",".join(f'"{k}":{_value_text(v)}' for k, v in arguments.items()) + "}"


def _block_tokens(block: object) -> int:
    if isinstance(block, TextBlock):
        return estimate_text(block.text)
    if isinstance(block, ToolUseBlock):
        return (
            TOOL_USE_OVERHEAD
            + estimate_text(block.name)
            + estimate_text(block.id)
            + estimate_text(_input_text(block.input))
        )
    if isinstance(block, ToolResultBlock):
        total = TOOL_RESULT_OVERHEAD + estimate_text(block.name) + estimate_text(block.id)
        if isinstance(block.output, str):
            return total + estimate_text(block.output)
        for part in block.output:
            total += estimate_text(part.text) if isinstance(part, TextBlock) else OTHER_BLOCK_TOKENS
        return total
    if isinstance(block, ThinkingBlock | ImageBlock):
        return OTHER_BLOCK_TOKENS
    return OTHER_BLOCK_TOKENS


def estimate_message(message: Msg) -> int:
    """The estimated tokens of one message."""
    total = MESSAGE_OVERHEAD + estimate_text(message.role.upper())
    if message.name:
        total += estimate_text(message.name)
    return total + sum(_block_tokens(block) for block in message.content)


def estimate_tokens(messages: Sequence[Msg]) -> int:
    """The estimated tokens of a list of messages (no provider usage involved)."""
    return sum(estimate_message(message) for message in messages)


def _reported(message: Msg) -> int | None:
    usage = message.metadata.get("usage")
    if not isinstance(usage, Mapping):
        return None
    prompt, answer = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt <= 0:
        return None  # a provider that reports nothing (or 0) must not make the count 0
    if not isinstance(answer, int) or isinstance(answer, bool) or answer < 0:
        answer = 0
    return prompt + answer


def usage_anchor(messages: Sequence[Msg]) -> tuple[int, int] | None:
    """The last assistant message with usable provider usage: ``(index, tokens)``, or None.

    ``tokens`` is the request's input tokens plus the answer's output tokens, i.e. everything
    up to and including that answer as the provider counted it. Usage recorded before the
    latest compaction summary was made is stale and skipped.
    """
    summaries = [m.timestamp for m in messages if is_summary(m)]
    since = max(summaries) if summaries else None
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "assistant":
            continue
        if since is not None and message.timestamp <= since:
            return None
        reported = _reported(message)
        if reported is not None:
            return index, reported
    return None


def count_tokens(messages: Sequence[Msg]) -> int:
    """The conversation's tokens: the provider's last reported usage plus an estimate of the rest.

    Without usable usage this is :func:`estimate_tokens`. With it, the result includes what
    the provider counted beyond the messages (system prompt, tool schemas), which is what the
    context window actually holds.
    """
    anchor = usage_anchor(messages)
    if anchor is None:
        return estimate_tokens(messages)
    index, reported = anchor
    return reported + estimate_tokens(messages[index + 1 :])
