"""What :meth:`ReActAgent.stream` yields while a call runs, and how it ends.

The loop yields a ``Progress("accepted")`` item first, once the call has taken its input (from
then on, however the call ends, its hooks hear of it with the input in memory, so a session
keeps it); then text, reasoning and tool activity, and a ``Progress("step")`` item when a step
ends (its model, tokens, latency and tool calls). A hook that knows something else a
streaming caller wants to see (a compaction, a background task's notice) adds a
:class:`Progress` item with :func:`report`: it lands in the stream in the order things
happened, between the deltas and tool items around it, and is dropped when nobody streams.
The last item is always the call's outcome (:mod:`harness.kernel.outcome`): finished, paused,
cancelled or failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from harness.kernel.message import ToolResultBlock, ToolUseBlock
from harness.kernel.outcome import Cancelled, Ended, Failed, Finished, Outcome, Paused

__all__ = [
    "Progress",
    "StreamItem",
    "TextDelta",
    "ThinkingDelta",
    "ToolFinished",
    "ToolStarted",
    "ended",
    "report",
    "settled",
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
class Progress:
    """Something a hook reports while the call runs: ``kind`` names it, ``data`` is JSON-able."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)


StreamItem = (
    TextDelta
    | ThinkingDelta
    | ToolStarted
    | ToolFinished
    | Progress
    | Finished
    | Paused
    | Cancelled
    | Failed
)

Emit = Callable[[StreamItem], None]

STREAM: ContextVar[Emit | None] = ContextVar("harness_stream", default=None)
"""Where the running call's stream items go (None when the call is not streamed). The loop
sets it for the task of each call, so a nested call (a subagent run by a tool) has its own."""


def report(kind: str, **data: Any) -> None:
    """Add a :class:`Progress` item to the running call's stream, if it is streamed."""
    emit = STREAM.get()
    if emit is not None:
        emit(Progress(kind, data))


def settled(outcome: Outcome) -> Ended:
    """A finished or paused outcome as it is; the error of a cancelled or failed one, raised.

    What ``call`` does with its outcome, as a Python caller expects of a failure.
    """
    match outcome:
        case Cancelled(error) | Failed(error):
            raise error
    return outcome


async def ended(items: AsyncGenerator[StreamItem, None]) -> Ended:
    """How a call's stream ended (:func:`settled`): ``call`` is ``stream``, consumed."""
    last: StreamItem | None = None
    async with contextlib.aclosing(items):
        async for item in items:
            last = item
    if not isinstance(last, Outcome):  # a stream ends with its outcome: never here
        msg = f"the call's stream ended without an outcome (its last item: {last!r})"
        raise AssertionError(msg)
    return settled(last)
