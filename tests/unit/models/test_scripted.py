"""Contract tests for the scripted model (harness.models.scripted)."""

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.errors import ConfigError, ScriptExhaustedError
from harness.kernel import (
    ChatChunk,
    ChatModel,
    ChatResponse,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    complete,
)
from harness.models.scripted import ScriptedChatModel, ScriptTurn


def user(text: str) -> Msg:
    return Msg(role="user", content=text)


def tool_msg(output: str | list[TextBlock | ImageBlock]) -> Msg:
    return Msg.tool_result(ToolResultBlock(id="call_0", name="probe", output=output))


async def answer(model: ScriptedChatModel, *messages: Msg) -> ChatResponse:
    return await complete(model, list(messages))


async def answer_text(model: ScriptedChatModel, text: str) -> str:
    response = await answer(model, user(text))
    return "".join(block.text for block in response.content if isinstance(block, TextBlock))


def write_script(directory: Path, script: Any, name: str = "script.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def test_is_a_chat_model() -> None:
    model = ScriptedChatModel([])

    assert isinstance(model, ChatModel)
    assert model.model_name == "scripted"


# --- matching ---------------------------------------------------------------------------------


async def test_match_is_searched_in_the_last_message_text() -> None:
    model = ScriptedChatModel([{"match": r"weath\w+", "text": "sunny", "repeat": True}])

    assert await answer_text(model, "how is the weather today?") == "sunny"
    # earlier messages do not count, only the last one
    with pytest.raises(ScriptExhaustedError):
        await answer(model, user("weather?"), user("hello"))


async def test_match_is_searched_in_tool_results() -> None:
    model = ScriptedChatModel(
        [
            {"match": r"^\d+ degrees$", "text": "warm"},
            {"match": "from a list", "text": "listed"},
        ]
    )

    first = await answer(model, user("check"), tool_msg("21 degrees"))
    second = await answer(
        model,
        tool_msg([TextBlock(text="output "), ImageBlock(url="x"), TextBlock(text="from a list")]),
    )

    assert first.content == [TextBlock(text="warm")]
    assert second.content == [TextBlock(text="listed")]


async def test_a_workspace_note_after_the_last_message_is_not_what_match_looks_at() -> None:
    """A consolidation in the background adds a ``<workspace_update>`` note right after a tool
    result; a script matching the result once missed it and stopped the turn."""
    model = ScriptedChatModel([{"match": r"^\d+ degrees$", "text": "warm"}])
    note = Msg(role="user", name="workspace_update", content="<workspace_update>MEMORY.md changed")

    reply = await answer(model, user("check"), tool_msg("21 degrees"), note)

    assert reply.content == [TextBlock(text="warm")]


async def test_match_uses_the_regex_flags_given() -> None:
    model = ScriptedChatModel([{"match": "(?i)thanks", "text": "You're welcome!"}])

    assert await answer_text(model, "THANKS a lot") == "You're welcome!"


async def test_a_turn_without_match_fits_any_request_even_an_empty_one() -> None:
    model = ScriptedChatModel([{"text": "anything"}, {"text": "nothing"}])

    assert await answer_text(model, "whatever") == "anything"
    assert (await answer(model)).content == [TextBlock(text="nothing")]


async def test_first_unused_fitting_turn_wins() -> None:
    model = ScriptedChatModel(
        [
            {"match": "later", "text": "the later one"},
            {"match": "x", "text": "first x"},
            {"match": "x", "text": "second x"},
            {"text": "fallback"},
        ]
    )

    assert await answer_text(model, "x") == "first x"
    assert await answer_text(model, "x") == "second x"
    assert await answer_text(model, "x") == "fallback"
    # the skipped turn is still there for a request that fits it
    assert await answer_text(model, "later") == "the later one"
    with pytest.raises(ScriptExhaustedError):
        await answer(model, user("x"))


async def test_repeat_turns_are_reused_and_others_used_once() -> None:
    model = ScriptedChatModel(
        [
            {"match": "thanks", "text": "welcome", "repeat": True},
            {"match": "hi", "text": "hello"},
        ]
    )

    assert [await answer_text(model, "thanks") for _ in range(3)] == ["welcome"] * 3
    assert await answer_text(model, "hi") == "hello"
    with pytest.raises(ScriptExhaustedError):
        await answer(model, user("hi"))
    assert await answer_text(model, "thanks again") == "welcome"


async def test_exhausted_error_quotes_the_last_message() -> None:
    model = ScriptedChatModel([{"match": "never", "text": "x"}])

    with pytest.raises(ScriptExhaustedError) as info:
        await answer(model, user("first"), user("what's up?"))

    assert str(info.value) == (
        'scripted model has no turn left that matches the request; last message: "what\'s up?"'
    )


async def test_exhausted_error_shortens_a_long_last_message() -> None:
    model = ScriptedChatModel([])

    with pytest.raises(ScriptExhaustedError) as info:
        await answer(model, user("a" * 301))

    assert str(info.value).endswith(f"last message: {'a' * 300 + '...'!r}")


# --- answers ----------------------------------------------------------------------------------


async def test_text_streams_word_by_word_and_ends_with_the_full_response() -> None:
    model = ScriptedChatModel([{"text": "Hello  big\nworld!"}])

    items = [item async for item in model.stream([user("hi")], [])]

    assert items[:-1] == [
        ChatChunk(text="Hello  "),
        ChatChunk(text="big\n"),
        ChatChunk(text="world!"),
    ]
    assert items[-1] == ChatResponse(
        content=[TextBlock(text="Hello  big\nworld!")],
        usage=None,
        model="scripted",
        stop_reason="end_turn",
    )


async def test_tool_calls_with_unique_ids() -> None:
    model = ScriptedChatModel(
        [
            {
                "text": "Checking.",
                "tool_calls": [
                    {"name": "get_weather", "input": {"city": "Paris", "days": [1, 2]}},
                    {"name": "now"},
                ],
            },
            {"tool_calls": [{"name": "now"}]},
        ]
    )

    first = await answer(model, user("weather"))
    second = await answer(model, user("time"))

    assert first.content == [
        TextBlock(text="Checking."),
        ToolUseBlock(id="call_0", name="get_weather", input={"city": "Paris", "days": [1, 2]}),
        ToolUseBlock(id="call_1", name="now", input={}),
    ]
    assert first.stop_reason == "tool_use"
    assert second.content == [ToolUseBlock(id="call_2", name="now", input={})]


async def test_usage_is_reported_only_when_given() -> None:
    model = ScriptedChatModel(
        [{"text": "counted", "usage": {"input_tokens": 12, "output_tokens": 3}}, {"text": "not"}]
    )

    counted = await answer(model, user("a"))
    uncounted = await answer(model, user("b"))

    assert counted.usage == Usage(input_tokens=12, output_tokens=3)
    assert uncounted.usage is None


async def test_requests_are_recorded() -> None:
    model = ScriptedChatModel([{"text": "one"}, {"text": "two"}])
    first, second = user("a"), user("b")

    await answer(model, first)
    await answer(model, first, second)

    assert model.requests == [[first], [first, second]]


def test_turns_accept_turn_objects_and_validate_dicts() -> None:
    model = ScriptedChatModel([ScriptTurn(text="object"), {"text": "dict"}])

    assert model.turns == [ScriptTurn(text="object"), ScriptTurn(text="dict")]
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        ScriptedChatModel([{"match": "[oops"}])
    with pytest.raises(ValidationError, match="input_tokens"):
        ScriptedChatModel([{"usage": {"input_tokens": -1, "output_tokens": 0}}])


# --- from_file --------------------------------------------------------------------------------


async def test_from_file_loads_the_script(tmp_path: Path) -> None:
    path = write_script(
        tmp_path,
        {"turns": [{"match": "hi", "text": "hello"}, {"tool_calls": [{"name": "t"}]}]},
        name="demo.json",
    )

    model = ScriptedChatModel.from_file(path)

    assert model.model_name == "scripted:demo.json"
    assert model.log_path is None
    response = await answer(model, user("hi"))
    assert response.content == [TextBlock(text="hello")]
    assert response.model == "scripted:demo.json"


def test_from_file_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"

    with pytest.raises(ConfigError) as info:
        ScriptedChatModel.from_file(path)

    assert str(info.value) == f"cannot read model script {path}: No such file or directory"


def test_from_file_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"turns": [', encoding="utf-8")

    with pytest.raises(ConfigError) as info:
        ScriptedChatModel.from_file(path)

    assert str(info.value).startswith(f"invalid model script {path}: file: Invalid JSON: ")


def test_from_file_invalid_regex(tmp_path: Path) -> None:
    path = write_script(tmp_path, {"turns": [{"text": "ok"}, {"match": "(unclosed"}]})

    with pytest.raises(ConfigError) as info:
        ScriptedChatModel.from_file(path)

    message = str(info.value)
    assert message.startswith(
        f"invalid model script {path}: turns.1.match: "
        "Value error, 'match' is not a valid regular expression ("
    )
    assert message.endswith("): '(unclosed'")


@pytest.mark.parametrize(
    ("script", "where"),
    [
        ({"turns": [{"text": "x", "colour": "red"}]}, "turns.0.colour"),
        ({"turns": [], "logs": "x.jsonl"}, "logs"),
        ({"turns": [{"tool_calls": [{"name": "t", "args": {}}]}]}, "turns.0.tool_calls.0.args"),
    ],
)
def test_from_file_unknown_key(tmp_path: Path, script: dict[str, Any], where: str) -> None:
    path = write_script(tmp_path, script)

    with pytest.raises(ConfigError) as info:
        ScriptedChatModel.from_file(path)

    assert (
        str(info.value) == f"invalid model script {path}: {where}: Extra inputs are not permitted"
    )


def test_from_file_missing_turns(tmp_path: Path) -> None:
    path = write_script(tmp_path, {"log": "x.jsonl"})

    with pytest.raises(ConfigError) as info:
        ScriptedChatModel.from_file(path)

    assert str(info.value) == f"invalid model script {path}: turns: Field required"


# --- the request log --------------------------------------------------------------------------


async def test_log_appends_one_json_line_per_request(tmp_path: Path) -> None:
    script_dir = tmp_path / "scripts"
    script_dir.mkdir()
    path = write_script(
        script_dir, {"log": "requests.jsonl", "turns": [{"text": "ok", "repeat": True}]}
    )
    model = ScriptedChatModel.from_file(path)
    system = Msg(role="system", content="Be brief.")
    first = [system, user("héllo")]
    second = [*first, Msg(role="assistant", content="ok"), tool_msg("done")]

    await answer(model, *first)
    await answer(model, *second)

    log = script_dir / "requests.jsonl"
    assert model.log_path == log
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert "héllo" in lines[0]
    assert [Msg.model_validate(m) for m in json.loads(lines[0])] == first
    assert [Msg.model_validate(m) for m in json.loads(lines[1])] == second


async def test_log_keeps_earlier_lines_and_records_unanswered_requests(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('["earlier"]\n', encoding="utf-8")
    model = ScriptedChatModel([], log_path=log)

    with pytest.raises(ScriptExhaustedError):
        await answer(model, user("unanswered"))

    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '["earlier"]'
    assert [Msg.model_validate(m).text for m in json.loads(lines[1])] == ["unanswered"]
    assert len(lines) == 2
