"""Sizing an overflow's recovery from the provider's numbers (compaction/budget.py, issue 41).

The fake provider here counts like a real one: a token per four characters of every message,
plus the tool schemas unless it leaves them out (llama-cpp-python's server does), and states
both numbers when it refuses, as llama.cpp's server words it. The old recovery guessed (force a
compaction, then cut the summary to 1,200 characters, then give up), so a system prompt and
tools that take most of the window left it a few tokens over; sized, the first retry fits.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _outcomes import answer
from harness import ContextOverflowError, HarnessAgent, Msg, RuntimeContext
from harness.compaction import CompactionConfig, estimate_tokens
from harness.compaction.budget import (
    LOWEST_RATIO,
    MARGIN,
    RequestSize,
    answer_reserve,
    fit_conversation,
    recovery_budget,
)
from harness.errors import WindowTooSmall
from harness.kernel import ChatChunk, ChatResponse, TextBlock, ToolSchema
from harness.memory.render import SUMMARY_NAME
from harness.models._overflow import overflow_error

ANSWER = 32
"""The request's max_tokens, which the provider counts in and states."""

SUMMARY = "## SESSION INTENT\nplan a trip\n\n## SUMMARY\n" + "the user planned a trip. " * 120


class CountingWindow:
    """A provider with a ``window``-token context that counts four characters a token."""

    model_name = "counting-window"

    def __init__(self, window: int, *, counts_tools: bool = True) -> None:
        self.window = window
        self.counts_tools = counts_tools
        self.requests: list[int] = []  # the tokens of each request of the agent's steps
        self.summaries = 0  # the summarizer's requests

    def tokens(self, messages: Sequence[Msg], tools: Sequence[ToolSchema]) -> int:
        chars = sum(len(m.text) + sum(len(r.text) for r in m.tool_results) for m in messages)
        if self.counts_tools:
            chars += sum(len(json.dumps(t.parameters)) + len(t.description) for t in tools)
        return chars // 4 + 4 * len(messages)

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        if "<messages>" in messages[-1].text:  # the summarizer
            self.summaries += 1
            yield ChatResponse(content=[TextBlock(text=SUMMARY)])
            return
        prompt = self.tokens(messages, tools)
        self.requests.append(prompt)
        if prompt + ANSWER > self.window:
            msg = (
                f"This model's maximum context length is {self.window} tokens. However, you "
                f"requested {prompt + ANSWER} tokens ({prompt} in the messages, {ANSWER} in the "
                "completion)."
            )
            raise overflow_error(msg, msg)
        yield ChatResponse(content=[TextBlock(text="it fits now")])


def a_tool(n: int) -> Any:
    def tool(city: str, days: int = 1) -> str:
        return city * days

    tool.__name__ = f"tool_{n}"
    tool.__doc__ = f"Tool {n}: " + "describes what it does at some length. " * 8
    return tool


SYSTEM = "You are a careful travel planner. " * 30  # with the harness's own: ~740 tokens
TOOLS = [a_tool(n) for n in range(6)]
QUESTION = "and now? " + "one more long question. " * 50


def agent_for(model: CountingWindow, workspace: Path, **compaction: Any) -> HarnessAgent:
    return HarnessAgent(
        model=model,
        workspace=workspace,
        sys_prompt=SYSTEM,
        tools=TOOLS,
        allowed_tools=[t.__name__ for t in TOOLS],
        memory=None,
        workspace_context=None,
        filesystem_tools=False,
        tool_result_eviction=None,
        compaction=CompactionConfig(**compaction),
    )


def long_turns(n: int) -> list[Msg]:
    first = "My first request: plan a long trip through the mountains. " * 30
    turns = [Msg(role="user", content=first)]
    for i in range(n):
        turns.append(Msg(role="assistant", content=f"noted {i} " + "ok " * 40))
        turns.append(Msg(role="user", content=f"note {i}: " + "harbour cranes and tides. " * 20))
    return turns


