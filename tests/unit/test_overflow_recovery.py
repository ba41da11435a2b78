"""A turn recovers from a context overflow by compacting by force and trying the step once more.

The same through ``call`` and ``stream``: one turn engine (issue 28).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import ContextOverflowError, HarnessAgent, Msg, RuntimeContext
from harness.compaction import CompactionConfig
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Event,
    Failed,
    Finished,
    Hook,
    Progress,
    StreamItem,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from harness.kernel.streaming import STREAM
from harness.memory.render import SUMMARY_NAME

LIMIT = 3_000


class SmallWindow:
    """Raises ContextOverflowError while the request's text is over LIMIT characters."""

    model_name = "small-window"

    def __init__(self) -> None:
        self.requests: list[list[Msg]] = []

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.requests.append(list(messages))
        size = sum(len(m.text) + sum(len(r.text) for r in m.tool_results) for m in messages)
        if messages[-1].text.startswith("Summarize") or "<messages>" in messages[-1].text:
            yield ChatResponse(content=[TextBlock(text="## SESSION INTENT\nplan a trip\n")])
            return
        if size > LIMIT:
            raise ContextOverflowError(f"context_length_exceeded: {size} characters")
        yield ChatResponse(content=[TextBlock(text="it fits now")])


def history(n: int) -> list[Msg]:
    return [
        Msg(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "x" * 200)
        for i in range(n)
    ]


async def test_without_compaction_the_error_says_what_to_do(workspace: Path) -> None:
    agent = HarnessAgent(
        model=SmallWindow(), workspace=workspace, memory=None, workspace_context=None
    )
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, history(30))
    with pytest.raises(ContextOverflowError, match="pass compaction=CompactionConfig"):
        answer(await agent.call("and now?", ctx=ctx))


async def test_overflow_is_compacted_and_retried_once_with_the_turn_kept_once(
    workspace: Path,
) -> None:
    model = SmallWindow()
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        workspace_context=None,
        compaction=CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=4),
    )
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, history(30))
    reply = answer(await agent.call("and now?", ctx=ctx))
    assert reply.text == "it fits now"
    saved = await agent.sessions.load(ctx)
    assert saved[0].name == SUMMARY_NAME
    assert [m.text for m in saved].count("and now?") == 1
    assert saved[-1].text == "it fits now"
    records = await agent.compactions.read("s")
    assert len(records) == 1
    assert records[0]["forced"] is True


async def test_a_huge_single_tool_result_is_shrunk_when_there_is_nothing_to_summarize(
    workspace: Path,
) -> None:
    model = SmallWindow()
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        workspace_context=None,
        compaction=CompactionConfig(),  # keep 20: fewer messages than that
    )
    ctx = RuntimeContext(session_id="s")
    huge = [
        Msg(role="user", content="fetch it"),
        Msg(role="assistant", content=[ToolUseBlock(id="c1", name="fetch", input={})]),
        Msg.tool_result(ToolResultBlock(id="c1", name="fetch", output="D" * 20_000)),
    ]
    await agent.sessions.save(ctx, huge)
    reply = answer(await agent.call("what did it say?", ctx=ctx))
    assert reply.text == "it fits now"
    saved = await agent.sessions.load(ctx)
    results = [r for m in saved for r in m.tool_results]
    assert all(len(r.text) < 5_000 for r in results)


async def test_a_recovery_reports_nothing_to_a_stream_the_call_is_not_part_of(
    workspace: Path,
) -> None:
    """A subagent's call runs in its streamed parent's tool: its recovery is not the parent's."""
    agent = HarnessAgent(
        model=SmallWindow(),
        workspace=workspace,
        memory=None,
        workspace_context=None,
        compaction=CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=4),
    )
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, history(30))
    parents_stream: list[StreamItem] = []
    token = STREAM.set(parents_stream.append)
    try:
        reply = answer(await agent.call("and now?", ctx=ctx))
    finally:
        STREAM.reset(token)
    assert reply.text == "it fits now"
    assert parents_stream == []


