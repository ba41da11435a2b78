"""Agent trace: a log line per event, a JSON-lines trace file per session, optional spans.

Log: one line per event on the ``harness.trace`` logger (but ``ToolDecision``: the hook sees
it before the hooks after it decide it, and the approval ledger keeps what was decided). INFO
lines name the event, the agent, the session and the essentials (step, model, message count,
tokens, tool names, result sizes, latencies); DEBUG adds tool arguments and reply text,
shortened. ``harness --verbose`` shows them.

File: with a workspace, every event of a call also becomes one record of
``agents/<agent>/traces/<session>.jsonl`` in the caller's namespace (format:
:mod:`harness.observability.trace_file`; ``harness trace SESSION`` renders it). The records of
a call are buffered and appended in one whole-record write when the call ends (PostCall or
Error), so the loop never waits on storage between steps, and one call's records are
contiguous in the file. The write runs beside the hooks after this one (the session's last
save) and the call returns once it is done (``PostCall.finishing``). A failed write is logged
and never fails the call. A context overflow is a ``ContextOverflow`` record in its call; when
compaction recovered, the forced ``PostCompact`` and the step's second ``PreReasoning`` follow
it.

Spans: with ``otel=True``, OpenTelemetry spans per call, reasoning step and tool call
(:mod:`harness.observability.otel`).

Which call an event belongs to: every event carries its call's id (``event.call_id``, fresh
per call), and the hook keeps the open calls by it. Calls for different sessions or users,
running concurrently on one agent, therefore never mix their records. An event whose call is
not open (one a hook emits outside any call) is written at once.

Eviction shows in a tool's record: the hook sees a result before
:class:`~harness.hooks.ToolResultEvictionHook` (50) replaces it, so it notes the tool's own
result size then, and when the call ends it looks at the result memory kept; a placeholder
adds ``evicted: true``, ``evicted_path`` and ``kept_chars``.

Priority 0: it sees each event before any other hook has changed it. It never changes an event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from harness.compaction.eviction import parse_placeholder
from harness.kernel import (
    ContextOverflow,
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
    ToolDecision,
    ToolResultBlock,
    usage_fields,
)
from harness.observability.trace_file import (
    MAX_ARGUMENT_CHARS,
    MAX_MESSAGE_CHARS,
    cut,
    now_iso,
    write_records,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

    from harness.observability.otel import GenAiSpans
    from harness.workspace import WorkspaceManager

__all__ = ["AgentTraceHook", "describe"]

logger = logging.getLogger("harness.trace")

MAX_DETAIL_CHARS: Final = 200

_TASK_ID = re.compile(r"^task_id: (\S+)$", re.MULTILINE)
_SUBAGENT_TOOLS: Final = frozenset({"agent_spawn", "agent_send"})


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
            if usage and (usage.cache_read_tokens or usage.cache_write_tokens):
                tokens += f" cache_read={usage.cache_read_tokens}"
                tokens += f" cache_write={usage.cache_write_tokens}"
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
            ended = " ".join(f"{key}={value}" for key, value in event.outcome.record().items())
            fields = f"messages={len(event.memory)} {ended}"
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


@dataclass(slots=True, eq=False)
class _Call:
    """What the hook knows about one running call (kept only while it runs)."""

    call_id: str
    started: float
    inputs: int
    records: list[dict[str, Any]] = field(default_factory=list)
    tools: list[tuple[dict[str, Any], PostActing, ToolResultBlock]] = field(default_factory=list)
    span: Span | None = None
    chat_span: Span | None = None
    tool_spans: dict[str, Span] = field(default_factory=dict)


def _fields(event: Event) -> dict[str, Any]:
    """The record fields particular to an event."""
    match event:
        case PreCall():
            return {"inputs": len(event.inputs), "messages": len(event.memory)}
        case PreReasoning():
            return {"step": event.step, "messages": len(event.messages), "tools": len(event.tools)}
        case PostReasoning():
            return {
                "step": event.step,
                "model": event.model,
                **usage_fields(event.usage),
                "latency_s": round(event.latency_s, 6),
                "tool_calls": [call.name for call in event.message.tool_uses],
                "text_chars": len(event.message.text),
            }
        case PreActing():
            return {"tool": event.tool_call.name, "tool_call_id": event.tool_call.id}
        case PostActing():
            arguments = json.dumps(event.tool_call.input, ensure_ascii=False, default=str)
            fields: dict[str, Any] = {
                "tool": event.tool_call.name,
                "tool_call_id": event.tool_call.id,
                "arguments": cut(arguments, MAX_ARGUMENT_CHARS),
                "result_chars": len(event.result.text),
                "is_error": event.result.is_error,
                "latency_s": round(event.latency_s, 6),
            }
            if event.tool_call.name in _SUBAGENT_TOOLS and (
                task := _TASK_ID.search(event.result.text)
            ):
                fields["task_id"] = task[1]
            return fields
        case PostCall():
            return event.outcome.record()
        case ContextOverflow():
            sizes = {
                name: value
                for name in ("requested_tokens", "limit_tokens")
                if isinstance(value := getattr(event.error, name, None), int)
            }
            return {
                "step": event.step,
                "message": cut(str(event.error), MAX_MESSAGE_CHARS),
                **sizes,  # as the provider stated them, when it did
            }
        case Error():
            return {
                "type": type(event.error).__name__,
                "message": cut(str(event.error), MAX_MESSAGE_CHARS),
            }
        case PreCompact():
            return {"cut": event.cut, "tokens_before": event.tokens_before}
        case PostCompact():
            details = event.details
            return {
                "removed": event.removed,
                "tokens_before": details.get("tokens_before"),
                "tokens_after": event.tokens_after,
                "forced": details.get("forced"),
                "extractive": details.get("extractive"),
            }
    return {}


def _note_eviction(rec: dict[str, Any], event: PostActing, original: ToolResultBlock) -> None:
    """Add to a tool's record what later hooks did to its result (eviction, usually)."""
    kept = event.result
    if kept is original or kept.text == original.text:
        return
    ref = parse_placeholder(kept.text)
    if ref is not None:
        rec.update(evicted=True, evicted_path=ref.path)
    else:
        rec["result_changed"] = True
    rec["kept_chars"] = len(kept.text)


