"""An adapter for OpenAI's chat-completions API and the many servers that copy it.

:class:`OpenAIChatModel` speaks the chat-completions protocol through the official ``openai``
SDK, so it works with OpenAI itself and with OpenAI-compatible servers (vLLM, llama.cpp,
Ollama, LiteLLM, ...) given their ``base_url``.

Messages, Harness to OpenAI
    - ``system`` and ``user`` messages send their text. A user message with images sends a list
      of ``text`` and ``image_url`` parts in block order; base64 images become ``data:`` URLs.
    - ``assistant`` messages send their text, and their :class:`~harness.kernel.ToolUseBlock`
      s as ``tool_calls`` whose ``arguments`` are JSON strings. An assistant message with only
      tool calls sends ``content: ""`` rather than ``null``, which some servers reject.
    - Each :class:`~harness.kernel.ToolResultBlock` becomes one ``tool`` message
      (``tool_call_id`` and the result's text). Chat completions carries only text in tool
      messages, so image parts of a tool result are not sent.
    - Thinking blocks are dropped: the protocol has no field to send them back in. Message
      ``name`` s are not sent either, because many compatible servers reject the field.
    - Tools become ``{"type": "function", "function": {name, description, parameters}}``; the
      ``tools`` field is left out when there are none.

Answers, OpenAI to Harness
    - Streaming (the default) asks for ``stream_options.include_usage``. Text deltas are yielded
      as :class:`~harness.kernel.ChatChunk` s as they arrive; tool-call deltas are gathered by
      their ``index`` (id, name, argument fragments) and become
      :class:`~harness.kernel.ToolUseBlock` s when the stream ends. A refusal is treated as text.
      ``reasoning_content`` / ``reasoning`` deltas, which several compatible servers send, are
      yielded as thinking and kept as a :class:`~harness.kernel.ThinkingBlock`.
    - Tool-call arguments that are not a JSON object do not raise: the call keeps the raw text
      as ``{"__invalid_arguments__": "<raw text>"}``. No tool accepts that key, so the toolkit
      answers with an error result that quotes it, and the model can try again.
    - ``usage`` is the server's ``prompt_tokens`` / ``completion_tokens``, with
      ``prompt_tokens_details.cached_tokens`` as the cache reads (OpenAI caches the longest
      prefix it has seen, from 1,024 tokens on, by itself), or ``None`` when the server sends
      none. ``stop_reason`` is the server's ``finish_reason`` as given.
    - A stream that ends before a single chunk arrives is never taken for an empty answer.
      llama.cpp's server does that whenever the request fails after its HTTP 200 (tool calls
      with ``tool_choice="auto"``, which it cannot stream; a prompt over its context), or cuts
      the connection. So such a request is sent once more without streaming
      (``stream_fallback``, on by default), which gets the answer or the real error, such as
      the ``context_length_exceeded`` 400 that the overflow recovery needs. With
      ``stream_fallback=False`` it raises :class:`~harness.errors.ModelError`.

Errors
    :func:`_map_errors` is the one place where SDK exceptions become Harness exceptions. It
    looks up the exception's class, walking its MRO, in :data:`_ERRORS`, which names every
    exception class the SDK exports (a test checks that), then:

    - a failure whose code, message or body describes a context overflow
      (:func:`~harness.models.looks_like_context_overflow`) → ``ContextOverflowError``;
    - ``openai.RateLimitError`` (HTTP 429, after the SDK's own retries) → ``RateLimitError``;
    - everything else → ``ModelError``, naming the model, the HTTP status when there is one and
      the provider's message.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionContentPartParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from harness.errors import ConfigError, ContextOverflowError, ModelError, RateLimitError
from harness.kernel import (
    CACHE_KEY,
    ChatChunk,
    ChatResponse,
    ContentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
    new_id,
)
from harness.models._overflow import looks_like_context_overflow, overflow_error
from harness.models._shared import (
    SDKChatModel,
    checked_options,
    nearest_error_class,
    parse_tool_arguments,
    system_text,
)

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger(__name__)

_OPENAI_HOST: Final = "api.openai.com"

_RESERVED_OPTIONS: Final = frozenset({"model", "messages", "tools", "stream", "stream_options"})
_OUTPUT_LIMITS: Final = frozenset({"max_tokens", "max_completion_tokens"})
"""The two names of the answer's token limit; a per-call one replaces a default of either."""

