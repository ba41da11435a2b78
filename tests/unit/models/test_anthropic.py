"""AnthropicChatModel against a local messages-API server, through the real ``anthropic`` SDK."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import anthropic
import httpx2
import pytest

from _servers import AnthropicServer, Reply, running
from harness.errors import (
    ConfigError,
    ContextOverflowError,
    ModelError,
    RateLimitError,
    install_hint,
)
from harness.kernel import (
    CACHE_PREFIX_BLOCKS,
    ChatChunk,
    ChatResponse,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
)
from harness.models import anthropic as adapter
from harness.models._shared import nearest_error_class
from harness.models.anthropic import AnthropicChatModel

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CLOCK = ToolSchema(name="now", description="The current time.")
HI = [Msg(role="system", content="Be brief."), Msg(role="user", content="Hi")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def running_server() -> Iterator[AnthropicServer]:
    with running(AnthropicServer()) as server:
        yield server


@pytest.fixture
def server(running_server: AnthropicServer) -> AnthropicServer:
    running_server.reset()
    return running_server


@pytest.fixture
async def model(server: AnthropicServer) -> AsyncIterator[AnthropicChatModel]:
    model = AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url=server.url)
    yield model
    await model.aclose()


async def collect(
    model: AnthropicChatModel,
    messages: Sequence[Msg] = HI,
    tools: Sequence[ToolSchema] = (),
    **options: Any,
) -> tuple[list[ChatChunk], ChatResponse]:
    chunks: list[ChatChunk] = []
    responses: list[ChatResponse] = []
    async for item in model.stream(messages, tools, **options):
        if isinstance(item, ChatResponse):
            responses.append(item)
        else:
            assert not responses, "a chunk arrived after the final response"
            chunks.append(item)
    assert len(responses) == 1
    return chunks, responses[0]


# -- events ---------------------------------------------------------------------------------


def message_start(
    input_tokens: int = 25, *, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any]:
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20260101",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, kind: str, **fields: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, **fields}}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_end(stop_reason: str, output_tokens: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


def text_events(text: str, *, stop_reason: str = "end_turn") -> list[dict[str, Any]]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, "text_delta", text=text),
        block_stop(0),
        *message_end(stop_reason, 5),
    ]


def tool_use(index: int, call_id: str, name: str) -> dict[str, Any]:
    return block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}})


# -- streaming ------------------------------------------------------------------------------


async def test_streamed_text_and_thinking_arrive_as_chunks(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_stream(
        [
            message_start(120, cache_read=1000, cache_write=30),
            {"type": "ping"},
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, "thinking_delta", thinking="Short "),
            delta(0, "thinking_delta", thinking="answer."),
            delta(0, "signature_delta", signature="sig-123"),
            block_stop(0),
            block_start(1, {"type": "text", "text": ""}),
            delta(1, "text_delta", text="Hel"),
            delta(1, "text_delta", text="lo!"),
            block_stop(1),
            *message_end("end_turn", 17),
        ]
    )

    chunks, response = await collect(model)

    assert chunks == [
        ChatChunk(thinking="Short "),
        ChatChunk(thinking="answer."),
        ChatChunk(text="Hel"),
        ChatChunk(text="lo!"),
    ]
    assert response == ChatResponse(
        content=[
            ThinkingBlock(thinking="Short answer.", signature="sig-123"),
            TextBlock(text="Hello!"),
        ],
        usage=Usage(1150, 17, cache_read_tokens=1000, cache_write_tokens=30),
        model="claude-test-20260101",
        stop_reason="end_turn",
    )
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "stream": True,
    }


async def test_streamed_tool_input_is_reassembled_from_fragments(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_stream(
        [
            message_start(),
            block_start(0, {"type": "text", "text": "Checking."}),
            block_stop(0),
            tool_use(1, "toolu_a", "get_weather"),
            delta(1, "input_json_delta", partial_json=""),
            delta(1, "input_json_delta", partial_json='{"ci'),
            delta(1, "input_json_delta", partial_json='ty": "Par'),
            delta(1, "input_json_delta", partial_json='is"}'),
            block_stop(1),
            tool_use(2, "toolu_b", "now"),
            block_stop(2),
            *message_end("tool_use", 40),
        ]
    )

    chunks, response = await collect(model, tools=[WEATHER, CLOCK])

    assert chunks == []  # the text came whole in content_block_start, with no delta
    assert response == ChatResponse(
        content=[
            TextBlock(text="Checking."),
            ToolUseBlock(id="toolu_a", name="get_weather", input={"city": "Paris"}),
            ToolUseBlock(id="toolu_b", name="now", input={}),
        ],
        usage=Usage(25, 40),
        model="claude-test-20260101",
        stop_reason="tool_use",
    )
    assert server.bodies[0]["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {
            "name": "now",
            "description": "The current time.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]


async def test_follow_up_turn_encodes_tool_calls_and_results(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_stream(text_events("Sunny in Paris."))
    conversation = [
        Msg(role="system", content="Be brief."),
        Msg(role="user", content="Weather in Paris?"),
        Msg(role="user", content=[ImageBlock(data="aGVsbG8=", media_type="image/jpeg")]),
        Msg(
            role="assistant",
            content=[
                ThinkingBlock(thinking="Call the tool.", signature="sig-1"),
                ThinkingBlock(thinking="Unsigned, so dropped."),
                TextBlock(text=""),
                ToolUseBlock(id="toolu_a", name="get_weather", input={"city": "Paris"}),
                ToolUseBlock(id="toolu_b", name="now", input={}),
            ],
        ),
        Msg.tool_result(ToolResultBlock(id="toolu_a", name="get_weather", output="sunny")),
        Msg.tool_result(
            ToolResultBlock(id="toolu_b", name="now", output="Error: no clock", is_error=True)
        ),
        Msg(role="system", content="Answer in English."),
        Msg(role="user", content="Thanks!"),
        Msg(role="assistant", content=[ThinkingBlock(thinking="Only unsigned thinking.")]),
    ]

    await collect(model, conversation, [WEATHER, CLOCK])

    body = server.bodies[0]
    assert body["system"] == "Be brief.\n\nAnswer in English."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Paris?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "aGVsbG8="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Call the tool.", "signature": "sig-1"},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_b", "name": "now", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "sunny",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "Error: no clock",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks!"},
            ],
        },
    ]


def test_tool_results_open_a_merged_user_turn() -> None:
    messages = [
        Msg(role="assistant", content=[ToolUseBlock(id="t1", name="now")]),
        Msg(role="user", content="(interrupted)"),
        Msg.tool_result(
            ToolResultBlock(
                id="t1",
                name="now",
                output=[TextBlock(text="12:00"), ImageBlock(url="https://example.com/c.png")],
            )
        ),
    ]

    system, wire = adapter._to_anthropic_messages(messages)

    assert system == []
    assert wire[1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [
                    {"type": "text", "text": "12:00"},
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/c.png"},
                    },
                ],
                "is_error": False,
            },
            {"type": "text", "text": "(interrupted)"},
        ],
    }


async def test_max_tokens_and_options(server: AnthropicServer) -> None:
    model = AnthropicChatModel(
        "claude-test",
        api_key="sk-ant-test",
        base_url=server.url,
        max_tokens=1000,
        options={"temperature": 0.2, "top_k": 5},
    )
    server.queue_stream(text_events("a"))
    server.queue_stream(text_events("b"))

    await collect(model)
    await collect(model, temperature=0.9, max_tokens=50)
    await model.aclose()

    first, second = server.bodies
    assert (first["max_tokens"], first["temperature"], first["top_k"]) == (1000, 0.2, 5)
    assert (second["max_tokens"], second["temperature"], second["top_k"]) == (50, 0.9, 5)


async def test_tool_choice_words_become_anthropic_objects(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    for text in ("a", "b", "c"):
        server.queue_stream(text_events(text))

    await collect(model, tools=[WEATHER], tool_choice="none")
    await collect(model, tools=[WEATHER], tool_choice="required")
    await collect(model, tool_choice="none")

    none, required, without = server.bodies
    assert none["tool_choice"] == {"type": "none"}
    assert required["tool_choice"] == {"type": "any"}
    assert "tool_choice" not in without


async def test_unknown_tool_choice_is_refused(model: AnthropicChatModel) -> None:
    with pytest.raises(ValueError, match="tool_choice must be one of"):
        await collect(model, tools=[WEATHER], tool_choice="sometimes")


def test_options_may_not_replace_fields_the_adapter_sets() -> None:
    with pytest.raises(ValueError, match=r"^options cannot set system: "):
        AnthropicChatModel("claude-test", api_key="k", options={"system": "x"})


async def test_invalid_tool_input_is_kept_not_raised(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_stream(
        [
            message_start(),
            tool_use(0, "toolu_a", "get_weather"),
            delta(0, "input_json_delta", partial_json='{"city": "Par'),
            block_stop(0),
            *message_end("max_tokens", 4096),
        ]
    )

    _, response = await collect(model, tools=[WEATHER])

    assert response.content == [
        ToolUseBlock(
            id="toolu_a", name="get_weather", input={"__invalid_arguments__": '{"city": "Par'}
        )
    ]
    assert response.stop_reason == "max_tokens"


async def test_a_stream_without_any_event_raises(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_raw_stream(b"")

    with pytest.raises(ModelError) as caught:
        await collect(model)

    assert type(caught.value) is ModelError
    assert str(caught.value) == "Anthropic model 'claude-test': the stream ended without any data"


# -- errors ---------------------------------------------------------------------------------


async def test_prompt_too_long_maps_to_context_overflow_error(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_error(
        400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
    )

    with pytest.raises(ContextOverflowError) as caught:
        await collect(model)

    assert str(caught.value) == (
        "Anthropic model 'claude-test' failed with HTTP 400: "
        "prompt is too long: 210000 tokens > 200000 maximum"
    )
    assert (caught.value.requested_tokens, caught.value.limit_tokens) == (210000, 200000)
    assert isinstance(caught.value.__cause__, anthropic.BadRequestError)
    assert len(server.requests) == 1


async def test_a_429_is_retried_by_the_sdk(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_error(429, "rate_limit_error", "Number of request tokens has exceeded your rate")
    server.queue_stream(text_events("Hello"))

    _, response = await collect(model)

    assert response.content == [TextBlock(text="Hello")]
    assert response.usage == Usage(25, 5)
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert server.bodies[0] == server.bodies[1]


async def test_a_429_that_persists_is_a_rate_limit_error(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    for _ in range(3):
        server.queue_error(429, "rate_limit_error", "Rate limited.")

    with pytest.raises(RateLimitError) as caught:
        await collect(model)

    assert str(caught.value) == "Anthropic model 'claude-test' failed with HTTP 429: Rate limited."
    assert isinstance(caught.value.__cause__, anthropic.RateLimitError)
    assert len(server.requests) == 3  # the first try and max_retries=2


async def test_a_500_is_a_model_error(server: AnthropicServer) -> None:
    model = AnthropicChatModel(
        "claude-test", api_key="sk-ant-test", base_url=server.url, max_retries=0
    )
    server.queue_error(500, "api_error", "Internal server error")

    with pytest.raises(ModelError) as caught:
        await collect(model)
    await model.aclose()

    assert type(caught.value) is ModelError
    assert str(caught.value) == (
        "Anthropic model 'claude-test' failed with HTTP 500: Internal server error"
    )
    assert isinstance(caught.value.__cause__, anthropic.InternalServerError)


async def test_an_error_event_inside_the_stream_is_a_model_error(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue_stream([message_start(), overloaded])

    with pytest.raises(ModelError) as caught:
        await collect(model)

    assert type(caught.value) is ModelError
    assert str(caught.value) == "Anthropic model 'claude-test' failed mid-stream: Overloaded"


async def test_a_connection_dropped_mid_stream_is_a_model_error(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    partial = f"event: message_start\ndata: {json.dumps(message_start())}\n\n".encode()
    headers = {"content-type": "text/event-stream", "content-length": "100000"}
    server.queue(Reply(200, partial, headers))

    with pytest.raises(ModelError) as caught:
        await collect(model)

    # SDK releases differ on whether a drop mid-stream is wrapped in APIConnectionError (2.17)
    # or escapes as the transport's error (2.16): either way it names the model and the cause.
    message = str(caught.value)
    assert message.startswith("Anthropic model 'claude-test'")
    assert "peer closed connection" in message
    assert any(isinstance(cause, httpx2.RemoteProtocolError) for cause in causes(caught.value))


def causes(error: BaseException) -> list[BaseException]:
    """The exceptions ``error`` was raised from, nearest first."""
    found: list[BaseException] = []
    while error.__cause__ is not None or error.__context__ is not None:
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
        found.append(error)
    return found


async def test_an_unreachable_server_is_a_model_error() -> None:
    model = AnthropicChatModel(
        "claude-test", api_key="sk-ant-test", base_url="http://127.0.0.1:9", max_retries=0
    )

    with pytest.raises(ModelError) as caught:
        await collect(model)
    await model.aclose()

    assert str(caught.value).startswith(
        "Anthropic model 'claude-test': cannot reach http://127.0.0.1:9: Connection"
    )


def test_a_missing_sdk_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # makes `import anthropic` fail

    with pytest.raises(ConfigError) as caught:
        AnthropicChatModel("claude-test", api_key="k")

    hint = install_hint("anthropic")
    assert str(caught.value) == f"the Anthropic SDK is not installed: {hint}"


# -- the error table ------------------------------------------------------------------------


def is_class(value: object) -> bool:
    # Not `inspect.isclass`: its isinstance check makes the SDK's lazy `resources` proxy import
    # every resource module, which takes seconds. A proxy's own type is not a class.
    return issubclass(type(value), type)


def test_every_exception_the_sdk_exports_has_an_explicit_entry() -> None:
    exported = [
        cls
        for name, cls in inspect.getmembers(anthropic, is_class)
        if issubclass(cls, anthropic.AnthropicError) and not name.startswith("_")
    ]

    assert len(exported) >= 48
    assert [cls.__name__ for cls in exported if cls not in adapter._error_table()] == []


@pytest.mark.parametrize(
    ("sdk_class", "harness_class"),
    [
        (anthropic.RateLimitError, RateLimitError),
        (anthropic.EnforcedSpendLimitReachedError, RateLimitError),
        (anthropic.BadRequestError, ModelError),
        (anthropic.OverloadedError, ModelError),
        (anthropic.APITimeoutError, ModelError),
        # Raised by the SDK but not exported: resolved through the MRO to NotFoundError.
        (anthropic.types.ThreadNotFoundError, ModelError),
        (httpx2.ReadError, ModelError),
        (ValueError, None),
    ],
)
def test_classes_resolve_through_their_mro(
    sdk_class: type[BaseException], harness_class: type[ModelError] | None
) -> None:
    assert nearest_error_class(sdk_class, adapter._error_table()) is harness_class


async def test_system_blocks_are_joined_as_paragraphs_when_none_is_cached(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    system = Msg(role="system", content=[TextBlock(text="You help."), TextBlock(text="## Rules")])
    server.queue_stream([message_start(5), *message_end("end_turn", 1)])

    await collect(model, [system, Msg(role="user", content="hi")])

    assert server.requests[0].body["system"] == "You help.\n\n## Rules"


# -- prompt caching -----------------------------------------------------------------------------

LONG = "word " * 1200  # about 1,500 tokens by the adapter's estimate: above every minimum


def marks(body: dict[str, Any]) -> list[str]:
    """Where a request's cache breakpoints are: ``tools[i]``, ``system[i]``, ``messages[i][j]``."""
    found = [
        f"tools[{i}]" for i, tool in enumerate(body.get("tools", [])) if "cache_control" in tool
    ]
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, block in enumerate(system) if "cache_control" in block]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list):
            found += [f"messages[{i}][{j}]" for j, b in enumerate(content) if "cache_control" in b]
    return found


