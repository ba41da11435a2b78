from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.compaction import (
    DEFAULT_SUMMARY_PROMPT,
    SUMMARY_METADATA_KEY,
    CompactionConfig,
    CompactionResult,
    ConversationCompactor,
    estimate_text,
    safe_cut,
)
from harness.context import RuntimeContext
from harness.errors import AgentInterrupted, ModelError
from harness.kernel import ChatChunk, ChatResponse, Msg, TextBlock, ToolResultBlock, ToolSchema
from harness.kernel import ToolUseBlock as Use
from harness.memory.flush import FlushResult, MemoryFlushManager
from harness.memory.provenance import TRUST_KEY, Trust, message_trust
from harness.memory.render import SUMMARY_NAME
from harness.memory.transcript import TranscriptWriter
from harness.workspace import WorkspaceManager

CTX = RuntimeContext(session_id="s1")


class FunctionModel:
    """Answers each request with ``answer(prompt)``; records the prompts."""

    model_name = "function"

    def __init__(self, answer: Callable[[str], str | Awaitable[str]]) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        prompt = messages[-1].text
        self.prompts.append(prompt)
        text = self.answer(prompt)
        if not isinstance(text, str):
            text = await text
        yield ChatResponse(content=[TextBlock(text=text)] if text else [])


class RecordingFlush(MemoryFlushManager):
    def __init__(self, error: BaseException | None = None) -> None:
        self.inputs: list[list[Msg]] = []
        self.error = error

    async def flush(
        self, ctx: RuntimeContext, messages: Sequence[Msg], *, shown: Trust = Trust.USER
    ) -> FlushResult:
        self.inputs.append(list(messages))
        if self.error is not None:
            raise self.error
        return FlushResult(None, "", len(messages))


def rounds() -> Callable[[str], str]:
    count = 0

    def answer(prompt: str) -> str:
        nonlocal count
        count += 1
        return f"## SESSION INTENT\nround\n\n## SUMMARY\nROUND_{count}"

    return answer


def user(text: str) -> Msg:
    return Msg(role="user", content=text)


def ai(text: str) -> Msg:
    return Msg(role="assistant", content=text)


def calls(*ids: str) -> Msg:
    return Msg(role="assistant", content=[Use(id=i, name="tool_" + i, input={}) for i in ids])


def res(call_id: str, output: str = "ok") -> Msg:
    return Msg.tool_result(ToolResultBlock(id=call_id, name="tool_" + call_id, output=output))


def old_summary(text: str) -> Msg:
    return Msg(role="user", name=SUMMARY_NAME, content=text)


SMALL = CompactionConfig(
    trigger_messages=3, trigger_tokens=0, keep_messages=2, flush_before=True, offload_before=False
)


async def compact(
    compactor: ConversationCompactor,
    messages: Sequence[Msg],
    config: CompactionConfig = SMALL,
    *,
    force: bool = False,
) -> CompactionResult:
    result = await compactor.compact(CTX, messages, config, force=force)
    assert result is not None
    return result


# --- config -------------------------------------------------------------------------------


def test_defaults_are_the_originals() -> None:
    config = CompactionConfig()
    assert (config.trigger_messages, config.trigger_tokens) == (50, 80_000)
    assert (config.keep_messages, config.keep_tokens) == (20, 0)
    assert config.flush_before
    assert config.offload_before
    assert config.summary_prompt == DEFAULT_SUMMARY_PROMPT
    assert config.max_summary_input_tokens == 60_000
    assert config.truncate_args is None
    assert (config.trigger_fraction, config.keep_fraction, config.context_window) == (None,) * 3
    for section in ("## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS"):
        assert section in DEFAULT_SUMMARY_PROMPT


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"trigger_messages": -1}, "trigger_messages"),
        ({"trigger_tokens": -1}, "trigger_tokens"),
        ({"keep_messages": -2}, "keep_messages"),
        ({"keep_tokens": -2}, "keep_tokens"),
        ({"summary_prompt": "Summarize this."}, "summary_prompt"),
        ({"max_summary_input_tokens": 0}, "max_summary_input_tokens"),
        ({"context_window": 0}, "context_window"),
        ({"trigger_fraction": 0.5}, "trigger_fraction"),  # no context_window
        ({"trigger_fraction": 1.5, "context_window": 1000}, "trigger_fraction"),
        ({"keep_fraction": 1.0, "context_window": 1000}, "keep_fraction"),
        ({"keep_tokens": 90_000}, "keep_tokens"),  # not below the 80,000 trigger
        ({"trigger_fraction": 0.5, "keep_fraction": 0.6, "context_window": 1000}, "keep_fraction"),
    ],
)
def test_invalid_config_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"CompactionConfig.{field}"):
        CompactionConfig(**kwargs)


