"""Properties of compaction over random conversations with parallel, interleaved tool calls."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.compaction import CompactionConfig, ConversationCompactor
from harness.context import RuntimeContext
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from harness.memory.render import is_summary

CTX = RuntimeContext(session_id="p")
_INTENT = re.compile(r"## SESSION INTENT\n(.*?)\n\n##", re.DOTALL)
_FIRST_HUMAN = re.compile(r"^Human: (.*)$", re.MULTILINE)


class CopyingSummarizer:
    """Copies its input's SESSION INTENT (or, without one, its first Human line)."""

    model_name = "copying"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.calls += 1
        prompt = messages[-1].text
        body = prompt.split("<messages>", 1)[-1]
        found = _INTENT.search(body)
        if found is not None:
            intent = found.group(1)
        else:
            human = _FIRST_HUMAN.search(body)
            intent = human.group(1) if human else "None"
        text = (
            f"## SESSION INTENT\n{intent}\n\n## SUMMARY\nround {self.calls}\n\n"
            "## ARTIFACTS\nNone\n\n## NEXT STEPS\nNone"
        )
        yield ChatResponse(content=[TextBlock(text=text)])


Turn = list[tuple[int, list[int]]]  # tool rounds: (number of parallel calls, result order)


@st.composite
def turns(draw: st.DrawFn) -> list[Turn]:
    count = draw(st.integers(min_value=1, max_value=6))
    result: list[Turn] = []
    for _ in range(count):
        rounds: Turn = []
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            width = draw(st.integers(min_value=1, max_value=4))
            rounds.append((width, draw(st.permutations(list(range(width))))))
        result.append(rounds)
    return result


def build(shape: list[Turn], ids: Callable[[], str], label: str = "") -> list[Msg]:
    """A conversation: per turn a user request, tool rounds with shuffled results, an answer."""
    messages: list[Msg] = []
    for number, rounds in enumerate(shape):
        messages.append(Msg(role="user", content=f"request {label}{number}"))
        for width, order in rounds:
            call_ids = [ids() for _ in range(width)]
            messages.append(
                Msg(
                    role="assistant",
                    content=[ToolUseBlock(id=i, name="t", input={"i": i}) for i in call_ids],
                )
            )
            messages.extend(
                Msg.tool_result(ToolResultBlock(id=call_ids[k], name="t", output="r" * 50))
                for k in order
            )
        messages.append(Msg(role="assistant", content=f"answer {label}{number}"))
    return messages


def assert_tool_pairs_intact(messages: Sequence[Msg], source: Sequence[Msg]) -> None:
    expected: dict[str, int] = {}
    for message in source:
        for block in message.tool_results:
            expected[block.id] = expected.get(block.id, 0) + 1
    seen_calls: set[str] = set()
    results: dict[str, int] = {}
    for message in messages:
        for call in message.tool_uses:
            seen_calls.add(call.id)
        for block in message.tool_results:
            assert block.id in seen_calls, f"tool result {block.id} has no call before it"
            results[block.id] = results.get(block.id, 0) + 1
    for call_id in seen_calls:
        assert results.get(call_id, 0) == expected[call_id], f"call {call_id} lost its results"


def counter() -> Callable[[], str]:
    numbers = itertools.count()
    return lambda: f"call_{next(numbers)}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=turns(),
    keep_messages=st.integers(min_value=0, max_value=12),
    keep_tokens=st.sampled_from([0, 0, 30, 80, 200]),
    force=st.booleans(),
)
def test_no_tool_call_is_separated_from_its_results(
    shape: list[Turn], keep_messages: int, keep_tokens: int, force: bool
) -> None:
    messages = build(shape, counter())
    config = CompactionConfig(
        trigger_messages=1,
        trigger_tokens=0,
        keep_messages=keep_messages,
        keep_tokens=keep_tokens,
        offload_before=False,
    )
    compactor = ConversationCompactor(CopyingSummarizer())
    result = asyncio.run(compactor.compact(CTX, messages, config, force=force))
    if result is None:
        return
    assert_tool_pairs_intact(result.messages, messages)
    tail = result.messages[1:] if result.summary is not None else result.messages
    assert [m.id for m in tail] == [m.id for m in messages[result.removed :]]
    assert sum(is_summary(m) for m in result.messages) == (result.summary is not None)
    if result.summary is not None:
        assert "request 0" in result.summary.text


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(turns(), min_size=5, max_size=5))
def test_the_first_request_survives_five_compactions(chunks: list[list[Turn]]) -> None:
    ids = counter()
    config = CompactionConfig(
        trigger_messages=1, trigger_tokens=0, keep_messages=3, offload_before=False
    )
    summarizer = CopyingSummarizer()
    compactor = ConversationCompactor(summarizer)
    conversation = [Msg(role="user", content="ORIGINAL: build a compiler for Lox")]
    compactions = 0
    for number, shape in enumerate(chunks):
        conversation += [
            Msg(role="user", content=f"filler {number}"),
            Msg(role="assistant", content="ok"),
            *build(shape, ids, label=f"c{number}-"),
        ]
        result = asyncio.run(compactor.compact(CTX, conversation, config))
        assert result is not None
        compactions += 1
        conversation = result.messages
        summary = conversation[0]
        # the summarizer's own text (between the tags) carries the intent forward
        body = summary.text.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0]
        assert "## SESSION INTENT\nORIGINAL: build a compiler for Lox" in body
    assert compactions == 5
    assert summarizer.calls == 5
