"""The openai adapter against a real OpenAI-compatible server: llama.cpp's, with SmolLM2.

The server (``llama_server`` in conftest.py) runs ``llama_cpp.server`` on a free loopback port
with ``--chat_format chatml-function-calling`` and an n_ctx of 2048. It is stricter than OpenAI
in some ways (a ``null`` content beside tool calls is a 500) and weaker in others (it cannot
stream an automatic tool choice), and these tests hold the adapter to both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from _outcomes import answer
from conftest import LlamaServer
from harness import CompactionConfig, HarnessAgent
from harness.context import RuntimeContext
from harness.errors import ContextOverflowError, ModelError
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Msg,
    TextBlock,
    Toolkit,
    ToolUseBlock,
    complete,
)
from harness.models.openai import OpenAIChatModel


def user(text: str) -> Msg:
    return Msg(role="user", content=[TextBlock(text=text)])


def text_of(response: ChatResponse) -> str:
    return "".join(block.text for block in response.content if isinstance(block, TextBlock))


def add(a: int, b: int) -> str:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return str(a + b)


@pytest.fixture
async def model(llama_server: LlamaServer) -> AsyncIterator[OpenAIChatModel]:
    # The SDK's retries stay on: after a stream it cut, the server closes the connection, and
    # the next request may pick that connection from the pool and be retried on a new one.
    built = OpenAIChatModel(
        llama_server.model,
        api_key="none",
        base_url=llama_server.base_url,
        options={"max_tokens": 48, "seed": 3},
    )
    yield built
    await built.aclose()


async def test_a_plain_reply(llama_server: LlamaServer) -> None:
    plain = OpenAIChatModel(
        llama_server.model, api_key="none", base_url=llama_server.base_url, stream=False
    )
    try:
        items = [item async for item in plain.stream([user("Say hello.")], [], max_tokens=32)]
    finally:
        await plain.aclose()

    (answer,) = items
    assert isinstance(answer, ChatResponse)
    assert text_of(answer).strip()
    assert answer.stop_reason in ("stop", "length")
    assert answer.usage is not None
    assert answer.usage.input_tokens > 0
    assert 0 < answer.usage.output_tokens <= 32


async def test_a_streamed_reply(model: OpenAIChatModel) -> None:
    items = [item async for item in model.stream([user("Count from one to five.")], [])]

    final = items[-1]
    assert isinstance(final, ChatResponse)
    deltas = [item.text for item in items[:-1] if isinstance(item, ChatChunk)]
    assert len(deltas) >= 2, "the reply did not stream"
    assert "".join(deltas) == text_of(final)
    assert final.stop_reason in ("stop", "length")


async def test_a_forced_tool_call_is_executed_and_its_result_sent_back(
    model: OpenAIChatModel,
) -> None:
    toolkit = Toolkit([add])
    question = user("What is 2 plus 3?")
    forced = {"type": "function", "function": {"name": "add"}}

    first = await complete(model, [question], toolkit.schemas(), tool_choice=forced)
    (call,) = [block for block in first.content if isinstance(block, ToolUseBlock)]
    assert call.name == "add"
    assert all(isinstance(call.input[name], int) for name in ("a", "b")), call.input
    result = await toolkit.call(call, RuntimeContext())
    assert not result.is_error
    assert result.text == str(call.input["a"] + call.input["b"])

    # The assistant message has only a tool call: the adapter sends content "", where the
    # null that OpenAI accepts is a 500 from this server.
    conversation = [question, Msg(role="assistant", content=[call]), Msg.tool_result(result)]
    second = await complete(model, conversation, toolkit.schemas())

    assert text_of(second).strip()


async def test_streaming_an_automatic_tool_choice_fails_clearly_without_the_fallback(
    llama_server: LlamaServer,
) -> None:
    strict = OpenAIChatModel(
        llama_server.model,
        api_key="none",
        base_url=llama_server.base_url,
        max_retries=0,
        stream_fallback=False,
    )
    tools = Toolkit([add]).schemas()
    try:
        with pytest.raises(ModelError, match="the stream ended without any data"):
            await complete(strict, [user("What is 2 plus 3?")], tools, tool_choice="auto")
    finally:
        await strict.aclose()


async def test_with_the_fallback_an_automatic_tool_choice_is_answered(
    model: OpenAIChatModel,
) -> None:
    tools = Toolkit([add]).schemas()

    answer = await complete(model, [user("What is 2 plus 3?")], tools, tool_choice="auto")

    calls = [block for block in answer.content if isinstance(block, ToolUseBlock)]
    assert answer.stop_reason in ("stop", "length", "tool_calls")
    assert all(call.name == "add" for call in calls)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
async def test_a_request_over_the_context_is_a_context_overflow(
    llama_server: LlamaServer, stream: bool
) -> None:
    # Streamed, the server's 200 comes first and the error never arrives: the fallback's plain
    # request gets the 400 with code context_length_exceeded.
    model = OpenAIChatModel(
        llama_server.model, api_key="none", base_url=llama_server.base_url, stream=stream
    )
    too_long = user("word " * (llama_server.n_ctx + 500))
    try:
        with pytest.raises(ContextOverflowError, match="maximum context length is 2048 tokens"):
            await complete(model, [too_long], [])
    finally:
        await model.aclose()


async def test_a_session_that_outgrows_the_context_recovers_by_compacting(
    model: OpenAIChatModel, workspace: Path, llama_server: LlamaServer
) -> None:
    # Compaction's own triggers are out of reach (the defaults: 50 messages, 80,000 tokens), so
    # the only way through is the server's context_length_exceeded and the overflow recovery.
    ctx = RuntimeContext(session_id="growing")
    filler = " ".join(f"fact{n} is about harbour cranes and tides." for n in range(40))
    async with HarnessAgent(
        model=model, workspace=workspace, compaction=CompactionConfig(), memory=None
    ) as agent:
        for turn in range(8):
            reply = answer(await agent.call(f"Note {turn}: {filler} Reply with OK.", ctx=ctx))
            assert reply.role == "assistant"
            records = await agent.compactions.read("growing")
            if records:
                break
        saved = await agent.sessions.load(ctx)

    assert [record["forced"] for record in records] == [True], records
    assert saved[-1].role == "assistant"
    assert any(m.role == "user" and m.text.startswith(f"Note {turn}:") for m in saved)
    assert turn >= 1, "the first turn alone overflowed: the test no longer grows a session"