@pytest.mark.parametrize("counts_tools", [True, False])
async def test_the_first_recovery_fits_where_the_guess_ran_out(
    workspace: Path, counts_tools: bool
) -> None:
    """One overflow, one sized compaction, and the retry fits (the old recovery failed here).

    Also when the provider leaves the tool schemas out of its count: the ratio is then measured
    without them, or the conversation would be cut to nothing.
    """
    model = CountingWindow(2_048, counts_tools=counts_tools)
    agent = agent_for(model, workspace)
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, long_turns(6))

    reply = answer(await agent.call(QUESTION, ctx=ctx))

    assert reply.text == "it fits now"
    assert len(model.requests) == 2  # refused once, then fitted the first time
    assert model.requests[-1] <= 2_048 - ANSWER
    saved = await agent.sessions.load(ctx)
    assert saved[0].name == SUMMARY_NAME
    assert "cut to fit the window" in saved[0].text
    assert saved[0].metadata["compaction"]["first_request"].startswith("My first request")
    if not counts_tools:  # the room the tools do not take is the summary's
        assert model.requests[-1] > 2_048 // 2
    await agent.aclose()
    trace = workspace / "agents" / "harness" / "traces" / "s.jsonl"
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    overflow = next(r for r in records if r["event"] == "ContextOverflow")
    assert (overflow["requested_tokens"], overflow["limit_tokens"]) == (
        model.requests[0] + 32,
        2_048,
    )


async def test_no_summary_is_asked_for_when_the_last_turn_leaves_no_room_for_one(
    workspace: Path,
) -> None:
    model = CountingWindow(2_048)
    agent = agent_for(model, workspace)
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, long_turns(6))

    reply = answer(await agent.call("and now? " + "one more long question. " * 60, ctx=ctx))

    assert reply.text == "it fits now"
    assert len(model.requests) == 2
    assert model.summaries == 0  # whatever it wrote would have been cut away
    saved = await agent.sessions.load(ctx)
    assert saved[0].name == SUMMARY_NAME
    assert saved[0].text.startswith("(An earlier conversation, saved in ")
    assert saved[0].metadata["compaction"]["first_request"].startswith("My first request")
    [record] = await agent.compactions.read("s")
    assert record["summarizer_error"] == "the context window leaves no room for a summary"


@pytest.mark.parametrize(("window", "asked"), [(900, 1), (1_200, 2)])
async def test_a_fixed_part_that_leaves_no_room_is_one_clear_error_at_an_overflow(
    workspace: Path, window: int, asked: int
) -> None:
    """The window was not known ahead (the fixed part takes ~1,400 tokens): far too small, the
    first overflow's numbers say it and nothing is compacted; a little too small, the second
    (after one compaction) does, instead of a ContextOverflowError after guesses."""
    model = CountingWindow(window)
    agent = agent_for(model, workspace)
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, long_turns(2))

    with pytest.raises(WindowTooSmall) as raised:
        await agent.call("hello", ctx=ctx)

    message = str(raised.value)
    assert "\n" not in message
    assert f"{window:,} tokens" in message
    assert "6 tool schemas" in message
    assert "fewer tools" in message
    assert len(model.requests) == asked
    assert len(await agent.compactions.read("s")) == asked - 1


async def test_a_known_window_refuses_a_system_prompt_that_cannot_fit_before_any_model_call(
    workspace: Path,
) -> None:
    model = CountingWindow(512)
    agent = agent_for(model, workspace, context_window=512)

    with pytest.raises(WindowTooSmall) as raised:
        await agent.call("hello", ctx=RuntimeContext(session_id="s"))

    message = str(raised.value)
    assert "\n" not in message
    assert "512 tokens" in message
    assert "--context-window" in message
    assert "fewer tools" in message
    assert model.requests == []


async def test_a_known_window_that_fits_is_not_refused_on_a_guess(workspace: Path) -> None:
    """The check counts the system prompt at the fewest tokens a tokenizer gives: a prompt
    that fits, even by the provider's count with the tools, goes to the model."""
    model = CountingWindow(2_048)
    agent = agent_for(model, workspace, context_window=2_048)
    reply = answer(await agent.call("hello", ctx=RuntimeContext(session_id="s")))
    assert reply.text == "it fits now"


