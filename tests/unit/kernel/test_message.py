"""Contract tests for messages and content blocks (harness.kernel.message)."""

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.kernel import (
    ContentBlock,
    ImageBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    as_messages,
    new_id,
)

# --- strategies -------------------------------------------------------------------------------

# Any text (every Unicode category but lone surrogates): astral-plane characters, combining
# marks, control characters, quotes and backslashes.
texts = st.text(max_size=40)

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(texts, json_values, max_size=4)

text_blocks = st.builds(TextBlock, text=texts)
thinking_blocks = st.builds(ThinkingBlock, thinking=texts, signature=st.none() | texts)
image_blocks = st.one_of(
    st.builds(ImageBlock, url=texts.map(lambda s: "https://example.com/" + s)),
    st.builds(ImageBlock, data=texts, media_type=st.sampled_from(["image/png", "image/jpeg"])),
)
tool_use_blocks = st.builds(ToolUseBlock, id=texts, name=texts, input=json_objects)
tool_result_blocks = st.builds(
    ToolResultBlock,
    id=texts,
    name=texts,
    output=texts | st.lists(text_blocks | image_blocks, max_size=3),
    is_error=st.booleans(),
)
blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    text_blocks, thinking_blocks, image_blocks, tool_use_blocks, tool_result_blocks
)
roles: st.SearchStrategy[Role] = st.sampled_from(["system", "user", "assistant", "tool"])
timestamps = st.datetimes(
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)


@st.composite
def messages(draw: st.DrawFn) -> Msg:
    kwargs: dict[str, Any] = {
        "role": draw(roles),
        "content": draw(st.lists(blocks, max_size=5)),
        "name": draw(st.none() | texts),
        "metadata": draw(json_objects),
    }
    if draw(st.booleans()):
        kwargs["id"] = draw(texts.filter(bool))
    if draw(st.booleans()):
        kwargs["timestamp"] = draw(timestamps)
    return Msg(**kwargs)


# --- serialization ----------------------------------------------------------------------------


@settings(database=None)
@given(messages())
def test_msg_round_trips_through_model_dump_json(msg: Msg) -> None:
    restored = Msg.model_validate_json(msg.model_dump_json())

    assert restored == msg
    assert restored.model_dump() == msg.model_dump()


@settings(database=None)
@given(messages())
def test_msg_round_trips_through_json_module(msg: Msg) -> None:
    wire = json.dumps(msg.model_dump(mode="json"), ensure_ascii=False)
    restored = Msg.model_validate(json.loads(wire))

    assert restored == msg
    assert [type(block) for block in restored.content] == [type(block) for block in msg.content]


def test_round_trip_keeps_block_types_inside_tool_result_lists() -> None:
    result = ToolResultBlock(
        id="c1",
        name="shot",
        output=[TextBlock(text="see"), ImageBlock(data="aGk=", media_type="image/png")],
    )
    msg = Msg.tool_result(result)

    restored = Msg.model_validate_json(msg.model_dump_json())

    assert restored.content == [result]
    restored_result = restored.tool_results[0]
    assert isinstance(restored_result.output, list)
    assert [type(part) for part in restored_result.output] == [TextBlock, ImageBlock]


def test_serialized_form_names_each_block_type() -> None:
    msg = Msg(
        id="m1",
        role="assistant",
        content=[
            TextBlock(text="hi"),
            ThinkingBlock(thinking="hmm", signature="sig"),
            ToolUseBlock(id="c1", name="ls", input={"path": "."}),
        ],
        timestamp=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
    )

    data = msg.model_dump(mode="json")

    assert data == {
        "id": "m1",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "hi"},
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "tool_use", "id": "c1", "name": "ls", "input": {"path": "."}},
        ],
        "name": None,
        "metadata": {},
        "timestamp": "2024-05-01T12:00:00Z",
    }


def test_unknown_block_type_is_rejected() -> None:
    with pytest.raises(ValidationError, match="audio"):
        Msg.model_validate({"role": "user", "content": [{"type": "audio", "data": "x"}]})


def test_unknown_msg_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="colour"):
        Msg.model_validate({"role": "user", "content": "hi", "colour": "red"})


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValidationError, match="role"):
        Msg.model_validate({"role": "robot", "content": "hi"})


# --- ids, defaults ----------------------------------------------------------------------------


def test_every_message_gets_a_distinct_non_empty_id() -> None:
    ids = [Msg(role="user", content="same").id for _ in range(200)]

    assert all(len(i) == 32 for i in ids)
    assert len(set(ids)) == 200


