"""OpenTelemetry spans from AgentTraceHook: names, parents and GenAI attributes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _tracing import FULL_SCRIPT, SESSION, USER, traced_agent
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from harness import HarnessAgent, RuntimeContext
from harness.errors import ConfigError, ScriptExhaustedError
from harness.hooks.trace import AgentTraceHook
from harness.models import ScriptedChatModel


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


async def test_a_call_is_a_span_with_a_child_per_step_and_per_tool(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent, _, _ = traced_agent(workspace, FULL_SCRIPT, otel=True, tracer_provider=provider)
    await agent.call("start", ctx=RuntimeContext(session_id=SESSION, user_id=USER))
    spans = exporter.get_finished_spans()
    by_name = {span.name: span for span in spans}
    assert sorted(by_name) == [
        "chat scripted",
        "execute_tool dump",
        "execute_tool fail",
        "execute_tool lookup",
        "invoke_agent harness",
    ]
    assert len(spans) == 6  # two chat steps
    call = by_name["invoke_agent harness"]
    assert call.parent is None
    assert dict(call.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "harness",
        "gen_ai.conversation.id": SESSION,
        "session.id": SESSION,
        "user.id": USER,
    }
    assert call.status.status_code is StatusCode.UNSET
    assert [event.name for event in call.events] == ["compaction"]
    others = [span for span in spans if span is not call]
    assert {parent_id(span) for span in others} == {span_id(call)}
    assert {span.context.trace_id for span in spans if span.context} == {call.context.trace_id}

    chats = [span for span in spans if span.name == "chat scripted"]
    assert [
        (
            span.attributes["gen_ai.operation.name"],
            span.attributes["gen_ai.request.model"],
            span.attributes["gen_ai.usage.input_tokens"],
            span.attributes["gen_ai.usage.output_tokens"],
            span.attributes["harness.step"],
        )
        for span in chats
        if span.attributes
    ] == [("chat", "scripted", 100, 20, 0), ("chat", "scripted", 150, 5, 1)]

    lookup = by_name["execute_tool lookup"]
    assert lookup.attributes is not None
    assert lookup.attributes["gen_ai.operation.name"] == "execute_tool"
    assert lookup.attributes["gen_ai.tool.name"] == "lookup"
    assert lookup.attributes["gen_ai.tool.call.id"] == "call_0"
    assert lookup.status.status_code is StatusCode.UNSET
    fail = by_name["execute_tool fail"]
    assert fail.status.status_code is StatusCode.ERROR
    assert fail.attributes is not None
    assert fail.attributes["error.type"] == "tool_error"
    # the tools ran inside the call, after the first step
    assert chats[0].end_time is not None
    assert lookup.start_time is not None
    assert chats[0].end_time <= lookup.start_time
    assert call.end_time is not None
    assert lookup.end_time is not None
    assert lookup.end_time <= call.end_time


async def test_a_failed_call_has_status_error_and_the_exception(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent, _, _ = traced_agent(workspace, [], otel=True, tracer_provider=provider)
    with pytest.raises(ScriptExhaustedError):
        await agent.call("nothing fits", ctx=RuntimeContext(session_id="bad"))
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(spans) == ["chat", "invoke_agent harness"]  # the step never got an answer
    for span in spans.values():
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "ScriptExhaustedError"
    (exception,) = spans["invoke_agent harness"].events
    assert exception.name == "exception"
    assert exception.attributes is not None
    assert exception.attributes["exception.type"] == "harness.errors.ScriptExhaustedError"
    assert parent_id(spans["chat"]) == span_id(spans["invoke_agent harness"])


async def test_spans_without_a_workspace_write_no_file(
    workspace: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = HarnessAgent(
        model=ScriptedChatModel([{"text": "hi"}]),
        workspace=workspace,
        hooks=[AgentTraceHook(otel=True, tracer_provider=provider)],
        trace=False,
        memory=None,
    )
    await agent.call("x", ctx=RuntimeContext(session_id="plain"))
    assert [span.name for span in exporter.get_finished_spans()] == [
        "chat scripted",
        "invoke_agent harness",
    ]
    assert not list(workspace.rglob("traces"))


def test_otel_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ConfigError, match=r"pip install -e '.*\[otel\]'"):
        AgentTraceHook(otel=True)
