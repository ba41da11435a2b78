"""OpenAIChatModel against a local chat-completions server, through the real ``openai`` SDK."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import openai
import pytest

from _servers import OpenAIServer, Reply, running
from harness.context import RuntimeContext
from harness.errors import ConfigError, ContextOverflowError, ModelError, RateLimitError
from harness.kernel import (
    CACHE_KEY,
    ChatChunk,
    ChatResponse,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    Toolkit,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
)
from harness.models import openai as adapter
from harness.models._shared import nearest_error_class
from harness.models.openai import OpenAIChatModel

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
)
HI = [Msg(role="system", content="Be brief."), Msg(role="user", content="Hi")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def running_server() -> Iterator[OpenAIServer]:
    with running(OpenAIServer()) as server:
        yield server


@pytest.fixture
def server(running_server: OpenAIServer) -> OpenAIServer:
    running_server.reset()
    return running_server


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    model = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=f"{server.url}/v1")
    yield model
    await model.aclose()


async def collect(
    model: OpenAIChatModel,
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


def text_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def tool_chunk(
    index: int,
    arguments: str,
    *,
    call_id: str | None = None,
    name: str | None = None,
    finish: str | None = None,
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    call: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        call |= {"id": call_id, "type": "function"}
        function["name"] = name
    delta = {"tool_calls": [call]}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": usage | {"total_tokens": prompt + completion}}


# -- streaming ------------------------------------------------------------------------------


async def test_streamed_text_arrives_as_chunks_then_one_response(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream(
        [
            text_chunk("Hel"),
            text_chunk("lo"),
            text_chunk(" world", finish="stop"),
            usage_chunk(12, 3),
        ]
    )

    chunks, response = await collect(model)

    assert chunks == [ChatChunk(text="Hel"), ChatChunk(text="lo"), ChatChunk(text=" world")]
    assert response == ChatResponse(
        content=[TextBlock(text="Hello world")],
        usage=Usage(12, 3),
        model="gpt-test-2024",
        stop_reason="stop",
    )
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_streamed_tool_calls_are_reassembled_from_fragments(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream(
        [
            text_chunk("Checking."),
            tool_chunk(0, "", call_id="call_a", name="get_weather"),
            tool_chunk(0, '{"ci'),
            tool_chunk(0, 'ty": "Par'),
            tool_chunk(1, '{"city": ', call_id="call_b", name="get_weather"),
            tool_chunk(0, 'is"}'),
            tool_chunk(1, '"Oslo", "unit": "C"}', finish="tool_calls"),
            usage_chunk(40, 22),
        ]
    )

    chunks, response = await collect(model, tools=[WEATHER])

    assert chunks == [ChatChunk(text="Checking.")]
    assert response == ChatResponse(
        content=[
            TextBlock(text="Checking."),
            ToolUseBlock(id="call_a", name="get_weather", input={"city": "Paris"}),
            ToolUseBlock(id="call_b", name="get_weather", input={"city": "Oslo", "unit": "C"}),
        ],
        usage=Usage(40, 22),
        model="gpt-test-2024",
        stop_reason="tool_calls",
    )
    assert server.bodies[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]


async def test_follow_up_turn_encodes_tool_calls_and_results(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream([text_chunk("Sunny in Paris, snow in Oslo.", finish="stop")])
    conversation = [
        Msg(role="system", content="Be brief."),
        Msg(role="user", content="Weather in Paris and Oslo?"),
        Msg(
            role="assistant",
            content=[
                ThinkingBlock(thinking="Two cities, two calls.", signature="sig"),
                ToolUseBlock(id="call_a", name="get_weather", input={"city": "Paris"}),
                ToolUseBlock(id="call_b", name="get_weather", input={"city": "Oslo"}),
            ],
        ),
        Msg.tool_result(ToolResultBlock(id="call_a", name="get_weather", output="sunny, 24°C")),
        Msg.tool_result(
            ToolResultBlock(
                id="call_b",
                name="get_weather",
                output=[TextBlock(text="snow, "), TextBlock(text="-3°C")],
                is_error=False,
            )
        ),
        Msg(
            role="assistant",
            content=[
                TextBlock(text="Let me check a third."),
                ToolUseBlock(id="call_c", name="get_weather", input={}),
            ],
        ),
        Msg.tool_result(
            ToolResultBlock(id="call_c", name="get_weather", output="Error: no city", is_error=True)
        ),
    ]

    await collect(model, conversation, [WEATHER])

    assert server.bodies[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny, 24°C"},
        {"role": "tool", "tool_call_id": "call_b", "content": "snow, -3°C"},
        {
            "role": "assistant",
            "content": "Let me check a third.",
            "tool_calls": [
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": "Error: no city"},
    ]


async def test_user_images_become_image_url_parts(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream([text_chunk("Two cats.", finish="stop")])
    message = Msg(
        role="user",
        content=[
            TextBlock(text="What is in these?"),
            ImageBlock(url="https://example.com/cat.png"),
            ImageBlock(data="aGVsbG8=", media_type="image/jpeg"),
        ],
    )

    await collect(model, [message])

    assert server.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,aGVsbG8="}},
            ],
        }
    ]


async def test_usage_is_none_when_the_server_sends_none(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream([text_chunk("ok", finish="stop")])

    _, response = await collect(model)

    assert response.usage is None


async def test_reasoning_deltas_become_thinking(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream(
        [
            {"choices": [{"index": 0, "delta": {"reasoning_content": "Hmm, "}}]},
            {"choices": [{"index": 0, "delta": {"reasoning_content": "easy."}}]},
            text_chunk("4", finish="stop"),
        ]
    )

    chunks, response = await collect(model)

    assert chunks == [
        ChatChunk(thinking="Hmm, "),
        ChatChunk(thinking="easy."),
        ChatChunk(text="4"),
    ]
    assert response.content == [ThinkingBlock(thinking="Hmm, easy."), TextBlock(text="4")]


async def test_invalid_tool_arguments_become_a_tool_error_not_a_crash(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream(
        [
            tool_chunk(0, '{"city": "Par', call_id="call_a", name="get_weather"),
            tool_chunk(0, "", finish="tool_calls"),
        ]
    )

    _, response = await collect(model, tools=[WEATHER])

    call = ToolUseBlock(
        id="call_a", name="get_weather", input={"__invalid_arguments__": '{"city": "Par'}
    )
    assert response.content == [call]

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    result = await Toolkit([get_weather]).call(call, RuntimeContext())
    assert result.is_error
    assert result.text == (
        "Error: the arguments of tool 'get_weather' are not a JSON object: '{\"city\": \"Par'; "
        "call it again with a JSON object that matches its schema"
    )


async def test_options_are_sent_and_per_call_options_win(server: OpenAIServer) -> None:
    model = OpenAIChatModel(
        "gpt-test",
        api_key="sk-test",
        base_url=f"{server.url}/v1",
        options={"temperature": 0.2, "max_tokens": 100},
    )
    server.queue_stream([text_chunk("ok", finish="stop")])

    await collect(model, temperature=0.9, top_k=5)
    await model.aclose()

    body = server.bodies[0]
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.9, 100, 5)


async def test_tool_choice_is_sent_only_with_tools(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_stream([text_chunk("a", finish="stop")])
    server.queue_stream([text_chunk("b", finish="stop")])

    await collect(model, tools=[WEATHER], tool_choice="none")
    await collect(model, tool_choice="none")

    with_tools, without = server.bodies
    assert with_tools["tool_choice"] == "none"
    assert "tool_choice" not in without
    assert "tools" not in without


def test_options_may_not_replace_fields_the_adapter_sets() -> None:
    with pytest.raises(ValueError, match=r"^options cannot set messages, stream: "):
        OpenAIChatModel("gpt-test", api_key="k", options={"stream": False, "messages": []})


@pytest.mark.parametrize("body", [b"", b"data: [DONE]\n\n"], ids=["closed", "done-only"])
async def test_a_stream_without_any_chunk_raises_without_the_fallback(
    server: OpenAIServer, body: bytes
) -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", stream_fallback=False
    )
    server.queue_raw_stream(body)

    with pytest.raises(ModelError) as caught:
        await collect(model)
    await model.aclose()

    assert type(caught.value) is ModelError
    assert str(caught.value).startswith(
        "OpenAI model 'gpt-test': the stream ended without any data"
    )
    assert "stream_fallback=True" in str(caught.value)


def plain_completion(text: str) -> dict[str, Any]:
    """A chat completion answered without streaming: one choice with ``text``."""
    return {
        "id": "chatcmpl-plain",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
    }


async def test_a_stream_cut_before_any_chunk_is_asked_again_without_streaming(
    server: OpenAIServer,
) -> None:
    model = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=f"{server.url}/v1")
    # A body shorter than its Content-Length: the connection ends in the middle of the response.
    server.queue(
        Reply(200, b"data: ", {"content-type": "text/event-stream", "content-length": "99"})
    )
    server.queue_json(plain_completion("After the cut."))

    chunks, response = await collect(model)
    await model.aclose()

    assert chunks == []
    assert response.content == [TextBlock(text="After the cut.")]
    assert [body["stream"] for body in server.bodies] == [True, False]


async def test_an_empty_stream_is_asked_again_without_streaming_by_default(
    server: OpenAIServer,
) -> None:
    # What llama.cpp's server does with tools and tool_choice "auto", or with a prompt over its
    # context: 200, then nothing. Asked again without streaming, it answers or says what is wrong.
    model = OpenAIChatModel("gpt-test", api_key="sk-test", base_url=f"{server.url}/v1")
    server.queue_raw_stream(b"")
    server.queue_json(plain_completion("Answered plainly."))

    chunks, response = await collect(model)
    await model.aclose()

    assert chunks == []
    assert response.content == [TextBlock(text="Answered plainly.")]
    first, second = server.bodies
    assert first["stream"] is True
    assert second.get("stream") in (False, None)
    assert second["messages"] == first["messages"]


# -- non-streaming mode -----------------------------------------------------------------------


async def test_non_streaming_mode_yields_one_response(server: OpenAIServer) -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", stream=False
    )
    server.queue_json(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "gpt-test-0613",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "Looking it up.",
                        "tool_calls": [
                            {
                                "id": "call_a",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
        }
    )

    items = [item async for item in model.stream(HI, [WEATHER])]
    await model.aclose()

    assert items == [
        ChatResponse(
            content=[
                TextBlock(text="Looking it up."),
                ToolUseBlock(id="call_a", name="get_weather", input={"city": "Rome"}),
            ],
            usage=Usage(30, 9),
            model="gpt-test-0613",
            stop_reason="tool_calls",
        )
    ]
    body = server.bodies[0]
    assert body["stream"] is False
    assert "stream_options" not in body


# -- errors ---------------------------------------------------------------------------------


async def test_context_overflow_maps_to_context_overflow_error(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens.",
        code="context_length_exceeded",
    )

    with pytest.raises(ContextOverflowError) as caught:
        await collect(model)

    assert str(caught.value) == (
        "OpenAI model 'gpt-test' failed with HTTP 400: This model's maximum context length is "
        "8192 tokens. However, your messages resulted in 9000 tokens."
    )
    assert (caught.value.requested_tokens, caught.value.limit_tokens) == (9000, 8192)
    assert isinstance(caught.value.__cause__, openai.BadRequestError)
    assert len(server.requests) == 1


async def test_overflow_is_recognized_by_its_code_alone(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_error(400, "Input rejected.", code="context_length_exceeded")

    with pytest.raises(ContextOverflowError):
        await collect(model)


async def test_an_error_event_inside_the_stream_is_mapped(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    error = {"error": {"message": "prompt is too long for this server", "code": None}}
    server.queue_raw_stream(f"data: {json.dumps(error)}\n\n".encode())

    with pytest.raises(ContextOverflowError) as caught:
        await collect(model)

    assert str(caught.value) == (
        "OpenAI model 'gpt-test' failed: prompt is too long for this server"
    )


async def test_a_429_is_retried_by_the_sdk(model: OpenAIChatModel, server: OpenAIServer) -> None:
    server.queue_error(429, "Rate limit reached, retry in 1ms.")
    server.queue_stream([text_chunk("Hello", finish="stop"), usage_chunk(5, 1)])

    _, response = await collect(model)

    assert response.content == [TextBlock(text="Hello")]
    assert response.usage == Usage(5, 1)
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert server.bodies[0] == server.bodies[1]


async def test_a_429_that_persists_is_a_rate_limit_error(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    for _ in range(3):
        server.queue_error(429, "You exceeded your current quota.", code="insufficient_quota")

    with pytest.raises(RateLimitError) as caught:
        await collect(model)

    assert str(caught.value) == (
        "OpenAI model 'gpt-test' failed with HTTP 429: You exceeded your current quota."
    )
    assert isinstance(caught.value.__cause__, openai.RateLimitError)
    assert len(server.requests) == 3  # the first try and max_retries=2


async def test_a_500_is_a_model_error(server: OpenAIServer) -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0
    )
    server.queue_error(500, "The server had an error while processing your request.")

    with pytest.raises(ModelError) as caught:
        await collect(model)
    await model.aclose()

    assert type(caught.value) is ModelError
    assert str(caught.value) == (
        "OpenAI model 'gpt-test' failed with HTTP 500: "
        "The server had an error while processing your request."
    )
    assert isinstance(caught.value.__cause__, openai.InternalServerError)


async def test_a_non_json_error_body_is_quoted(server: OpenAIServer) -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0
    )
    server.queue(Reply(502, b"<html>Bad Gateway</html>", {"content-type": "text/html"}))

    with pytest.raises(ModelError) as caught:
        await collect(model)
    await model.aclose()

    assert str(caught.value) == (
        "OpenAI model 'gpt-test' failed with HTTP 502: <html>Bad Gateway</html>"
    )


async def test_a_malformed_stream_event_is_a_model_error(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    server.queue_raw_stream(b"data: {not json\n\n")

    with pytest.raises(ModelError) as caught:
        await collect(model)

    assert str(caught.value).startswith("OpenAI model 'gpt-test' failed: Expecting property name")


async def test_an_unreachable_server_is_a_model_error() -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url="http://127.0.0.1:9/v1", max_retries=0
    )

    with pytest.raises(ModelError) as caught:
        await collect(model)
    await model.aclose()

    assert str(caught.value).startswith(
        "OpenAI model 'gpt-test': cannot reach http://127.0.0.1:9/v1/: Connection error. ("
    )
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


def test_a_missing_api_key_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"^no OpenAI API key: pass api_key or set OPENAI_API_KEY"
    ):
        OpenAIChatModel("gpt-test")


def test_the_api_key_and_base_url_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8123/v1")

    model = OpenAIChatModel("gpt-test")

    assert model.base_url == "http://127.0.0.1:8123/v1/"
    assert model.model_name == "gpt-test"


# -- the error table ------------------------------------------------------------------------


def is_class(value: object) -> bool:
    # Not `inspect.isclass`: its isinstance check makes the SDK's lazy `resources` proxy import
    # every resource module, which takes seconds. A proxy's own type is not a class.
    return issubclass(type(value), type)


def exported_sdk_errors() -> list[type[BaseException]]:
    # Names starting with "_" are the SDK's private helpers, not part of what it exports.
    return [
        cls
        for name, cls in inspect.getmembers(openai, is_class)
        if issubclass(cls, openai.OpenAIError) and not name.startswith("_")
    ]


def test_every_exception_the_sdk_exports_has_an_explicit_entry() -> None:
    exported = exported_sdk_errors()

    assert len(exported) >= 19
    assert [cls.__name__ for cls in exported if cls not in adapter._ERRORS] == []


@pytest.mark.parametrize(
    ("sdk_class", "harness_class"),
    [
        (openai.RateLimitError, RateLimitError),
        (openai.BadRequestError, ModelError),
        (openai.OAuthError, ModelError),
        (openai.APITimeoutError, ModelError),
        (openai.InternalServerError, ModelError),
        # Not exported at the top level: resolved through its MRO to OpenAIError's entry.
        (openai._exceptions.SubjectTokenProviderError, ModelError),
        (ValueError, None),
    ],
)
def test_classes_resolve_through_their_mro(
    sdk_class: type[BaseException], harness_class: type[ModelError] | None
) -> None:
    assert nearest_error_class(sdk_class, adapter._ERRORS) is harness_class


def test_system_blocks_are_sent_as_paragraphs() -> None:
    # Hooks append sections as blocks; glued together, "## Heading" would end a sentence.
    system = Msg(role="system", content=[TextBlock(text="You help."), TextBlock(text="## Rules")])

    (wire,) = adapter._to_openai_messages([system])

    assert wire == {"role": "system", "content": "You help.\n\n## Rules"}


# -- prompt caching -----------------------------------------------------------------------------


async def test_cached_tokens_are_the_cache_reads_of_usage(
    model: OpenAIChatModel, server: OpenAIServer
) -> None:
    usage = usage_chunk(2048, 3)
    usage["usage"]["prompt_tokens_details"] = {"cached_tokens": 1920}
    server.queue_stream([text_chunk("Hello", finish="stop"), usage])

    _, response = await collect(model)

    assert response.usage == Usage(2048, 3, cache_read_tokens=1920)
    assert response.usage.uncached_input_tokens == 128


KEYED = [
    Msg(role="system", content="Be brief.", metadata={CACHE_KEY: "harness-0123abcd"}),
    Msg(role="user", content="Hi"),
]


@pytest.mark.parametrize(
    ("setting", "sent"), [(True, "harness-0123abcd"), (False, None), (None, None)]
)
async def test_the_prompt_cache_key_is_sent_when_asked(
    server: OpenAIServer, setting: bool | None, sent: str | None
) -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", prompt_cache_key=setting
    )
    server.queue_stream([text_chunk("Hello", finish="stop"), usage_chunk(5, 1)])
    try:
        await collect(model, KEYED)
    finally:
        await model.aclose()

    # None: only OpenAI's own endpoint gets it, and a local server is not that
    assert server.requests[0].body.get("prompt_cache_key") == sent


def test_openai_s_own_endpoint_gets_the_key_by_default() -> None:
    model = OpenAIChatModel("gpt-test", api_key="sk-test")
    assert model._send_cache_key
    local = OpenAIChatModel("gpt-test", api_key="sk-test", base_url="http://127.0.0.1:1/v1")
    assert not local._send_cache_key


async def test_a_prompt_cache_key_option_wins(server: OpenAIServer) -> None:
    model = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", prompt_cache_key=True
    )
    server.queue_stream([text_chunk("Hello", finish="stop"), usage_chunk(5, 1)])
    try:
        await collect(model, KEYED, prompt_cache_key="mine")
    finally:
        await model.aclose()

    assert server.requests[0].body["prompt_cache_key"] == "mine"