def test_new_id_is_32_hex_digits_and_fresh() -> None:
    first, second = new_id(), new_id()

    assert len(first) == 32
    int(first, 16)
    assert first != second


def test_explicit_id_is_kept() -> None:
    msg = Msg(id="abc", role="user", content="hi")

    assert msg.id == "abc"
    assert Msg.model_validate_json(msg.model_dump_json()).id == "abc"


def test_empty_id_is_rejected() -> None:
    with pytest.raises(ValidationError, match="id"):
        Msg(id="", role="user", content="hi")


def test_defaults() -> None:
    before = datetime.now(UTC)
    msg = Msg(role="assistant")
    after = datetime.now(UTC)

    assert msg.content == []
    assert msg.name is None
    assert msg.metadata == {}
    assert msg.timestamp.tzinfo is not None
    assert before <= msg.timestamp <= after


# --- content ----------------------------------------------------------------------------------


def test_str_content_becomes_one_text_block() -> None:
    msg = Msg(role="user", content="hello, wörld")

    assert msg.content == [TextBlock(text="hello, wörld")]


def test_text_concatenates_only_text_blocks() -> None:
    msg = Msg(
        role="assistant",
        content=[
            TextBlock(text="a"),
            ThinkingBlock(thinking="not me"),
            ToolUseBlock(id="c1", name="t"),
            TextBlock(text="b"),
        ],
    )

    assert msg.text == "ab"


def test_tool_uses_and_tool_results_in_order() -> None:
    use_1 = ToolUseBlock(id="c1", name="a", input={"x": 1})
    use_2 = ToolUseBlock(id="c2", name="b")
    res_1 = ToolResultBlock(id="c1", name="a", output="one")
    res_2 = ToolResultBlock(id="c2", name="b", output="two", is_error=True)
    msg = Msg(role="assistant", content=[TextBlock(text="x"), use_1, res_1, use_2, res_2])

    assert msg.tool_uses == [use_1, use_2]
    assert msg.tool_results == [res_1, res_2]
    assert Msg(role="user", content="plain").tool_uses == []
    assert Msg(role="user", content="plain").tool_results == []


def test_tool_use_input_defaults_to_empty_dict() -> None:
    assert ToolUseBlock(id="c1", name="t").input == {}


def test_tool_result_text_leaves_out_images() -> None:
    listed = ToolResultBlock(
        id="c1",
        name="t",
        output=[TextBlock(text="a"), ImageBlock(url="https://x/y.png"), TextBlock(text="b")],
    )

    assert listed.text == "ab"
    assert ToolResultBlock(id="c1", name="t", output="plain").text == "plain"
    assert listed.is_error is False


def test_tool_result_message_wraps_one_result() -> None:
    result = ToolResultBlock(id="c9", name="grep", output="3 hits")

    msg = Msg.tool_result(result)

    assert msg.role == "tool"
    assert msg.name == "grep"
    assert msg.content == [result]


# --- as_messages ------------------------------------------------------------------------------


def test_as_messages_none_is_no_input() -> None:
    assert as_messages(None) == []


def test_as_messages_str_is_one_user_message() -> None:
    [msg] = as_messages("hi there")

    assert msg.role == "user"
    assert msg.content == [TextBlock(text="hi there")]


def test_as_messages_msg_is_wrapped_in_a_list() -> None:
    msg = Msg(role="assistant", content="x")

    result = as_messages(msg)

    assert result == [msg]
    assert result[0] is msg


def test_as_messages_sequence_becomes_a_new_list_of_the_same_messages() -> None:
    first, second = Msg(role="user", content="a"), Msg(role="assistant", content="b")
    original = [first, second]

    from_list = as_messages(original)
    from_tuple = as_messages((first, second))

    assert from_list == [first, second]
    assert from_list is not original
    assert from_tuple == [first, second]
    assert from_tuple[1] is second


def test_as_messages_rejects_a_list_with_a_non_message() -> None:
    bad: Any = [Msg(role="user", content="a"), "b"]

    with pytest.raises(
        TypeError, match="expected str, Msg or a list of Msg, got a list containing str"
    ):
        as_messages(bad)


def test_as_messages_rejects_a_dict_item() -> None:
    bad: Any = [{"role": "user", "content": "a"}]

    with pytest.raises(TypeError, match="got a list containing dict"):
        as_messages(bad)