def test_window_relative_budgets() -> None:
    config = CompactionConfig(trigger_fraction=0.75, keep_fraction=0.25, context_window=200_000)
    assert config.effective_trigger_tokens == 150_000
    assert config.effective_keep_tokens == 50_000
    fixed = CompactionConfig(trigger_tokens=1234, keep_tokens=100)
    assert (fixed.effective_trigger_tokens, fixed.effective_keep_tokens) == (1234, 100)


async def test_window_relative_trigger_fires_and_keeps_the_budget() -> None:
    config = CompactionConfig(
        trigger_messages=0,
        trigger_fraction=0.5,
        keep_fraction=0.2,
        context_window=1_000,
        flush_before=False,
        offload_before=False,
    )
    messages = [user("x" * 100) for _ in range(9)]  # 47 tokens each: 423 < 500
    compactor = ConversationCompactor(FunctionModel(rounds()))
    assert await compactor.compact(CTX, messages, config) is None
    messages.append(user("y" * 200))  # 87 more: 510
    result = await compact(compactor, messages, config)
    assert result.tokens_before == 510
    # the tail fits 200 tokens: the 87-token message and two 47-token ones
    assert result.messages[1:] == messages[-3:]


async def test_disabled_triggers_never_compact() -> None:
    config = CompactionConfig(trigger_messages=0, trigger_tokens=0, offload_before=False)
    compactor = ConversationCompactor(FunctionModel(rounds()))
    assert await compactor.compact(CTX, [user("x" * 10_000)] * 200, config) is None


# --- chaining (the original's ConversationCompactorTest) ------------------------------------


async def test_an_earlier_summary_is_summarized_again_but_not_flushed() -> None:
    flush = RecordingFlush()
    model = FunctionModel(rounds())
    compactor = ConversationCompactor(model, flush=flush)
    s1, m2, t1, t2 = old_summary("S1"), user("M2"), user("TAIL_1"), user("TAIL_2")
    result = await compact(compactor, [s1, m2, t1, t2])
    assert "S1" in model.prompts[0]
    assert "M2" in model.prompts[0]
    assert flush.inputs == [[m2]]
    assert len(result.messages) == 3
    summary = result.messages[0]
    assert summary.name == SUMMARY_NAME
    assert summary.role == "user"
    assert summary.id.startswith(SUMMARY_NAME + ":")
    assert summary.id not in {s1.id, m2.id}
    assert result.messages[1:] == [t1, t2]
    assert "ROUND_1" in summary.text
    assert result.removed == 2
    assert result.first_kept_id == t1.id


async def test_several_earlier_summaries_become_exactly_one() -> None:
    flush = RecordingFlush()
    model = FunctionModel(rounds())
    compactor = ConversationCompactor(model, flush=flush)
    s0, m1, s1, m2 = old_summary("S0"), user("M1"), old_summary("S1"), user("M2")
    result = await compact(compactor, [s0, m1, s1, m2, user("TAIL_1"), user("TAIL_2")])
    assert "S0" in model.prompts[0]
    assert "S1" in model.prompts[0]
    assert flush.inputs == [[m1, m2]]
    assert sum(m.name == SUMMARY_NAME for m in result.messages) == 1


