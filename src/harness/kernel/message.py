"""Messages and their content blocks.

A :class:`Msg` is one turn of a conversation: a role, a list of typed content blocks, and a
stable ``id`` that is set when the message is created and never changes, so transcripts and
session files can deduplicate by it. Tool results travel in ``tool``-role messages, one result
per message. Every message serializes to JSON and back without loss::

    Msg.model_validate_json(msg.model_dump_json()) == msg
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ContentBlock",
    "ImageBlock",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "as_messages",
    "drop_unanswered_tail",
    "new_id",
]

Role = Literal["system", "user", "assistant", "tool"]


def new_id() -> str:
    """Return a fresh random identifier (32 hex digits)."""
    return uuid.uuid4().hex


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Block):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Block):
    """Model reasoning that some providers return next to the answer."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ImageBlock(_Block):
    """An image, by URL or as base64 data with its media type."""

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    media_type: str | None = None


class ToolUseBlock(_Block):
    """A tool call requested by the model; ``id`` pairs it with its result."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(_Block):
    """The result of one tool call; ``is_error`` marks a result that reports a failure."""

    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: str | list[TextBlock | ImageBlock]
    is_error: bool = False

    @property
    def text(self) -> str:
        """The output as text (image parts are left out)."""
        if isinstance(self.output, str):
            return self.output
        return "".join(part.text for part in self.output if isinstance(part, TextBlock))


ContentBlock = Annotated[
    TextBlock | ThinkingBlock | ImageBlock | ToolUseBlock | ToolResultBlock,
    Field(discriminator="type"),
]


def _now() -> datetime:
    return datetime.now(UTC)


class Msg(BaseModel):
    """One message of a conversation.

    ``content`` may be given as a plain string, which becomes one :class:`TextBlock`.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    id: str = Field(default_factory=new_id, min_length=1)
    role: Role
    content: list[ContentBlock] = Field(default_factory=list)
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: datetime = Field(default_factory=_now)

    if TYPE_CHECKING:
        # Tell type checkers that ``content`` also accepts a plain string (see the validator).
        def __init__(
            self,
            *,
            role: Role,
            content: str | Sequence[ContentBlock] = ...,
            id: str = ...,
            name: str | None = ...,
            metadata: dict[str, Any] = ...,
            timestamp: datetime = ...,
        ) -> None: ...

    @field_validator("content", mode="before")
    @classmethod
    def _text_to_blocks(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [TextBlock(text=value)]
        return value

    @property
    def text(self) -> str:
        """The concatenated text of the message's text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls this message requests, in order."""
        return [block for block in self.content if isinstance(block, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The tool results this message carries."""
        return [block for block in self.content if isinstance(block, ToolResultBlock)]

    @classmethod
    def tool_result(cls, result: ToolResultBlock) -> Msg:
        """Wrap one tool result in a ``tool``-role message."""
        return cls(role="tool", name=result.name, content=[result])


def as_messages(value: str | Msg | Sequence[Msg] | None) -> list[Msg]:
    """Normalize a call's input: a string is one user message, ``None`` is no new input."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Msg(role="user", content=value)]
    if isinstance(value, Msg):
        return [value]
    messages = list(value)
    for item in messages:
        if not isinstance(item, Msg):
            msg = f"expected str, Msg or a list of Msg, got a list containing {type(item).__name__}"
            raise TypeError(msg)
    return messages


def drop_unanswered_tail(messages: Sequence[Msg]) -> list[Msg]:
    """Cut a conversation before a final assistant turn whose tool calls are not all answered.

    A call that fails or is interrupted while its tools run leaves such a turn behind; keeping
    it would make the next request carry a tool call without a result, which providers reject.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant" and message.tool_uses:
            answered = {r.id for m in messages[index + 1 :] for r in m.tool_results}
            if all(call.id in answered for call in message.tool_uses):
                return list(messages)
            return list(messages[:index])
        if message.role != "tool":
            return list(messages)
    return list(messages)
