"""What :meth:`ReActAgent.stream` yields while a call runs.

The loop yields a ``Progress("accepted")`` item first, once the call has taken its input (from
then on, however the call ends, its hooks hear of it with the input in memory, so a session
keeps it); then text, reasoning and tool activity, and a ``Progress("step")`` item when a step
ends (its model, tokens, latency and tool calls). A hook that knows something else a
streaming caller wants to see (a compaction, a background task's notice) adds a
:class:`Progress` item with :func:`report`: it lands in the stream in the order things
happened, between the deltas and tool items around it, and is dropped when nobody streams.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from harness.kernel.message import Msg, ToolResultBlock, ToolUseBlock

__all__ = [
    "Progress",
    "Reply",
    "StreamItem",
    "TextDelta",
    "ThinkingDelta",
    "ToolFinished",
    "ToolStarted",
    "replied",
    "report",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's answer as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of the model's reasoning as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call begins."""

    call: ToolUseBlock


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call ended with this result."""

    result: ToolResultBlock


@dataclass(frozen=True, slots=True)
class Reply:
    """The call's final answer; always the last item of a stream."""

    message: Msg


@dataclass(frozen=True, slots=True)
class Progress:
    """Something a hook reports while the call runs: ``kind`` names it, ``data`` is JSON-able."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)


StreamItem = TextDelta | ThinkingDelta | ToolStarted | ToolFinished | Progress | Reply

Emit = Callable[[StreamItem], None]

STREAM: ContextVar[Emit | None] = ContextVar("harness_stream", default=None)
"""Where the running call's stream items go (None when the call is not streamed). The loop
sets it for the task of each call, so a nested call (a subagent run by a tool) has its own."""


def report(kind: str, **data: Any) -> None:
    """Add a :class:`Progress` item to the running call's stream, if it is streamed."""
    emit = STREAM.get()
    if emit is not None:
        emit(Progress(kind, data))


async def replied(items: AsyncGenerator[StreamItem, None]) -> Msg:
    """The message of a call's :class:`Reply`: ``call`` is ``stream``, consumed."""
    async with contextlib.aclosing(items):
        async for item in items:
            if isinstance(item, Reply):
                return item.message
    msg = "the call's stream ended without a reply"  # a call returns or raises: never here
    raise AssertionError(msg)
