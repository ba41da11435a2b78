"""Argument truncation: long string arguments of old tool calls shrink to a short head.

A tool call that wrote a 50 KB file carries those 50 KB in its arguments for the rest of the
session, although the model never needs them again. Once the conversation passes the
truncation trigger, every string argument longer than ``max_arg_length`` in an assistant
message older than the kept tail becomes its first ``keep_chars`` characters plus
``"...(argument truncated)"``. Nested lists and objects are searched too.

No model is involved, and the result is used whenever the trigger fires, whether or not
compaction follows.

The end of the truncated part moves in strides of ``keep_messages`` messages (down to a
multiple of it), so the kept tail is ``keep_messages`` to twice that long and old messages are
rewritten once a stride, never a little at every step: each rewrite costs the provider's prompt
cache from the first rewritten message on, like a compaction. Rewritten messages keep their
id, metadata and timestamp (``model_copy``), so transcripts and session files still recognize
them; messages without a long argument are returned as the very same objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.compaction.config import TruncateArgsConfig
from harness.compaction.tokens import count_tokens, estimate_message
from harness.kernel import ContentBlock, Msg, ToolUseBlock

__all__ = [
    "Truncation",
    "keep_start",
    "should_truncate",
    "truncate_args",
    "truncate_message_args",
    "truncate_value",
]


@dataclass(frozen=True, slots=True)
class Truncation:
    """The outcome of :func:`truncate_args`.

    Attributes:
        messages: The conversation, with rewritten messages in place of the originals.
        changed: How many messages were rewritten (0: ``messages`` holds the same objects).
        arguments: How many argument values were truncated.
    """

    messages: list[Msg]
    changed: int = 0
    arguments: int = 0


def keep_start(messages: Sequence[Msg], *, keep_messages: int, keep_tokens: int) -> int:
    """The index where the kept tail starts.

    With ``keep_tokens`` > 0 the tail is the longest suffix whose estimate fits that budget
    (at least one message); otherwise it is the last ``keep_messages`` messages.
    """
    n = len(messages)
    if keep_tokens > 0:
        total = 0
        for index in range(n - 1, -1, -1):
            total += estimate_message(messages[index])
            if total > keep_tokens:
                return min(index + 1, n - 1) if n else 0
        return 0
    return max(0, n - keep_messages)


def should_truncate(messages: Sequence[Msg], config: TruncateArgsConfig) -> bool:
    """True when the truncation trigger fires (either of its thresholds, unless 0)."""
    if config.trigger_messages > 0 and len(messages) >= config.trigger_messages:
        return True
    return config.trigger_tokens > 0 and count_tokens(messages) >= config.trigger_tokens


def truncate_value(value: Any, config: TruncateArgsConfig) -> tuple[Any, int]:
    """Return ``value`` with every long string in it truncated, and how many were.

    A string already ending in the truncation marker is left alone, so truncating twice
    changes nothing.
    """
    if isinstance(value, str):
        if len(value) > config.max_arg_length and not value.endswith(config.truncation_text):
            return value[: config.keep_chars] + config.truncation_text, 1
        return value, 0
    if isinstance(value, dict):
        count = 0
        new_dict: dict[Any, Any] = {}
        for key, item in value.items():
            new_dict[key], n = truncate_value(item, config)
            count += n
        return (new_dict, count) if count else (value, 0)
    if isinstance(value, list):
        count = 0
        new_list: list[Any] = []
        for item in value:
            new_item, n = truncate_value(item, config)
            new_list.append(new_item)
            count += n
        return (new_list, count) if count else (value, 0)
    return value, 0


def truncate_message_args(message: Msg, config: TruncateArgsConfig) -> tuple[Msg, int]:
    """The message with its tool calls' long arguments truncated (the same object if none)."""
    if message.role != "assistant" or not message.tool_uses:
        return message, 0
    count = 0
    content: list[ContentBlock] = []
    for block in message.content:
        if isinstance(block, ToolUseBlock):
            arguments, n = truncate_value(block.input, config)
            if n:
                block = block.model_copy(update={"input": arguments})
                count += n
        content.append(block)
    if not count:
        return message, 0
    return message.model_copy(update={"content": content}), count


def truncate_args(messages: Sequence[Msg], config: TruncateArgsConfig) -> Truncation:
    """Truncate long tool arguments before the kept tail, if the trigger fires.

    Args:
        messages: The conversation (system messages are passed through untouched).
        config: Trigger, tail and lengths.

    Returns:
        The conversation with rewritten messages; ``changed`` is 0 when the trigger did not
        fire or nothing was long enough.
    """
    result = list(messages)
    if not should_truncate(result, config):
        return Truncation(result)
    cut = keep_start(result, keep_messages=config.keep_messages, keep_tokens=config.keep_tokens)
    cut -= cut % max(1, config.keep_messages)  # see the module docs: the cut moves in strides
    changed = arguments = 0
    for index in range(cut):
        rewritten, count = truncate_message_args(result[index], config)
        if count:
            result[index] = rewritten
            changed += 1
            arguments += count
    return Truncation(result, changed, arguments)
