"""Agent trace: one log line per event, on the ``harness.trace`` logger.

INFO lines name the event, the agent, the session and the essentials (step, model, message
count, tokens, tool names, result sizes, latencies); DEBUG adds tool arguments and reply text,
shortened. ``harness --verbose`` shows them. The hook never changes an event.

Priority 0: it sees each event before any other hook has changed it.
"""

from __future__ import annotations

import json
import logging
from typing import Final

from harness.kernel import (
    Error,
    Event,
    Hook,
    PostActing,
    PostCall,
    PostCompact,
    PostReasoning,
    PreActing,
    PreCall,
    PreCompact,
    PreReasoning,
)

__all__ = ["AgentTraceHook", "describe"]

logger = logging.getLogger("harness.trace")

MAX_DETAIL_CHARS: Final = 200


def _short(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + "..."


def describe(event: Event, *, detail: bool = False) -> str:
    """One line saying what the event is about."""
    match event:
        case PreCall():
            fields = f"inputs={len(event.inputs)} messages={len(event.memory)}"
            if detail:
                fields += f" text={_short(' '.join(m.text for m in event.inputs))!r}"
        case PreReasoning():
            fields = f"step={event.step} messages={len(event.messages)} tools={len(event.tools)}"
        case PostReasoning():
            usage = event.usage
            tokens = f" tokens={usage.input_tokens}+{usage.output_tokens}" if usage else ""
            calls = ",".join(call.name for call in event.message.tool_uses)
            fields = (
                f"step={event.step} model={event.model}{tokens} "
                f"latency_ms={event.latency_s * 1000:.1f} tool_calls=[{calls}]"
            )
            if detail and event.message.text:
                fields += f" text={_short(event.message.text)!r}"
        case PreActing():
            fields = f"tool={event.tool_call.name} id={event.tool_call.id}"
            if detail:
                fields += f" args={_short(json.dumps(event.tool_call.input, ensure_ascii=False))}"
        case PostActing():
            fields = (
                f"tool={event.tool_call.name} id={event.tool_call.id} "
                f"result_chars={len(event.result.text)} error={event.result.is_error} "
                f"latency_ms={event.latency_s * 1000:.1f}"
            )
            if detail:
                fields += f" result={_short(event.result.text)!r}"
        case PostCall():
            fields = f"messages={len(event.memory)} reply_chars={len(event.reply.text)}"
        case Error():
            fields = f"error={type(event.error).__name__}: {_short(str(event.error))}"
        case PreCompact():
            fields = f"cut={event.cut} tokens_before={event.tokens_before}"
        case PostCompact():
            fields = f"removed={event.removed} tokens_after={event.tokens_after}"
        case _:
            fields = ""
    session = event.ctx.session_id or "-"
    user = f" user={event.ctx.user_id}" if event.ctx.user_id else ""
    return f"[{event.agent}] {type(event).__name__} session={session}{user} {fields}".rstrip()


class AgentTraceHook(Hook):
    """Logs every event on one line."""

    priority = 0

    async def on_event(self, event: Event) -> None:
        level = logging.WARNING if isinstance(event, Error) else logging.INFO
        if logger.isEnabledFor(level):
            logger.log(level, describe(event, detail=logger.isEnabledFor(logging.DEBUG)))
