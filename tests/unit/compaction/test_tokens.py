from __future__ import annotations

from datetime import UTC, datetime, timedelta

from harness.compaction import count_tokens, estimate_message, estimate_text, estimate_tokens
from harness.kernel import ImageBlock, Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from harness.memory.render import SUMMARY_NAME

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_estimate_text_is_two_and_a_half_chars_per_token_rounded_up() -> None:
    assert [estimate_text("x" * n) for n in (0, 1, 2, 3, 5, 6, 10, 11)] == [0, 1, 1, 2, 2, 3, 4, 5]


def test_text_message() -> None:
    # 5 + est("USER")=2 + est("hello world")=5
    assert estimate_message(Msg(role="user", content="hello world")) == 12
    # a name counts: est("anna")=2
    assert estimate_message(Msg(role="user", name="anna", content="hello world")) == 14


def test_tool_call_message() -> None:
    call = ToolUseBlock(id="c1", name="read", input={"path": "a.txt", "n": 3})
    # 5 + est("ASSISTANT")=4 + [10 + est("read")=2 + est("c1")=1 + est('{"path":"a.txt","n":3}')=9]
    assert estimate_message(Msg(role="assistant", content=[call])) == 31
    flags = ToolUseBlock(id="c1", name="read", input={"ok": True, "x": None})
    # '{"ok":true,"x":null}' is 20 characters: 8 tokens
    assert estimate_message(Msg(role="assistant", content=[flags])) == 5 + 4 + 10 + 2 + 1 + 8


def test_tool_result_message() -> None:
    result = ToolResultBlock(id="c1", name="read", output="x" * 10)
    # 5 + est("TOOL")=2 + est("read")=2 + [8 + 2 + 1 + 4]
    assert estimate_message(Msg(role="tool", name="read", content=[result])) == 24
    parts = ToolResultBlock(
        id="c1", name="read", output=[TextBlock(text="x" * 10), ImageBlock(url="u")]
    )
    assert estimate_message(Msg(role="tool", name="read", content=[parts])) == 24 + 5


def test_other_blocks_count_five() -> None:
    msg = Msg(role="assistant", content=[ThinkingBlock(thinking="t" * 100), ImageBlock(url="u")])
    assert estimate_message(msg) == 5 + 4 + 5 + 5


def test_estimate_tokens_sums_messages() -> None:
    messages = [Msg(role="user", content="hello world"), Msg(role="user", content="hello world")]
    assert estimate_tokens(messages) == 24
    assert estimate_tokens([]) == 0


def test_count_tokens_uses_the_last_reported_usage_plus_the_rest() -> None:
    early = Msg(
        role="assistant",
        content="a",
        metadata={"usage": {"input_tokens": 10, "output_tokens": 1}},
        timestamp=T0,
    )
    late = Msg(
        role="assistant",
        content=[ToolUseBlock(id="c1", name="read", input={})],
        metadata={"usage": {"input_tokens": 1000, "output_tokens": 50}},
        timestamp=T0 + timedelta(seconds=1),
    )
    after = Msg(
        role="tool",
        name="read",
        content=[ToolResultBlock(id="c1", name="read", output="x" * 100)],
        timestamp=T0 + timedelta(seconds=2),
    )
    messages = [Msg(role="user", content="q" * 500, timestamp=T0), early, late, after]
    assert count_tokens(messages) == 1050 + estimate_message(after)
    assert count_tokens(messages) != estimate_tokens(messages)


def test_count_tokens_without_usable_usage_is_the_estimate() -> None:
    zero = Msg(role="assistant", content="a", metadata={"usage": {"input_tokens": 0}})
    broken = Msg(role="assistant", content="a", metadata={"usage": "n/a"})
    for messages in ([Msg(role="user", content="hi")], [zero], [broken]):
        assert count_tokens(messages) == estimate_tokens(messages)


def test_usage_from_before_the_latest_compaction_is_ignored() -> None:
    kept = Msg(
        role="assistant",
        content="a",
        metadata={"usage": {"input_tokens": 90_000, "output_tokens": 10}},
        timestamp=T0,
    )
    summary = Msg(
        role="user", name=SUMMARY_NAME, content="summary", timestamp=T0 + timedelta(seconds=5)
    )
    messages = [summary, kept]
    assert count_tokens(messages) == estimate_tokens(messages)
    newer = Msg(
        role="assistant",
        content="b",
        metadata={"usage": {"input_tokens": 300, "output_tokens": 7}},
        timestamp=T0 + timedelta(seconds=6),
    )
    assert count_tokens([*messages, newer]) == 307
