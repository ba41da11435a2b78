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
import re
from collections.abc import Mapping
from typing import Any, Final

from harness.errors import HarnessError
from harness.kernel import (
    Cancelled,
    Failed,
    Finished,
    Msg,
    Outcome,
    Paused,
    Progress,
    StreamItem,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolResultBlock,
    ToolStarted,
    written_by_harness,
)

__all__ = [
    "MAX_TOOL_OUTPUT_CHARS",
    "encode_sse",
    "error_code",
    "event_of",
    "message_json",
    "outcome_events",
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
    if written_by_harness(message):
        shown["synthetic"] = True  # a note the harness wrote, not the user's words
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
    """The event name and payload of one stream item before the last (its outcome)."""
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
    msg = f"{type(item).__name__} is a turn's outcome: outcome_events says how it ended"
    raise TypeError(msg)


def outcome_events(outcome: Outcome, session_id: str | None) -> list[tuple[str, Mapping[str, Any]]]:
    """How a turn ended, as the events that close its stream.

    A pause is not a failure: an ``approval.requested`` event for each call that waits, then
    ``turn.paused``; a new message refused because calls waited already is the
    ``approvals_pending`` error. A failure the harness does not mean to raise (a bug) is
    raised again, for the server's own handler.
    """
    match outcome:
        case Finished(reply):
            return [("turn.completed", {"message": message_json(reply)})]
        case Paused(pending, accepted=False):
            return [("error", {"code": "approvals_pending", "message": outcome.message})]
        case Paused(pending):
            requested = [("approval.requested", request) for request in pending]
            waiting = {"session_id": session_id, "approvals": list(pending)}
            return [*requested, ("turn.paused", waiting)]
        case Cancelled(error) | Failed(error) if isinstance(error, HarnessError):
            return [("error", {"code": error_code(error), "message": f"{error}"})]
        case Failed(error):
            raise error
    raise AssertionError(outcome)  # mypy: every outcome is matched above


def error_code(exc: BaseException) -> str:
    """A stable snake-case code for an error: ``ModelError`` becomes ``model_error``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()


def encode_sse(
    name: str | None, data: Mapping[str, Any] | str, *, ident: str | None = None
) -> bytes:
    """One server-sent event: ``id:`` and ``event:`` when given, one ``data:`` line of JSON."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = (f"id: {ident}\n" if ident else "") + (f"event: {name}\n" if name else "")
    return f"{head}data: {payload}\n\n".encode()
