"""Cached tokens from each SDK's real responses reach usage, the trace and ``harness trace``.

The provider's answer comes over HTTP from a local server speaking its protocol, through the
real ``anthropic`` and ``openai`` SDKs and Harness's adapters, into a whole ``HarnessAgent`` call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _tracing import read_records
from typer.testing import CliRunner

from _servers import AnthropicServer, OpenAIServer, running
from harness import HarnessAgent, RuntimeContext
from harness.cli.main import app
from harness.kernel import ChatModel
from harness.models.anthropic import AnthropicChatModel
from harness.models.openai import OpenAIChatModel

CTX = RuntimeContext(session_id="cached", user_id="ann")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    with running(AnthropicServer()) as server:
        yield server


def anthropic_answer(text: str, *, fresh: int, read: int, written: int) -> list[dict[str, Any]]:
    usage = {
        "input_tokens": fresh,
        "output_tokens": 1,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 4},
        },
        {"type": "message_stop"},
    ]


def openai_answer(text: str, *, prompt: int, cached: int) -> list[dict[str, Any]]:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 4,
        "total_tokens": prompt + 4,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]},
        {"choices": [], "usage": usage},
    ]


async def run_two_calls(model: ChatModel, workspace: Path) -> None:
    """Two calls on one session (the test is synchronous: ``harness trace`` runs its own loop)."""
    async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
        await agent.call("first", ctx=CTX)
        await agent.call("second", ctx=CTX)


def trace_of(workspace: Path) -> list[dict[str, Any]]:
    [path] = workspace.glob("users/ann/agents/*/traces/cached.jsonl")
    return read_records(path)


def shown(workspace: Path) -> str:
    result = CliRunner().invoke(
        app, ["trace", "cached", "-w", str(workspace), "-u", "ann"], env={"COLUMNS": "240"}
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_anthropic_cache_reads_and_writes_reach_the_trace(
    anthropic_server: AnthropicServer, workspace: Path
) -> None:
    anthropic_server.queue_stream(anthropic_answer("one", fresh=10, read=0, written=1500))
    anthropic_server.queue_stream(anthropic_answer("two", fresh=20, read=1500, written=30))
    model = AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url=anthropic_server.url)

    asyncio.run(run_two_calls(model, workspace))

    steps = [r for r in trace_of(workspace) if r["event"] == "PostReasoning"]
    assert [
        (s["input_tokens"], s["cache_read_tokens"], s["cache_write_tokens"]) for s in steps
    ] == [
        (1510, 0, 1500),
        (1550, 1500, 30),
    ]
    out = shown(workspace)
    assert "1550 (1500 cached, 30 written to cache, 20 uncached) in / 4 out tokens" in out
    assert "tokens 3060 in (1500 cached = 49%, 1530 written to cache, 30 uncached)" in out
    # and the request carried the breakpoints that make it so
    first = anthropic_server.requests[0].body
    assert isinstance(first["system"], list)
    assert any("cache_control" in block for block in first["system"])


def test_openai_cached_tokens_reach_the_trace(openai_server: OpenAIServer, workspace: Path) -> None:
    openai_server.queue_stream(openai_answer("one", prompt=1300, cached=0))
    openai_server.queue_stream(openai_answer("two", prompt=1400, cached=1280))
    model = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=f"{openai_server.url}/v1")

    asyncio.run(run_two_calls(model, workspace))

    steps = [r for r in trace_of(workspace) if r["event"] == "PostReasoning"]
    assert [(s["input_tokens"], s["cache_read_tokens"]) for s in steps] == [(1300, 0), (1400, 1280)]
    out = shown(workspace)
    assert "1400 (1280 cached, 0 written to cache, 120 uncached) in" in out
    assert "tokens 2700 in (1280 cached = 47%, 0 written to cache, 1420 uncached)" in out
    # the two requests share their system prompt byte for byte
    first, second = (json.dumps(b["messages"][0]) for b in openai_server.bodies)
    assert first == second
