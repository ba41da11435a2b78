"""A deterministic model that replays a script: for tests, examples and the offline tour.

It is not a language model and does not pretend to be one: it answers each request with the
next turn of its script whose pattern matches. A script is a JSON file::

    {
      "log": "requests.jsonl",
      "turns": [
        {"match": "weather", "tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}]},
        {"text": "It is sunny in Paris."},
        {"match": "(?i)thanks", "text": "You're welcome!", "repeat": true}
      ]
    }

Each turn has, all optional:

- ``match``: a regular expression searched (``re.search``) in the text of the request's last
  message (its text blocks and tool results). A turn without ``match`` fits any request.
- ``text``: the answer's text.
- ``tool_calls``: a list of ``{"name": ..., "input": {...}}`` tool calls.
- ``usage``: ``{"input_tokens": n, "output_tokens": m}`` to report as the provider's usage.
- ``repeat``: when true the turn can answer any number of requests; otherwise it is used once.
- ``delay``: seconds to wait before answering, as a slow provider would (for tests of what
  happens while a turn runs: a second request, a disconnect, a stop).

A request is answered by the first turn, in file order, that is unused (or ``repeat``) and fits.
When none fits, :class:`~harness.errors.ScriptExhaustedError` quotes the request's last message.
With a top-level ``log`` (relative to the script file), every request's messages are appended to
that file as one JSON line, so a test or a curious user can see exactly what the agent sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.errors import ConfigError, ScriptExhaustedError
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    ContentBlock,
    Msg,
    TextBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
)

__all__ = ["ScriptTurn", "ScriptedChatModel"]


class _ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class _Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)


class ScriptTurn(BaseModel):
    """One scripted answer; see the module docstring for the fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str | None = None
    text: str | None = None
    tool_calls: list[_ToolCall] = Field(default_factory=list)
    usage: _Usage | None = None
    repeat: bool = False
    delay: float = Field(default=0.0, ge=0, le=3600)

    @field_validator("match")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                msg = f"'match' is not a valid regular expression ({exc}): {value!r}"
                raise ValueError(msg) from exc
        return value

    def fits(self, text: str) -> bool:
        return self.match is None or re.search(self.match, text) is not None


class _Script(BaseModel):
    model_config = ConfigDict(extra="forbid")
    turns: list[ScriptTurn]
    log: str | None = None


WORKSPACE_NOTE: Final = "workspace_update"
"""The name of the harness's note that a memory file changed: it follows the message that was
last when the change was seen, often a tool result, and is no part of what a turn answers, so
``match`` looks at the message before it."""


def request_text(message: Msg) -> str:
    """The text a turn's ``match`` is searched in: text blocks and tool-result outputs."""
    parts = [message.text]
    parts.extend(result.text for result in message.tool_results)
    return "\n".join(part for part in parts if part)


@dataclass
class ScriptedChatModel:
    """Answers requests from a script of turns.

    Args:
        turns: The script, as :class:`ScriptTurn` objects or plain dicts.
        log_path: Where to append each request's messages as a JSON line (optional).
        name: The model name reported in responses and traces.
    """

    turns: Sequence[ScriptTurn | dict[str, Any]]
    log_path: Path | None = None
    name: str = "scripted"
    requests: list[list[Msg]] = field(default_factory=list, init=False)
    _used: set[int] = field(default_factory=set, init=False)
    _ids: itertools.count[int] = field(default_factory=itertools.count, init=False)

    def __post_init__(self) -> None:
        self.turns = [
            t if isinstance(t, ScriptTurn) else ScriptTurn.model_validate(t) for t in self.turns
        ]

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedChatModel:
        """Load a script file; a missing or invalid file raises :class:`ConfigError`."""
        path = Path(path)
        try:
            script = _Script.model_validate_json(path.read_bytes())
        except OSError as exc:
            msg = f"cannot read model script {path}: {exc.strerror or exc}"
            raise ConfigError(msg) from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "file"
            msg = f"invalid model script {path}: {where}: {first['msg']}"
            raise ConfigError(msg) from exc
        log_path = path.parent / script.log if script.log else None
        return cls(script.turns, log_path=log_path, name=f"scripted:{path.name}")

    @property
    def model_name(self) -> str:
        return self.name

    def _pick(self, messages: Sequence[Msg]) -> ScriptTurn:
        asked = [m for m in messages if m.name != WORKSPACE_NOTE] or list(messages)
        last = request_text(asked[-1]) if asked else ""
        for index, turn in enumerate(self.turns):
            assert isinstance(turn, ScriptTurn)
            if (turn.repeat or index not in self._used) and turn.fits(last):
                if not turn.repeat:
                    self._used.add(index)
                return turn
        shown = last if len(last) <= 300 else last[:300] + "..."
        msg = f"scripted model has no turn left that matches the request; last message: {shown!r}"
        raise ScriptExhaustedError(msg)

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        """Answer with the next fitting turn, streaming its text word by word."""
        self.requests.append(list(messages))
        try:
            # Chosen before the log write awaits, so concurrent requests get turns in order.
            turn = self._pick(messages)
        finally:
            if self.log_path is not None:
                line = json.dumps([m.model_dump(mode="json") for m in messages], ensure_ascii=False)
                await asyncio.to_thread(_append_line, self.log_path, line)
        if turn.delay:
            await asyncio.sleep(turn.delay)
        content: list[ContentBlock] = []
        if turn.text:
            for piece in re.findall(r"\S+\s*|\s+", turn.text):
                yield ChatChunk(text=piece)
            content.append(TextBlock(text=turn.text))
        for call in turn.tool_calls:
            content.append(
                ToolUseBlock(id=f"call_{next(self._ids)}", name=call.name, input=call.input)
            )
        usage = Usage(turn.usage.input_tokens, turn.usage.output_tokens) if turn.usage else None
        stop = "tool_use" if turn.tool_calls else "end_turn"
        yield ChatResponse(content=content, usage=usage, model=self.name, stop_reason=stop)


def _append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