class Events(Hook):
    """Records the type and call id of every event."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def on_event(self, event: Event) -> None:
        self.seen.append((type(event).__name__, event.call_id))


async def test_a_streamed_turn_recovers_as_a_called_one_does(workspace: Path) -> None:
    """`harness chat` and `harness serve` stream: the overflow recovery is theirs too."""
    events = Events()
    agent = HarnessAgent(
        model=SmallWindow(),
        workspace=workspace,
        memory=None,
        workspace_context=None,
        hooks=[events],
        compaction=CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=4),
    )
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, history(30))
    items = [item async for item in agent.stream("and now?", ctx=ctx)]

    reply = items[-1]
    assert isinstance(reply, Finished)
    assert reply.reply.text == "it fits now"
    assert any(isinstance(i, Progress) and i.kind == "compaction" for i in items)
    saved = await agent.sessions.load(ctx)
    assert saved[0].name == SUMMARY_NAME
    assert [m.text for m in saved].count("and now?") == 1
    # One call: the step is tried again inside it, never a second call with its own PreCall.
    # (The compaction hook, at 10, announces its forced compaction before this hook, at 100,
    # sees the overflow it answers.)
    assert [name for name, _ in events.seen] == [
        "PreCall",
        "PreReasoning",
        "PreCompact",
        "PostCompact",
        "ContextOverflow",
        "PreReasoning",
        "PostReasoning",
        "PostCall",
    ]
    assert len({call_id for _, call_id in events.seen}) == 1


async def test_without_compaction_a_stream_says_what_to_do(workspace: Path) -> None:
    agent = HarnessAgent(
        model=SmallWindow(), workspace=workspace, memory=None, workspace_context=None
    )
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, history(30))
    items = [item async for item in agent.stream("and now?", ctx=ctx)]
    failed = items[-1]
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, ContextOverflowError)
    assert "pass compaction=CompactionConfig" in str(failed.error)
    saved = await agent.sessions.load(ctx)
    assert saved[-1].text == "and now?"  # the input was accepted and kept


async def test_an_overflow_compaction_cannot_shrink_is_raised_once_with_a_note(
    workspace: Path,
) -> None:
    model = SmallWindow()
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        workspace_context=None,
        compaction=CompactionConfig(),
    )
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(ContextOverflowError) as raised:
        answer(await agent.call("x" * (LIMIT + 10), ctx=ctx))  # one message: nothing to summarize
    assert any("compaction could not shrink" in note for note in raised.value.__notes__)
    assert len(model.requests) == 1  # not retried: compaction changed nothing


class TinyWindow(SmallWindow):
    """Refuses anything over TIGHT characters: a forced compaction's summary alone is too long."""

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.requests.append(list(messages))
        size = sum(len(m.text) for m in messages)
        if messages[-1].text.startswith("Summarize") or "<messages>" in messages[-1].text:
            yield ChatResponse(content=[TextBlock(text="## SESSION INTENT\n" + "plan " * 600)])
            return
        if size > TIGHT:
            raise ContextOverflowError(f"context_length_exceeded: {size} characters")
        yield ChatResponse(content=[TextBlock(text="it fits now")])


TIGHT = 3_600


async def test_when_the_forced_summary_does_not_fit_it_is_made_tight(workspace: Path) -> None:
    model = TinyWindow()
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        workspace_context=None,
        compaction=CompactionConfig(),
    )
    ctx = RuntimeContext(session_id="s")
    first = "My first request: " + "plan a long trip " * 60
    await agent.sessions.save(ctx, [Msg(role="user", content=first), *history(8)])
    reply = answer(await agent.call("and now?", ctx=ctx))

    assert reply.text == "it fits now"
    saved = await agent.sessions.load(ctx)
    summary = saved[0]
    assert summary.name == SUMMARY_NAME
    assert "<first_request>" not in summary.text  # dropped from the prompt...
    assert "characters cut to fit the window" in summary.text
    meta = summary.metadata["compaction"]
    assert meta["first_request"].startswith("My first request")  # ...kept in the record
    assert [m.text for m in saved].count("and now?") == 1