# Every exception class the SDK exports has its own entry, so a reader sees how each one is
# treated; the MRO walk in `_map_errors` only matters for classes the SDK does not export or
# adds later, which land on their nearest listed base. `json.JSONDecodeError` is here because
# the SDK parses each SSE event with `json.loads` and lets a malformed event escape as is.
_ERRORS: Final[Mapping[type[Exception], type[ModelError]]] = {
    openai.RateLimitError: RateLimitError,
    openai.BadRequestError: ModelError,
    openai.AuthenticationError: ModelError,
    openai.OAuthError: ModelError,
    openai.PermissionDeniedError: ModelError,
    openai.NotFoundError: ModelError,
    openai.ConflictError: ModelError,
    openai.UnprocessableEntityError: ModelError,
    openai.InternalServerError: ModelError,
    openai.APIStatusError: ModelError,
    openai.APITimeoutError: ModelError,
    openai.APIConnectionError: ModelError,
    openai.APIResponseValidationError: ModelError,
    openai.APIError: ModelError,
    openai.LengthFinishReasonError: ModelError,
    openai.ContentFilterFinishReasonError: ModelError,
    openai.WebSocketConnectionClosedError: ModelError,
    openai.WebSocketQueueFullError: ModelError,
    openai.OpenAIError: ModelError,
    json.JSONDecodeError: ModelError,
}