async def test_second_compaction_summarizes_the_first_summary() -> None:
    flush = RecordingFlush()
    model = FunctionModel(rounds())
    compactor = ConversationCompactor(model, flush=flush)
    t1, t2 = user("TAIL_1"), user("TAIL_2")
    first = await compact(compactor, [old_summary("S1"), user("M2"), t1, t2])
    m3 = user("M3")
    second = await compact(compactor, [*first.messages, m3, user("TAIL_3"), user("TAIL_4")])
    assert "ROUND_1" in model.prompts[1]
    assert "M3" in model.prompts[1]
    assert "ROUND_2" in second.messages[0].text
    assert "ROUND_1" not in second.messages[0].text.split("<summary>")[1]
    assert flush.inputs[1] == [t1, t2, m3]


async def test_flush_off_still_summarizes_everything() -> None:
    flush = RecordingFlush()
    model = FunctionModel(rounds())
    compactor = ConversationCompactor(model, flush=flush)
    config = CompactionConfig(
        trigger_messages=3, trigger_tokens=0, keep_messages=2, flush_before=False
    )
    await compact(compactor, [old_summary("S1"), user("M2"), user("T1"), user("T2")], config)
    assert "S1" in model.prompts[0]
    assert "M2" in model.prompts[0]
    assert flush.inputs == []


# --- the cut ------------------------------------------------------------------------------


def test_cut_moves_before_the_assistant_that_issued_parallel_calls() -> None:
    messages = [user("go"), calls("x", "y"), res("y"), res("x"), user("next"), ai("done")]
    assert safe_cut(messages, 3) == 1
    assert safe_cut(messages, 2) == 1
    assert safe_cut(messages, 4) == 4
    assert safe_cut(messages, 3, forward=True) == 4


async def test_cut_moves_forward_past_the_tool_run_when_nothing_would_be_left() -> None:
    messages = [calls("x", "y"), res("x"), res("y"), user("next"), ai("done")]
    result = await compact(ConversationCompactor(FunctionModel(rounds())), messages)
    assert result.removed == 3
    assert result.messages[1:] == messages[3:]


async def test_a_reused_call_id_does_not_join_two_turns() -> None:
    messages = [user("a"), calls("c"), res("c"), user("b"), calls("c"), res("c"), ai("ok")]
    assert safe_cut(messages, 3) == 3
    assert safe_cut(messages, 5) == 4


# --- saving first -------------------------------------------------------------------------


async def test_offload_and_flush_happen_first_and_the_summary_points_to_the_transcript(
    tmp_path: Path,
) -> None:
    workspace = WorkspaceManager(tmp_path)
    transcript = TranscriptWriter(workspace, "agent")
    flush = RecordingFlush()
    compactor = ConversationCompactor(FunctionModel(rounds()), flush=flush, transcript=transcript)
    config = CompactionConfig(trigger_messages=3, trigger_tokens=0, keep_messages=2)
    messages = [user("first request"), ai("a1"), user("u2"), ai("a2")]
    result = await compact(compactor, messages, config)
    path = transcript.transcript_path(CTX)
    lines = (tmp_path / path).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == [m.id for m in messages]
    assert result.offload.status == "ok"
    assert result.flush.status == "ok"
    assert result.transcript_path == path
    assert f"saved to {path}" in result.messages[0].text
    meta = result.messages[0].metadata[SUMMARY_METADATA_KEY]
    assert meta["transcript"] == path
    assert meta["covered_through"] == messages[1].id
    assert meta["last_id"] == messages[-1].id
    record = result.record()
    assert record["summary_hash"] == result.summary_hash
    assert record["first_kept_id"] == messages[2].id
    assert record["messages_before"] == 4
    assert record["messages_after"] == 3


class BrokenTranscript(TranscriptWriter):
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def transcript_path(self, ctx: RuntimeContext) -> str:
        return "never.jsonl"

    async def offload(self, ctx: RuntimeContext, messages: Sequence[Msg]) -> int:
        raise self.error


async def test_flush_and_offload_failures_are_recorded_not_raised() -> None:
    compactor = ConversationCompactor(
        FunctionModel(rounds()),
        flush=RecordingFlush(OSError("disk full")),
        transcript=BrokenTranscript(RuntimeError("store down")),
    )
    config = CompactionConfig(trigger_messages=3, trigger_tokens=0, keep_messages=2)
    result = await compact(compactor, [user("a"), user("b"), user("c")], config)
    assert result.flush.status == "failed"
    assert "disk full" in result.flush.detail
    assert result.offload.status == "failed"
    assert "store down" in result.offload.detail
    assert result.transcript_path is None
    assert "never.jsonl" not in result.messages[0].text