async def test_without_sizes_the_recovery_is_as_before(workspace: Path) -> None:
    """A provider that states no numbers: forced compaction, then the tight summary."""

    class Unsized(CountingWindow):
        async def stream(
            self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
        ) -> AsyncIterator[ChatChunk | ChatResponse]:
            try:
                async for item in super().stream(messages, tools, **options):
                    yield item
            except ContextOverflowError as error:
                raise ContextOverflowError("context_length_exceeded") from error

    model = Unsized(2_048)
    agent = agent_for(model, workspace)
    ctx = RuntimeContext(session_id="s")
    await agent.sessions.save(ctx, long_turns(6))
    with pytest.raises(ContextOverflowError):
        await agent.call(QUESTION, ctx=ctx)
    assert len(model.requests) == 3  # refused, compacted, refused, tightened, refused


# -- the arithmetic -------------------------------------------------------------------------


def overflow(prompt: int, window: int, answer: int | None = None) -> ContextOverflowError:
    requested = prompt + (answer or 0)
    return ContextOverflowError(
        "refused", requested_tokens=requested, limit_tokens=window, answer_tokens=answer
    )


@given(
    system=st.integers(min_value=0, max_value=20_000),
    tools=st.integers(min_value=0, max_value=20_000),
    conversation=st.integers(min_value=1, max_value=50_000),
    ratio=st.floats(min_value=LOWEST_RATIO, max_value=3.0),
    window=st.integers(min_value=256, max_value=200_000),
    answer=st.none() | st.integers(min_value=0, max_value=4_096),
)
def test_a_conversation_at_the_target_fits_beside_the_fixed_part(
    system: int,
    tools: int,
    conversation: int,
    ratio: float,
    window: int,
    answer: int | None,
) -> None:
    """Where the whole request tokenizes alike, a conversation at the target fits; a refusal
    only where even the fewest tokens the fixed part can take leave no room."""
    size = RequestSize(system, tools, 3, conversation)
    prompt = round((system + tools + conversation) * ratio)
    if prompt < window or (answer is not None and answer >= window):
        return
    budget = recovery_budget(size, overflow(prompt, window, answer))
    assert budget is not None
    reserve = answer if answer is not None else answer_reserve(window)
    assert budget.reserve == reserve
    fixed_room = (system + tools) * ratio < (window - reserve) * MARGIN - ratio
    if fixed_room:  # a conversation can fit beside the fixed part: the target is one that does
        assert budget.target > 0
        assert (system + tools + budget.target) * ratio <= window - reserve
    if not budget.fixed_fits:
        assert (system + tools) * LOWEST_RATIO + reserve >= window - 1


def test_no_sizes_no_budget() -> None:
    size = RequestSize(100, 100, 1, 100)
    assert recovery_budget(size, ContextOverflowError("too long")) is None
    assert recovery_budget(size, ValueError("too long")) is None


def test_tools_the_provider_did_not_count_are_left_out_of_the_ratio() -> None:
    size = RequestSize(system=1_800, tools=3_000, tool_count=19, conversation=2_100)
    budget = recovery_budget(size, overflow(2_471, 2_048, 32))  # llama-cpp-python's numbers
    assert budget is not None
    assert not budget.tools_counted
    assert budget.fixed == 1_800
    assert 0.6 < budget.ratio < 0.7
    assert budget.target > 900  # with the tools counted it would be about 250


def test_fit_cuts_the_summary_to_what_the_rest_leaves_and_never_the_users_words() -> None:
    summary = Msg(
        role="user",
        name=SUMMARY_NAME,
        content=f"A condensed summary follows:\n\n<summary>\n{SUMMARY}\n</summary>",
    )
    question = Msg(role="user", content="my question " * 100)
    fit = fit_conversation([summary, question], estimate_tokens([question]) + 60)
    assert fit is not None
    assert fit[1] == question
    assert "cut to fit the window" in fit[0].text
    assert estimate_tokens(fit) <= estimate_tokens([question]) + 60
    assert fit_conversation(fit, 10**6) is None