def conversation_with_tool_turns() -> list[Msg]:
    system = Msg(
        role="system",
        content=[TextBlock(text=LONG), TextBlock(text="user part"), TextBlock(text="session")],
        metadata={CACHE_PREFIX_BLOCKS: 1},
    )
    call = ToolUseBlock(id="t1", name="now", input={})
    return [
        system,
        Msg(role="user", content="What time is it?"),
        Msg(role="assistant", content=[call]),
        Msg.tool_result(ToolResultBlock(id="t1", name="now", output="12:00")),
    ]


async def test_breakpoints_end_the_shared_prefix_the_system_and_the_last_two_requests(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    server.queue_stream(text_events("ok"))

    await collect(model, conversation_with_tool_turns(), [CLOCK])

    body = server.requests[0].body
    # shared system block, whole system, the previous request's end, the newest turn: four
    assert marks(body) == ["system[0]", "system[2]", "messages[0][0]", "messages[2][0]"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert [block["text"] for block in body["system"]] == [LONG, "user part", "session"]


async def test_without_a_shared_prefix_the_tools_are_marked(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    tool = ToolSchema(name="big", description=LONG)
    server.queue_stream(text_events("ok"))

    await collect(
        model, [Msg(role="system", content="Be brief."), Msg(role="user", content="Hi")], [tool]
    )

    assert marks(server.requests[0].body) == ["tools[0]", "system[0]", "messages[0][0]"]


async def test_no_breakpoint_ends_a_prefix_below_the_minimum(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    messages = conversation_with_tool_turns()
    messages[0] = Msg(role="system", content="Be brief.", metadata={CACHE_PREFIX_BLOCKS: 1})
    server.queue_stream(text_events("ok"))

    await collect(model, messages, [CLOCK])

    body = server.requests[0].body
    assert marks(body) == []
    assert body["system"] == "Be brief."


async def test_caching_off_sends_no_breakpoint(server: AnthropicServer) -> None:
    model = AnthropicChatModel(
        "claude-test", api_key="sk-ant-test", base_url=server.url, prompt_caching=False
    )
    server.queue_stream(text_events("ok"))
    try:
        await collect(model, conversation_with_tool_turns(), [CLOCK])
    finally:
        await model.aclose()

    body = server.requests[0].body
    assert marks(body) == []
    assert body["system"] == f"{LONG}\n\nuser part\n\nsession"


async def test_at_most_four_breakpoints_however_long_the_conversation(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    messages = conversation_with_tool_turns()
    for n in range(2, 30):
        messages.append(Msg(role="assistant", content=[ToolUseBlock(id=f"t{n}", name="now")]))
        messages.append(Msg.tool_result(ToolResultBlock(id=f"t{n}", name="now", output=LONG)))
    server.queue_stream(text_events("ok"))

    await collect(model, messages, [CLOCK])

    body = server.requests[0].body
    found = marks(body)
    last = len(body["messages"]) - 1
    assert len(found) == 4
    assert found[-2:] == [f"messages[{last - 2}][0]", f"messages[{last}][0]"]


async def test_each_step_reads_where_the_previous_one_wrote(
    model: AnthropicChatModel, server: AnthropicServer
) -> None:
    first = conversation_with_tool_turns()
    second = [
        *first,
        Msg(role="assistant", content=[ToolUseBlock(id="t2", name="now")]),
        Msg.tool_result(ToolResultBlock(id="t2", name="now", output="12:01")),
    ]
    server.queue_stream(text_events("ok"))
    server.queue_stream(text_events("ok"))

    await collect(model, first, [CLOCK])
    await collect(model, second, [CLOCK])

    newest_then = marks(server.requests[0].body)[-1]
    assert newest_then in marks(server.requests[1].body)[:-1]