@pytest.mark.parametrize(
    "error",
    [
        AgentInterrupted("stop"),
        asyncio.CancelledError(),
        RuntimeError("wrapped"),  # its cause is set below
    ],
)
async def test_an_interrupted_flush_or_offload_propagates(error: BaseException) -> None:
    if isinstance(error, RuntimeError):
        error.__cause__ = AgentInterrupted("stop")
    model = FunctionModel(rounds())
    messages = [user("a"), user("b"), user("c")]
    config = CompactionConfig(trigger_messages=3, trigger_tokens=0, keep_messages=2)
    for compactor in (
        ConversationCompactor(model, flush=RecordingFlush(error)),
        ConversationCompactor(model, transcript=BrokenTranscript(error)),
    ):
        with pytest.raises(type(error)):
            await compactor.compact(CTX, messages, config)
    assert model.prompts == []


# --- the summarizer -----------------------------------------------------------------------


async def test_summarizer_failure_falls_back_to_an_extractive_summary() -> None:
    def fail(prompt: str) -> str:
        raise ModelError("provider down")

    messages = [
        user("Please port the billing module to Rust."),
        calls("r"),
        Msg.tool_result(ToolResultBlock(id="r", name="tool_r", output="fn main() {}")),
        Msg(
            role="assistant",
            content=[Use(id="w", name="write_file", input={"path": "src/billing.rs"})],
        ),
        res("w"),
        user("Also keep the old API."),
        ai("ok"),
        user("latest"),
        ai("sure"),
    ]
    result = await compact(ConversationCompactor(FunctionModel(fail)), messages)
    assert result.extractive
    assert result.summarizer_error is not None
    assert "provider down" in result.summarizer_error
    text = result.messages[0].text
    assert "Unavailable" not in text
    assert "unavailable" not in text
    for section in ("## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS"):
        assert section in text
    assert "## SESSION INTENT\nPlease port the billing module to Rust." in text
    assert "Also keep the old API." in text
    assert "src/billing.rs (write_file)" in text
    assert "tool_r (1x)" in text
    assert result.messages[0].metadata[SUMMARY_METADATA_KEY]["extractive"] is True
    assert result.messages[1:] == messages[-2:]


async def test_a_blank_answer_is_a_failure_too() -> None:
    result = await compact(
        ConversationCompactor(FunctionModel(lambda prompt: "   ")),
        [user("build me a parser"), ai("a"), user("b"), ai("c")],
    )
    assert result.extractive
    assert "build me a parser" in result.messages[0].text


async def test_a_hanging_summarizer_times_out_into_the_fallback() -> None:
    async def hang(prompt: str) -> str:
        await asyncio.sleep(60)
        return "never"

    compactor = ConversationCompactor(FunctionModel(hang), summary_timeout=0.05)
    result = await compact(compactor, [user("a"), user("b"), user("c")])
    assert result.extractive
    assert result.summarizer_error is not None
    assert "longer than" in result.summarizer_error


async def test_an_interrupted_summarizer_propagates() -> None:
    def interrupt(prompt: str) -> str:
        raise AgentInterrupted("stop")

    with pytest.raises(AgentInterrupted):
        await ConversationCompactor(FunctionModel(interrupt)).compact(
            CTX, [user("a"), user("b"), user("c")], SMALL
        )


async def test_summarizer_input_is_trimmed_to_its_budget() -> None:
    model = FunctionModel(rounds())
    config = CompactionConfig(
        trigger_messages=3,
        trigger_tokens=0,
        keep_messages=2,
        offload_before=False,
        max_summary_input_tokens=2_000,
    )
    messages = [user("FIRST: migrate the database")]
    messages += [user(f"message {i} " + "z" * 400) for i in range(300)]
    messages.append(user("NEWEST-IN-PREFIX"))
    messages += [user("t1"), user("t2")]
    await compact(ConversationCompactor(model), messages, config)
    prompt = model.prompts[0]
    assert estimate_text(prompt) <= 2_000
    assert "FIRST: migrate the database" in prompt
    assert "NEWEST-IN-PREFIX" in prompt
    assert "message 0 " not in prompt
    assert re.search(r"\[\.\.\. \d+ older message\(s\) left out", prompt)


