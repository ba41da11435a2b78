"""The events a served turn streams, by name, with their payloads (``docs/serve.md`` lists them).

A turn's stream is the agent's own stream (:meth:`HarnessAgent.stream`) put into words a client
can rely on: each item becomes one named event with a JSON payload. The loop yields text, tool
activity and each step's end itself; the hooks add what only they see (a compaction, a
background task's notice) with :func:`~harness.kernel.report`, so it lands in order.

The names are part of the API: a new event may be added, an existing one keeps its name and
its fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from harness.kernel import (
    Msg,
    Progress,
    Reply,
    StreamItem,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolResultBlock,
    ToolStarted,
)

__all__ = [
    "MAX_TOOL_OUTPUT_CHARS",
    "encode_sse",
    "event_of",
    "message_json",
]

MAX_TOOL_OUTPUT_CHARS: Final = 2_000
"""Characters of a tool's result a ``tool.finished`` event carries (``chars`` says how many
there were); the session keeps the whole result."""

_PROGRESS_NAMES: Final = {
    "step": "step.completed",
    "compaction_started": "compaction.started",
    "compaction": "compaction.completed",
    "task_notice": "task.notice",
}


def message_json(message: Msg) -> dict[str, Any]:
    """A message as the API shows it: its text, tool calls and results, not provider blocks."""
    shown: dict[str, Any] = {
        "id": message.id,
        "role": message.role,
        "name": message.name,
        "text": message.text,
    }
    if message.tool_uses:
        shown["tool_calls"] = [
            {"id": use.id, "name": use.name, "input": use.input} for use in message.tool_uses
        ]
    if message.tool_results:
        shown["tool_results"] = [_result_json(result) for result in message.tool_results]
    return shown


def _result_json(result: ToolResultBlock) -> dict[str, Any]:
    """A tool's result, its head only: ``chars`` says how long it was."""
    return {
        "id": result.id,
        "name": result.name,
        "is_error": result.is_error,
        "output": result.text[:MAX_TOOL_OUTPUT_CHARS],
        "chars": len(result.text),
    }


def event_of(item: StreamItem) -> tuple[str, Mapping[str, Any]]:
    """The event name and payload of one stream item."""
    if isinstance(item, TextDelta):
        return "text.delta", {"text": item.text}
    if isinstance(item, ThinkingDelta):
        return "reasoning.delta", {"text": item.text}
    if isinstance(item, ToolStarted):
        return "tool.started", {
            "id": item.call.id,
            "name": item.call.name,
            "input": item.call.input,
        }
    if isinstance(item, ToolFinished):
        return "tool.finished", _result_json(item.result)
    if isinstance(item, Progress):
        name = _PROGRESS_NAMES.get(item.kind)
        if name is None:  # a user hook's own report
            return "progress", {"kind": item.kind, **item.data}
        return name, item.data
    assert isinstance(item, Reply)
    return "turn.completed", {"message": message_json(item.message)}


def encode_sse(
    name: str | None, data: Mapping[str, Any] | str, *, ident: str | None = None
) -> bytes:
    """One server-sent event: ``id:`` and ``event:`` when given, one ``data:`` line of JSON."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = (f"id: {ident}\n" if ident else "") + (f"event: {name}\n" if name else "")
    return f"{head}data: {payload}\n\n".encode()