class OpenAIChatModel(SDKChatModel["openai.AsyncOpenAI"]):
    """A chat model served over the OpenAI chat-completions API.

    Args:
        model: The model name the server knows (``gpt-4o-mini``, ``qwen2.5-7b-instruct``, ...).
        api_key: The API key; defaults to ``OPENAI_API_KEY``. Local servers accept any value.
        base_url: The API root, such as ``http://localhost:8000/v1``; defaults to
            ``OPENAI_BASE_URL``, then to OpenAI's own endpoint.
        stream: Stream answers (the default). ``False`` makes one plain request per call, for
            servers whose streaming is broken or missing.
        stream_fallback: When a stream ends without any data, ask once more without streaming
            (the default) instead of raising; llama.cpp's server streams nothing when a request
            fails after its HTTP 200.
        max_retries: How often the SDK retries connection errors, 408, 409, 429 and 5xx.
        timeout: Seconds before one request attempt times out.
        options: Default request fields (``temperature``, ``max_tokens``, ``top_p``, ...).
            Options passed to :meth:`stream` override them. They are sent as JSON body fields
            as given, so fields that only some compatible servers know pass through too.
        prompt_cache_key: Send the system message's ``CACHE_KEY`` (one per agent and user) as
            ``prompt_cache_key``, which routes a user's requests to the servers that hold their
            cached prefix. ``None`` (the default) sends it only to OpenAI's own endpoint, since
            a compatible server may refuse a field it does not know; an option of that name
            sent per call or by default wins.

    Raises:
        ConfigError: No API key was given and ``OPENAI_API_KEY`` is not set.
        ValueError: ``options`` sets a field the adapter controls (``model``, ``messages``,
            ``tools``, ``stream``, ``stream_options``).

    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        stream_fallback: bool = True,
        max_retries: int = 2,
        timeout: float = 120.0,
        options: Mapping[str, Any] | None = None,
        prompt_cache_key: bool | None = None,
    ) -> None:
        if not model:
            msg = "model must be a non-empty model name"
            raise ValueError(msg)
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            msg = (
                "no OpenAI API key: pass api_key or set OPENAI_API_KEY (any non-empty value "
                "works for a local OpenAI-compatible server)"
            )
            raise ConfigError(msg)
        super().__init__(
            model,
            openai.AsyncOpenAI(
                api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout
            ),
        )
        self._stream = stream
        self._stream_fallback = stream_fallback
        self._options = checked_options(options or {}, _RESERVED_OPTIONS)
        if prompt_cache_key is None:
            prompt_cache_key = urlsplit(self.base_url).hostname == _OPENAI_HOST
        self._send_cache_key = prompt_cache_key

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        """Send the conversation and yield text deltas, then one :class:`ChatResponse`.

        Args:
            messages: The conversation, system prompt included.
            tools: The tools the model may call.
            **options: Request fields for this call only; they override the defaults.

        Raises:
            ContextOverflowError: The conversation does not fit the model's context window.
            RateLimitError: The server kept answering 429 after the SDK's retries.
            ModelError: Any other failure, including a stream that ended with no data.

        """
        per_call = checked_options(options, _RESERVED_OPTIONS)
        defaults = self._options
        if per_call.keys() & _OUTPUT_LIMITS:  # one limit for this call, under either name
            defaults = {k: v for k, v in defaults.items() if k not in _OUTPUT_LIMITS}
        body = {**defaults, **per_call}
        if self._send_cache_key and "prompt_cache_key" not in body:
            system = next((m for m in messages if m.role == "system"), None)
            key = system.metadata.get(CACHE_KEY) if system is not None else None
            if isinstance(key, str) and key:
                body["prompt_cache_key"] = key
        wire_messages = _to_openai_messages(messages)
        wire_tools = _to_openai_tools(tools)
        choice = body.pop("tool_choice", None)  # meaningless, and refused, without tools
        tool_choice = choice if wire_tools and choice is not None else openai.omit
        request: dict[str, Any] = {
            "model": self._model,
            "messages": wire_messages,
            "tools": wire_tools if wire_tools else openai.omit,
            "tool_choice": tool_choice,
            "extra_body": body or None,
        }
        with _map_errors(self._model, self.base_url):
            if not self._stream:
                yield await self._complete(request)
                return
            answer = _StreamedAnswer(model=self._model)
            try:
                stream = await self._client.chat.completions.create(
                    **request, stream=True, stream_options={"include_usage": True}
                )
                async with stream:
                    async for chunk in stream:
                        for delta in answer.add(chunk):
                            yield delta
            except openai.APITimeoutError:
                raise
            except openai.APIConnectionError:
                # A failing llama.cpp server may cut the connection rather than close the
                # stream, before or after its HTTP 200: with nothing received, that is the same
                # empty stream. (A server that cannot be reached fails the plain request too.)
                if answer.received_any or not self._stream_fallback:
                    raise
            if not answer.received_any and self._stream_fallback:
                logger.info(
                    "%s: the stream ended without any data; asking again without streaming",
                    self._model,
                )
                yield await self._complete(request)
                return
        if not answer.received_any:
            msg = (
                f"OpenAI model {self._model!r}: the stream ended without any data (some servers "
                "cannot stream every request, e.g. llama.cpp with tools and tool_choice auto; "
                "pass stream_fallback=True to ask again without streaming)"
            )
            raise ModelError(msg)
        yield answer.response()

    async def _complete(self, request: Mapping[str, Any]) -> ChatResponse:
        """One request without streaming."""
        completion = await self._client.chat.completions.create(**request, stream=False)
        return self._from_completion(completion)

    def _from_completion(self, completion: ChatCompletion) -> ChatResponse:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            msg = f"OpenAI model {self._model!r}: the response has no choices"
            raise ModelError(msg)
        message = choices[0].message
        content: list[ContentBlock] = []
        thinking = _reasoning_text(message)
        if thinking:
            content.append(ThinkingBlock(thinking=thinking))
        text = (message.content or "") + (message.refusal or "")
        if text:
            content.append(TextBlock(text=text))
        for call in message.tool_calls or []:
            if call.type != "function":
                logger.warning("ignoring a %r tool call from %s", call.type, self._model)
                continue
            content.append(_tool_use(call.id, call.function.name, call.function.arguments))
        return ChatResponse(
            content=content,
            usage=_usage(completion.usage),
            model=getattr(completion, "model", None) or self._model,
            stop_reason=choices[0].finish_reason,
        )


# -- requests -----------------------------------------------------------------------------------


def _to_openai_messages(messages: Sequence[Msg]) -> list[ChatCompletionMessageParam]:
    """Encode a conversation as chat-completions messages (see the module docstring)."""
    wire: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message.role == "system":
            wire.append({"role": "system", "content": system_text(message)})
        elif message.role == "user":
            wire.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": use.id,
                    "type": "function",
                    "function": {
                        "name": use.name,
                        "arguments": json.dumps(use.input, ensure_ascii=False),
                    },
                }
                for use in message.tool_uses
            ]
            if calls:
                wire.append({"role": "assistant", "content": message.text, "tool_calls": calls})
            else:
                wire.append({"role": "assistant", "content": message.text})
        else:
            for result in message.tool_results:
                wire.append({"role": "tool", "tool_call_id": result.id, "content": result.text})
    return wire


def _user_content(message: Msg) -> str | list[ChatCompletionContentPartParam]:
    if not any(isinstance(block, ImageBlock) for block in message.content):
        return message.text
    parts: list[ChatCompletionContentPartParam] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            url = _image_url(block)
            if url is not None:
                parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _image_url(image: ImageBlock) -> str | None:
    if image.url:
        return image.url
    if image.data:
        return f"data:{image.media_type or 'image/png'};base64,{image.data}"
    return None


def _to_openai_tools(tools: Sequence[ToolSchema]) -> list[ChatCompletionFunctionToolParam]:
    """Encode tool schemas as chat-completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


