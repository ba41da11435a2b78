"""OpenTelemetry spans for agent calls, following the GenAI semantic conventions.

One span per call, ``invoke_agent <agent>`` (``gen_ai.operation.name = "invoke_agent"``,
``gen_ai.agent.name``, ``gen_ai.conversation.id`` and ``session.id`` = the session,
``user.id``), a child of whatever span is current when the call starts. Under it:

- ``chat <model>`` per reasoning step (``gen_ai.operation.name = "chat"``,
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens`` and
  ``gen_ai.usage.cache_creation.input_tokens`` when the provider reported usage,
  ``harness.step``); the model is only known when the answer arrives, so the span starts as
  ``chat`` and is renamed then;
- ``execute_tool <name>`` per tool call (``gen_ai.operation.name = "execute_tool"``,
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type = "function"``); a tool
  that returned an error result has status ERROR and ``error.type = "tool_error"``.

A compaction is a span event ``compaction`` on the call's span. A failed call records the
exception on its span (and ends any step or tool span still open) with status ERROR and
``error.type`` the exception's class name.

Parents are passed explicitly (``set_span_in_context``), never attached to the current
context: a call's events are handled in the call's task, but its tools may run in other tasks,
and an attached context would leak into whatever the task runs next.

OpenTelemetry is an optional dependency (extra ``otel``); :class:`GenAiSpans` says how to
install it when it is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from harness.context import RuntimeContext
from harness.errors import ConfigError, install_hint
from harness.kernel import ToolResultBlock, ToolUseBlock, Usage

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["INSTRUMENTATION_NAME", "GenAiSpans"]

INSTRUMENTATION_NAME: Final = "harness"
"""The name the spans' tracer is obtained under."""

OTEL_MISSING: Final = (
    "OpenTelemetry is not installed, so the agent trace cannot emit spans; "
    f"run {install_hint('otel')} or pass otel=False"
)


class GenAiSpans:
    """Starts and ends the spans of agent calls.

    Args:
        tracer_provider: Where the spans go; the global tracer provider when None (what an
            application configures with ``opentelemetry.trace.set_tracer_provider``).

    Raises:
        ConfigError: ``opentelemetry`` is not installed.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ConfigError(OTEL_MISSING) from exc
        self._trace = trace
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)

    def start_call(self, agent: str, ctx: RuntimeContext) -> Span:
        """The span of a call, a child of the current span (if any)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
        }
        if ctx.session_id is not None:
            attributes["gen_ai.conversation.id"] = ctx.session_id
            attributes["session.id"] = ctx.session_id
        if ctx.user_id is not None:
            attributes["user.id"] = ctx.user_id
        return self._tracer.start_span(
            f"invoke_agent {agent}", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        )

    def start_chat(self, call: Span, step: int) -> Span:
        """The span of one reasoning step, under the call's span."""
        return self._tracer.start_span(
            "chat",
            context=self._trace.set_span_in_context(call),
            kind=self._trace.SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "harness.step": step},
        )

    def end_chat(self, span: Span, model: str, usage: Usage | None) -> None:
        """Name the step's span after its model, add the usage, and end it."""
        span.update_name(f"chat {model}")
        span.set_attribute("gen_ai.request.model", model)
        span.set_attribute("gen_ai.response.model", model)
        if usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
            span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)
        span.end()

    def start_tool(self, call: Span, tool_call: ToolUseBlock) -> Span:
        """The span of one tool call, under the call's span."""
        return self._tracer.start_span(
            f"execute_tool {tool_call.name}",
            context=self._trace.set_span_in_context(call),
            kind=self._trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool_call.name,
                "gen_ai.tool.call.id": tool_call.id,
                "gen_ai.tool.type": "function",
            },
        )

    def end_tool(self, span: Span, result: ToolResultBlock) -> None:
        """End a tool's span; an error result sets status ERROR."""
        if result.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, result.text[:200]))
        span.end()

    def compaction(self, call: Span, attributes: dict[str, Any]) -> None:
        """Note a compaction on the call's span."""
        call.add_event(
            "compaction", {k: v for k, v in attributes.items() if isinstance(v, bool | int | str)}
        )

    def fail(self, span: Span, error: BaseException) -> None:
        """Record ``error`` on a span, set status ERROR and end it."""
        span.record_exception(error)
        span.set_attribute("error.type", type(error).__name__)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)[:200]))
        span.end()

    def end(self, span: Span) -> None:
        """End a span successfully."""
        span.end()
