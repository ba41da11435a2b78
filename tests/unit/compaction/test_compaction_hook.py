from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, ClassVar

import pytest

from _outcomes import answer
from harness.compaction import (
    CompactionConfig,
    CompactionResult,
    ConversationCompactor,
    TruncateArgsConfig,
)
from harness.context import RuntimeContext
from harness.errors import AgentInterrupted
from harness.hooks.compaction import CompactionHook, rebuild_request
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Event,
    Hook,
    Msg,
    PostCompact,
    PreCompact,
    ReActAgent,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from harness.memory.render import SUMMARY_NAME
from harness.models import ScriptedChatModel

CONFIG = CompactionConfig(
    trigger_messages=4, trigger_tokens=0, keep_messages=2, offload_before=False
)


class FunctionModel:
    model_name = "function"

    def __init__(self, answer: Callable[[str], Awaitable[str]]) -> None:
        self.answer = answer
        self.calls = 0

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.calls += 1
        text = await self.answer(messages[-1].text)
        yield ChatResponse(content=[TextBlock(text=text)])


async def summary_of(prompt: str) -> str:
    return "## SESSION INTENT\nthe goal\n\n## SUMMARY\nSUMMARIZED"


def history(n: int) -> list[Msg]:
    return [Msg(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(n)]


def agent_with(hook: CompactionHook) -> tuple[ReActAgent, ScriptedChatModel]:
    model = ScriptedChatModel([{"text": "reply", "repeat": True}])
    return ReActAgent(name="a", model=model, sys_prompt="SYS", hooks=[hook]), model


class CompactionEvents(Hook):
    """Another hook of the same agent: what the compaction hook emits reaches it."""

    events: ClassVar[tuple[type[Event], ...]] = (PreCompact, PostCompact)

    def __init__(self) -> None:
        self.seen: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.seen.append(event)


async def test_compaction_replaces_memory_and_the_request_and_emits_events() -> None:
    hook = CompactionHook(ConversationCompactor(FunctionModel(summary_of)), CONFIG)
    listener = CompactionEvents()
    model = ScriptedChatModel([{"text": "reply", "repeat": True}])
    agent = ReActAgent(name="a", model=model, sys_prompt="SYS", hooks=[hook, listener])
    events = listener.seen
    memory = history(5)
    reply = answer(await agent.call("new question", memory=memory))
    assert reply.text == "reply"
    sent = model.requests[0]
    assert [m.role for m in sent] == ["system", "user", "user", "user"]
    assert sent[1].name == SUMMARY_NAME
    assert "SUMMARIZED" in sent[1].text
    assert [m.text for m in sent[2:]] == ["m4", "new question"]
    assert memory[0].name == SUMMARY_NAME
    assert [m.text for m in memory[1:]] == ["m4", "new question", "reply"]
    assert [type(e) for e in events] == [PreCompact, PostCompact]
    pre, post = events
    assert isinstance(pre, PreCompact)
    assert isinstance(post, PostCompact)
    assert (pre.cut, post.removed) == (4, 4)
    assert post.summary is memory[0]
    assert post.details["summary_hash"] is not None


async def test_system_messages_in_memory_stay_and_step_extras_survive() -> None:
    system = Msg(role="system", content="pinned rule")
    old = [system, *history(5)]
    conversation = [Msg(role="user", content="summary"), old[-1]]
    hint = Msg(role="user", name="system_hint", content="answer now")
    step = [Msg(role="system", content="SYS"), *old, hint]
    rebuilt = rebuild_request(step, old, conversation)
    assert rebuilt == [step[0], system, *conversation, hint]


async def test_a_compaction_error_is_logged_and_the_step_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(ConversationCompactor):
        async def compact(self, *args: Any, **kwargs: Any) -> CompactionResult | None:
            raise RuntimeError("boom")

    agent, model = agent_with(CompactionHook(Broken(FunctionModel(summary_of)), CONFIG))
    memory = history(5)
    with caplog.at_level(logging.WARNING):
        answer(await agent.call("q", memory=memory))
    assert "continuing without compaction" in caplog.text
    assert len(model.requests) == 1
    assert len(model.requests[0]) == 7  # system + 5 + the question: uncompacted
    assert [m.text for m in memory[:5]] == [f"m{i}" for i in range(5)]


async def blocked_summarizer() -> tuple[FunctionModel, asyncio.Event]:
    started = asyncio.Event()

    async def block(prompt: str) -> str:
        started.set()
        await asyncio.sleep(3600)
        return "never"

    return FunctionModel(block), started


async def test_interrupting_during_summarizing_stops_the_call() -> None:
    summarizer, started = await blocked_summarizer()
    agent, model = agent_with(CompactionHook(ConversationCompactor(summarizer), CONFIG))
    memory = history(5)
    task = asyncio.create_task(agent.call("q", memory=memory))
    await asyncio.wait_for(started.wait(), 5)
    agent.interrupt()
    with pytest.raises(AgentInterrupted):
        await task
    assert model.requests == []  # no "compaction failed, continue" model call
    assert summarizer.calls == 1
    assert not any(m.name == SUMMARY_NAME for m in memory)


async def test_cancelling_during_summarizing_cancels_the_call() -> None:
    summarizer, started = await blocked_summarizer()
    agent, model = agent_with(CompactionHook(ConversationCompactor(summarizer), CONFIG))
    task = asyncio.create_task(agent.call("q", memory=history(5)))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.requests == []


async def test_a_wrapped_interruption_is_not_swallowed() -> None:
    async def wrapped(prompt: str) -> str:
        try:
            raise AgentInterrupted("stop")
        except AgentInterrupted as exc:
            raise RuntimeError("summarizer crashed") from exc

    agent, model = agent_with(CompactionHook(ConversationCompactor(FunctionModel(wrapped)), CONFIG))
    with pytest.raises(RuntimeError, match="summarizer crashed"):
        answer(await agent.call("q", memory=history(5)))
    assert model.requests == []


async def test_argument_truncation_applies_without_compaction() -> None:
    config = CompactionConfig(
        trigger_messages=0,
        trigger_tokens=0,
        offload_before=False,
        truncate_args=TruncateArgsConfig(trigger_messages=3, trigger_tokens=0, keep_messages=1),
    )
    summarizer = FunctionModel(summary_of)
    agent, model = agent_with(CompactionHook(ConversationCompactor(summarizer), config))
    call = Msg(
        role="assistant",
        content=[ToolUseBlock(id="c1", name="write_file", input={"content": "x" * 5_000})],
    )
    result = Msg.tool_result(ToolResultBlock(id="c1", name="write_file", output="ok"))
    memory = [Msg(role="user", content="write"), call, result]
    answer(await agent.call("next", memory=memory))
    assert memory[1].id == call.id
    assert memory[1].tool_uses[0].input["content"] == "x" * 20 + "...(argument truncated)"
    assert model.requests[0][2].tool_uses[0].input["content"].endswith("(argument truncated)")
    assert summarizer.calls == 0
    assert not any(m.name == SUMMARY_NAME for m in memory)


async def test_hook_ignores_other_events_and_has_priority_ten() -> None:
    hook = CompactionHook(ConversationCompactor(FunctionModel(summary_of)), CONFIG)
    assert hook.priority == 10
    await hook.on_event(
        PreCompact(ctx=RuntimeContext(), agent="a", memory=[], call_id="c1", cut=0, tokens_before=0)
    )