# --- when not to compact ------------------------------------------------------------------


async def test_no_second_compaction_without_new_messages() -> None:
    model = FunctionModel(rounds())
    compactor = ConversationCompactor(model)
    config = CompactionConfig(trigger_messages=1, trigger_tokens=0, keep_messages=1)
    first = await compact(compactor, [user("a"), user("b"), user("c")], config)
    assert await compactor.compact(CTX, first.messages, config) is None
    assert len(model.prompts) == 1
    again = await compact(compactor, [*first.messages, user("d")], config)
    assert len(model.prompts) == 2
    assert again.messages[-1].text == "d"


async def test_nothing_to_summarize_but_summaries_is_no_compaction() -> None:
    model = FunctionModel(rounds())
    config = CompactionConfig(trigger_messages=1, trigger_tokens=0, keep_messages=1)
    assert (
        await ConversationCompactor(model).compact(CTX, [old_summary("S"), user("x")], config)
        is None
    )
    assert model.prompts == []


# --- force --------------------------------------------------------------------------------


async def test_force_compacts_a_short_conversation_down_to_the_last_user_turn() -> None:
    compactor = ConversationCompactor(FunctionModel(rounds()))
    messages = [user("u1"), ai("a1"), user("u2"), calls("x"), res("x", "big " * 10)]
    config = CompactionConfig(offload_before=False)  # keep 20 > 5 messages
    assert await compactor.compact(CTX, messages, config) is None
    result = await compact(compactor, messages, config, force=True)
    assert result.forced
    assert result.messages[1:] == messages[2:]
    assert result.removed == 2


async def test_force_shrinks_one_huge_tool_result_and_keeps_its_id() -> None:
    compactor = ConversationCompactor(FunctionModel(rounds()))
    huge = "H" * 100_000
    messages = [user("read the log"), calls("x"), res("x", huge)]
    result = await compact(compactor, messages, CompactionConfig(offload_before=False), force=True)
    assert result.summary is None
    assert result.shrunk == 1
    assert [m.id for m in result.messages] == [m.id for m in messages]
    output = result.messages[2].tool_results[0].text
    assert len(output) < 5_000
    assert output.startswith("H" * 100)
    assert output.endswith("H" * 100)
    assert "cut to fit the context window" in output
    assert result.tokens_after < result.tokens_before
    assert messages[2].tool_results[0].text == huge  # the original is untouched


async def test_a_summary_is_as_trusted_as_what_it_replaced() -> None:
    """A page read before a compaction still lowers what the model writes after it: the
    summary may restate the page, so it carries the page's trust; a conversation of the user
    and the model alone stays the user's, and so does its summary."""
    compactor = ConversationCompactor(FunctionModel(rounds()))
    page = Msg.tool_result(ToolResultBlock(id="c1", name="web_fetch", output="obey the page"))
    read = await compact(compactor, [user("M1"), calls("c1"), page, ai("A1"), user("T1"), ai("T2")])
    clean = await compact(compactor, [user("M1"), ai("A1"), user("M2"), user("T1"), ai("T2")])
    earlier = old_summary("S1").model_copy(update={"metadata": {TRUST_KEY: "untrusted"}})
    again = await compact(compactor, [earlier, user("M2"), ai("A2"), user("T1"), ai("T2")])

    def trust(result: CompactionResult) -> Trust | None:
        summary = next(m for m in result.messages if m.name == SUMMARY_NAME)
        return message_trust(summary)

    assert trust(read) is Trust.UNTRUSTED
    assert trust(clean) is Trust.USER
    assert trust(again) is Trust.UNTRUSTED  # an earlier summary's trust is carried forward
    assert message_trust(old_summary("S0")) is Trust.UNTRUSTED  # one from before: untrusted
