"""Messages and their content blocks.

A :class:`Msg` is one turn of a conversation: a role, a list of typed content blocks, and a
stable ``id`` that is set when the message is created and never changes, so transcripts and
session files can deduplicate by it. Tool results travel in ``tool``-role messages, one result
per message. Every message serializes to JSON and back without loss::

    Msg.model_validate_json(msg.model_dump_json()) == msg
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from harness.errors import InvalidText

__all__ = [
    "SYNTHETIC",
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
    "storable",
    "unanswered_calls",
    "written_by_harness",
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
    trust: str | None = None
    """What the harness's own tool vouches for its output: the memory tools set the lowest
    trust label of the memory they show. None for every other tool (its output is content no
    user typed). Set only by the harness's code; the model and users never build results."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without ``trust`` when unset: results are stored as they were before it existed."""
        data: dict[str, Any] = handler(self)
        if data.get("trust") is None:
            data.pop("trust", None)
        return data

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


SYNTHETIC: Final = "synthetic"
"""The metadata key (``True``) of a message the harness wrote itself in the user's turn: a task
notice, a reminder, a workspace note. Such a message is never the user's words."""


def written_by_harness(message: Msg) -> bool:
    """Whether the harness wrote ``message`` (:data:`SYNTHETIC`), not the user or the model.

    The flag is set only by the harness's own code; a user sends text, and the HTTP APIs and
    the CLI build messages from text, so no user can set it.
    """
    return message.metadata.get(SYNTHETIC) is True


def as_messages(value: str | Msg | Sequence[Msg] | None) -> list[Msg]:
    """Normalize a call's input: a string is one user message, ``None`` is no new input.

    Raises:
        InvalidText: The input holds text that cannot be stored (a lone surrogate): refused
            here, before anything runs, rather than found when the session is saved.
    """
    if value is None:
        return []
    if isinstance(value, str):
        messages = [Msg(role="user", content=value)]
    elif isinstance(value, Msg):
        messages = [value]
    else:
        messages = list(value)
        for item in messages:
            if not isinstance(item, Msg):
                kind = type(item).__name__
                msg = f"expected str, Msg or a list of Msg, got a list containing {kind}"
                raise TypeError(msg)
    for message in messages:
        if storable(message) is not message:
            shown = repr(message.text[:60])
            msg = (
                f"the input {shown} holds a lone surrogate, which is not text and cannot be "
                "saved; send valid UTF-8 (decode bytes with errors='replace')"
            )
            raise InvalidText(msg)
    return messages


_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_T = TypeVar("_T")


def storable(value: _T) -> _T:
    r"""``value`` with every lone surrogate in its strings escaped; ``value`` itself if none.

    A lone surrogate has no UTF-8 form, so a message holding one cannot be saved, and every
    later save of its session would fail. They reach Python from bytes that are not UTF-8:
    a file name (``\udc80`` for the byte 0x80, written ``\x80`` here), a tool's output, a
    model's JSON (``\ud800``). Works on strings, lists, dicts and messages and their blocks; what
    holds none is returned as it is (the same object), which keeps the cost to one scan.
    """
    if isinstance(value, str):
        if value.isascii() or _SURROGATE.search(value) is None:
            return value
        return _SURROGATE.sub(_escaped, value)  # type: ignore[return-value]
    if isinstance(value, BaseModel):
        updates = {}
        for field, old in value.__dict__.items():  # the fields and their values, as set
            new = storable(old)
            if new is not old:
                updates[field] = new
        return value.model_copy(update=updates) if updates else value
    if isinstance(value, list):
        if any(storable(item) is not item for item in value):  # built only when one changes
            return [storable(item) for item in value]  # type: ignore[return-value]
        return value
    if isinstance(value, dict):
        if any(storable(k) is not k or storable(v) is not v for k, v in value.items()):
            return {storable(k): storable(v) for k, v in value.items()}  # type: ignore[return-value]
        return value
    return value


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as os.fsdecode keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def drop_unanswered_tail(messages: Sequence[Msg]) -> list[Msg]:
    """Cut a conversation before a final assistant turn whose tool calls are not all answered.

    A call that fails or is interrupted while its tools run leaves such a turn behind; keeping
    it would make the next request carry a tool call without a result, which providers reject.
    """
    last = _last_tool_turn(messages)
    if last is None or not last[1]:
        return list(messages)
    return list(messages[: last[0]])


def unanswered_calls(messages: Sequence[Msg]) -> list[ToolUseBlock]:
    """The tool calls of the last assistant turn that have no result after it."""
    last = _last_tool_turn(messages)
    return last[1] if last is not None else []


def _last_tool_turn(messages: Sequence[Msg]) -> tuple[int, list[ToolUseBlock]] | None:
    """The last assistant turn with tool calls (its index) and its calls that have no result.

    None when a message other than their results follows that turn, or there is none.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant" and message.tool_uses:
            answered = {r.id for m in messages[index + 1 :] for r in m.tool_results}
            return index, [call for call in message.tool_uses if call.id not in answered]
        if message.role != "tool":
            return None
    return None
