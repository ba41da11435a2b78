"""What :meth:`ReActAgent.stream` yields while a call runs."""

from __future__ import annotations

from dataclasses import dataclass

from harness.kernel.message import Msg, ToolResultBlock, ToolUseBlock

__all__ = ["Reply", "StreamItem", "TextDelta", "ThinkingDelta", "ToolFinished", "ToolStarted"]


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


StreamItem = TextDelta | ThinkingDelta | ToolStarted | ToolFinished | Reply