# -- answers ------------------------------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamedAnswer:
    """Accumulates the chunks of one streamed answer (the first choice only)."""

    model: str
    received_any: bool = False
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage | None = None
    stop_reason: str | None = None

    def add(self, chunk: ChatCompletionChunk) -> list[ChatChunk]:
        """Take in one chunk; return the deltas to show."""
        self.received_any = True
        self.model = getattr(chunk, "model", None) or self.model
        usage = _usage(getattr(chunk, "usage", None))
        if usage is not None:
            self.usage = usage
        deltas: list[ChatChunk] = []
        for choice in getattr(chunk, "choices", None) or []:
            if choice.index not in (0, None):
                continue
            if choice.finish_reason:
                self.stop_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            thinking = _reasoning_text(delta)
            if thinking:
                self.thinking.append(thinking)
                deltas.append(ChatChunk(thinking=thinking))
            text = (delta.content or "") + (delta.refusal or "")
            if text:
                self.text.append(text)
                deltas.append(ChatChunk(text=text))
            for call in delta.tool_calls or []:
                # A server that omits `index` sends each call whole, so each is a new call.
                index = call.index if call.index is not None else len(self.calls)
                partial = self.calls.setdefault(index, _PartialCall())
                if call.id:
                    partial.id = call.id
                if call.function is not None:
                    if call.function.name:
                        partial.name = call.function.name
                    if call.function.arguments:
                        partial.arguments.append(call.function.arguments)
        return deltas

    def response(self) -> ChatResponse:
        content: list[ContentBlock] = []
        if self.thinking:
            content.append(ThinkingBlock(thinking="".join(self.thinking)))
        if self.text:
            content.append(TextBlock(text="".join(self.text)))
        for _, call in sorted(self.calls.items()):
            content.append(_tool_use(call.id, call.name, "".join(call.arguments)))
        return ChatResponse(
            content=content, usage=self.usage, model=self.model, stop_reason=self.stop_reason
        )


def _tool_use(call_id: str | None, name: str, arguments: str) -> ToolUseBlock:
    return ToolUseBlock(
        id=call_id or f"call_{new_id()}", name=name, input=parse_tool_arguments(arguments, name)
    )


def _reasoning_text(delta: object) -> str:
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage(usage: object) -> Usage | None:
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if isinstance(prompt, int) and isinstance(completion, int):
        cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
        reads = cached if isinstance(cached, int) and 0 < cached <= prompt else 0
        return Usage(prompt, completion, cache_read_tokens=reads)
    return None


# -- errors -------------------------------------------------------------------------------------


@contextmanager
def _map_errors(model: str, base_url: str) -> Iterator[None]:
    """Translate SDK exceptions raised in the block into Harness exceptions (module docstring)."""
    try:
        yield
    except tuple(_ERRORS) as exc:
        raise _translate(exc, model, base_url) from exc


def _translate(exc: Exception, model: str, base_url: str) -> ModelError:
    cls = nearest_error_class(type(exc), _ERRORS) or ModelError
    body = getattr(exc, "body", None)
    detail = _provider_message(exc, body)
    if cls is ModelError and looks_like_context_overflow(getattr(exc, "code", None), detail, body):
        cls = ContextOverflowError
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        message = f"OpenAI model {model!r} failed with HTTP {status}: {detail}"
    elif isinstance(exc, openai.APIConnectionError):
        message = f"OpenAI model {model!r}: cannot reach {base_url}: {detail}"
    else:
        message = f"OpenAI model {model!r} failed: {detail}"
    if cls is ContextOverflowError:  # with the sizes the server stated, when it did
        return overflow_error(message, detail, body)
    return cls(message)


def _provider_message(exc: Exception, body: object) -> str:
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    text = str(getattr(exc, "message", None) or exc or type(exc).__name__)
    cause = exc.__cause__
    if isinstance(exc, openai.APIConnectionError) and cause is not None:
        text = f"{text} ({type(cause).__name__}: {cause})"
    return text