class AgentTraceHook(Hook):
    """Logs every event on one line, and traces each session to a JSON-lines file.

    Args:
        workspace: Where trace files are written (the agent's workspace); None only logs.
        agent_name: The agent's name; its traces go to ``agents/<agent_name>/traces/``.
        otel: Also emit OpenTelemetry spans (needs the ``otel`` extra).
        tracer_provider: Where the spans go; the global tracer provider when None.

    Raises:
        ConfigError: ``otel`` is set but OpenTelemetry is not installed.
    """

    priority = 0

    def __init__(
        self,
        workspace: WorkspaceManager | None = None,
        *,
        agent_name: str = "harness",
        otel: bool = False,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.workspace = workspace
        self.agent_name = agent_name
        self.spans: GenAiSpans | None = None
        if otel:
            from harness.observability.otel import GenAiSpans

            self.spans = GenAiSpans(tracer_provider)
        # The open calls, by call id; see the module docstring.
        self._calls: dict[str, _Call] = {}

    async def on_event(self, event: Event) -> None:
        if isinstance(event, ToolDecision):
            return  # decided after this hook saw it; the ledger, not the trace, keeps decisions
        level = logging.WARNING if isinstance(event, Error) else logging.INFO
        if logger.isEnabledFor(level):
            logger.log(level, describe(event, detail=logger.isEnabledFor(logging.DEBUG)))
        if self.workspace is None and self.spans is None:
            return
        if isinstance(event, PreCall):
            self._calls[event.call_id] = _Call(event.call_id, time.monotonic(), len(event.inputs))
        call = self._calls.get(event.call_id)
        if call is None:
            await self._outside_call(event)
            return
        rec = self._record(event, call)
        if self.spans is not None:
            self._span(event, call, self.spans)
        if isinstance(event, PostActing):
            call.tools.append((rec, event, event.result))
        if isinstance(event, PostCall | Error):
            rec["latency_s"] = round(time.monotonic() - call.started, 6)
            if isinstance(event, PostCall):
                rec["inputs"] = call.inputs
                rec["steps"] = sum(1 for r in call.records if r["event"] == "PostReasoning")
            del self._calls[event.call_id]
            # Written beside the hooks after this one (the session's last save), not before.
            event.finishing.append(asyncio.ensure_future(self._write(event, call)))

    def _record(self, event: Event, call: _Call | None) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "ts": now_iso(),
            "event": type(event).__name__,
            "agent": event.agent,
            "session_id": event.ctx.session_id,
            "user_id": event.ctx.user_id,
            "call_id": call.call_id if call else None,
        }
        if call is not None:
            rec["elapsed_s"] = round(time.monotonic() - call.started, 6)
            call.records.append(rec)
        rec.update(_fields(event))
        return rec

    def _span(self, event: Event, call: _Call, spans: GenAiSpans) -> None:
        match event:
            case PreCall():
                call.span = spans.start_call(event.agent, event.ctx)
            case PreReasoning() if call.span is not None:
                call.chat_span = spans.start_chat(call.span, event.step)
            case PostReasoning() if call.chat_span is not None:
                spans.end_chat(call.chat_span, event.model, event.usage)
                call.chat_span = None
            case ContextOverflow() if call.chat_span is not None:
                spans.fail(call.chat_span, event.error)  # the step's retry opens its own
                call.chat_span = None
            case PreActing() if call.span is not None:
                call.tool_spans[event.tool_call.id] = spans.start_tool(call.span, event.tool_call)
            case PostActing():
                span = call.tool_spans.pop(event.tool_call.id, None)
                if span is not None:
                    spans.end_tool(span, event.result)
            case PostCompact() if call.span is not None:
                spans.compaction(call.span, _fields(event))
            case PostCall() if call.span is not None:
                spans.end(call.span)
            case Error() if call.span is not None:
                for open_span in [call.chat_span, *call.tool_spans.values()]:
                    if open_span is not None:
                        spans.fail(open_span, event.error)
                spans.fail(call.span, event.error)

    async def _outside_call(self, event: Event) -> None:
        if self.workspace is None:
            return
        rec = self._record(event, None)
        await self._append(event, [rec])

    async def _write(self, event: Event, call: _Call) -> None:
        if self.workspace is None:
            return
        for rec, acting, original in call.tools:
            _note_eviction(rec, acting, original)
        await self._append(event, call.records)

    async def _append(self, event: Event, records: list[dict[str, Any]]) -> None:
        assert self.workspace is not None
        try:
            await write_records(
                self.workspace, self.agent_name, event.ctx.session_id, event.ctx.user_id, records
            )
        except Exception as exc:
            logger.warning("could not write the trace of session %r: %s", event.ctx.session_id, exc)
