from __future__ import annotations

from typing import Any

import pytest

from harness.compaction import (
    TRUNCATION_TEXT,
    TruncateArgsConfig,
    keep_start,
    should_truncate,
    truncate_args,
)
from harness.kernel import Msg, ToolResultBlock, ToolUseBlock

LONG = "L" * 2_001


def call(call_id: str, **arguments: Any) -> Msg:
    return Msg(
        role="assistant",
        content=[ToolUseBlock(id=call_id, name="write_file", input=arguments)],
        metadata={"model": "m"},
    )


def result(call_id: str) -> Msg:
    return Msg.tool_result(ToolResultBlock(id=call_id, name="write_file", output="ok"))


def conversation() -> list[Msg]:
    return [
        Msg(role="user", content="write the files"),
        call("c1", path="a.txt", content=LONG),
        result("c1"),
        call("c2", path="b.txt", content="short", parts=[LONG, {"deep": LONG}]),
        result("c2"),
        call("c3", path="c.txt", content=LONG),
        result("c3"),
    ]


def test_defaults() -> None:
    config = TruncateArgsConfig()
    assert (config.trigger_messages, config.trigger_tokens) == (25, 40_000)
    assert (config.keep_messages, config.keep_tokens) == (20, 0)
    assert (config.max_arg_length, config.keep_chars) == (2_000, 20)
    assert config.truncation_text == "...(argument truncated)" == TRUNCATION_TEXT


def test_old_long_arguments_are_cut_and_ids_are_kept() -> None:
    messages = conversation()
    config = TruncateArgsConfig(trigger_messages=5, trigger_tokens=0, keep_messages=2)
    out = truncate_args(messages, config)
    assert out.changed == 2
    assert out.arguments == 3
    first, second = out.messages[1], out.messages[3]
    assert first.id == messages[1].id
    assert first.metadata == {"model": "m"}
    assert first.timestamp == messages[1].timestamp
    assert first.tool_uses[0].input == {"path": "a.txt", "content": "L" * 20 + TRUNCATION_TEXT}
    assert second.tool_uses[0].input["parts"] == [
        "L" * 20 + TRUNCATION_TEXT,
        {"deep": "L" * 20 + TRUNCATION_TEXT},
    ]
    # unchanged messages are the same objects; the kept tail is untouched
    for index in (0, 2, 4, 5, 6):
        assert out.messages[index] is messages[index]
    assert out.messages[5].tool_uses[0].input["content"] == LONG
    # the originals were not edited in place
    assert messages[1].tool_uses[0].input["content"] == LONG


def test_nothing_happens_below_the_trigger() -> None:
    messages = conversation()
    config = TruncateArgsConfig(trigger_messages=8, trigger_tokens=0, keep_messages=0)
    assert not should_truncate(messages, config)
    out = truncate_args(messages, config)
    assert out.changed == 0
    assert all(a is b for a, b in zip(out.messages, messages, strict=True))


def test_token_trigger_fires_on_its_own() -> None:
    config = TruncateArgsConfig(trigger_messages=0, trigger_tokens=100, keep_messages=2)
    assert should_truncate(conversation(), config)
    assert truncate_args(conversation(), config).changed == 2


def test_truncating_twice_changes_nothing() -> None:
    config = TruncateArgsConfig(trigger_messages=1, trigger_tokens=0, keep_messages=0)
    once = truncate_args(conversation(), config)
    twice = truncate_args(once.messages, config)
    assert twice.changed == 0


def test_a_growing_conversation_is_rewritten_once_a_stride_not_at_every_step() -> None:
    # As the compaction hook applies it: before every step, to the conversation so far. Each
    # rewrite costs the provider's prompt cache from the first rewritten message on (issue 18).
    config = TruncateArgsConfig(trigger_messages=1, trigger_tokens=0, keep_messages=4)
    messages = [Msg(role="user", content="go")]
    rewrites = []
    for step in range(24):
        messages += [call(f"c{step}", path=f"{step}.txt", content=LONG), result(f"c{step}")]
        out = truncate_args(messages, config)
        if out.changed:
            rewrites.append(len(messages))
        messages = out.messages
        kept = [m for m in messages[-4:] if m.tool_uses]
        assert all(m.tool_uses[0].input["content"] == LONG for m in kept)  # the tail is whole
    assert rewrites == list(range(9, 50, 4))  # every second step here, never more often
    assert len(rewrites) < 24 / 2 + 1


def test_keep_tokens_keeps_the_suffix_that_fits() -> None:
    messages = [Msg(role="user", content="x" * 100) for _ in range(5)]  # 47 tokens each
    assert keep_start(messages, keep_messages=0, keep_tokens=100) == 3
    assert keep_start(messages, keep_messages=0, keep_tokens=10) == 4  # at least one kept
    assert keep_start(messages, keep_messages=0, keep_tokens=10_000) == 0
    assert keep_start(messages, keep_messages=2, keep_tokens=0) == 3
    assert keep_start(messages, keep_messages=9, keep_tokens=0) == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"trigger_messages": -1}, "trigger_messages"),
        ({"trigger_tokens": -5}, "trigger_tokens"),
        ({"keep_messages": -1}, "keep_messages"),
        ({"max_arg_length": 0}, "max_arg_length"),
        ({"keep_chars": 2_000}, "keep_chars"),
        ({"truncation_text": ""}, "truncation_text"),
    ],
)
def test_invalid_values_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"TruncateArgsConfig.{field}"):
        TruncateArgsConfig(**kwargs)
