"""An adapter for Anthropic's messages API.

:class:`AnthropicChatModel` streams answers through the official ``anthropic`` SDK, which is an
optional extra: it is imported when a model is constructed, and a missing install raises
:class:`~harness.errors.ConfigError` with the ``pip install`` line.

Messages, Harness to Anthropic
    - ``system`` messages, wherever they stand, are joined (blank line between) into the
      ``system`` parameter, which is the only place the API takes a system prompt.
    - ``user`` messages send their text and images (``base64`` or ``url`` sources).
    - ``assistant`` messages send thinking blocks that carry a ``signature`` (the API rejects
      unsigned ones, so those are dropped), their text, and their
      :class:`~harness.kernel.ToolUseBlock` s as ``tool_use`` blocks.
    - Each :class:`~harness.kernel.ToolResultBlock` becomes a ``tool_result`` block
      (``tool_use_id``, content, ``is_error``) in a ``user`` message.
    - Empty text blocks and messages left empty are not sent (the API rejects both), and
      consecutive messages of the same role are merged, because the API wants user and
      assistant turns to alternate. Tool results come first in a merged user turn, since the
      results of a ``tool_use`` turn must open the turn that follows it.
    - Tools become ``{name, description, input_schema}``; ``tools`` is left out when there are
      none.

Prompt caching (``prompt_caching=True``, the default)
    Anthropic caches a prompt prefix only up to a block marked with ``cache_control``, at most
    four marks a request, and only a prefix of at least ``cache_min_tokens`` (1,024 for most
    models, 2,048 or 4,096 for some: see the provider's table). :func:`_mark_cache_points`
    marks, of these, the ones whose prefix is long enough (estimated at four characters a
    token), so that each step reads what the one before wrote:

    - the end of the system blocks every user and session share (the first system message's
      ``CACHE_PREFIX_BLOCKS`` metadata), or, without that, the last tool;
    - the end of the system prompt;
    - the end of the previous request (the turn before the last assistant turn), where the
      last step wrote its entry: a step that adds more than twenty blocks (fifty tool results)
      is beyond the provider's lookback from the newest mark;
    - the end of the newest turn, which the next step reads.

    A system prompt with a mark is sent as a list of text blocks, one per block of the system
    messages, rather than as one string. ``usage`` reports the cache reads and writes.

Answers, Anthropic to Harness
    - Text and thinking deltas are yielded as :class:`~harness.kernel.ChatChunk` s as they
      arrive. Content blocks are gathered by their ``index``: text, thinking (with its
      signature) and ``tool_use`` blocks whose ``input_json_delta`` fragments are joined and
      parsed when the stream ends. Other block types (server tools, redacted thinking) are
      dropped, since Harness has no block to hold them.
    - Tool input that is not a JSON object does not raise: the call keeps the raw text as
      ``{"__invalid_arguments__": "<raw text>"}``, which the toolkit reports to the model as an
      error so it can try again.
    - ``usage`` comes from ``message_start`` and ``message_delta``: input tokens are the prompt's
      full size (``input_tokens`` plus cache writes and cache reads, as OpenAI counts them);
      output tokens are the final count. ``stop_reason`` is Anthropic's, as given.
    - A stream that ends before any event arrives raises :class:`~harness.errors.ModelError`.

Errors
    :func:`_map_errors` is the one place where SDK exceptions become Harness exceptions. It
    looks up the exception's class, walking its MRO, in :func:`_error_table`, which names every
    exception class the SDK exports (a test checks that), then:

    - a failure whose message or body describes a context overflow ("prompt is too long", see
      :func:`~harness.models.looks_like_context_overflow`) → ``ContextOverflowError``;
    - HTTP 429, including the spend-limit variants the SDK raises for it → ``RateLimitError``;
    - everything else → ``ModelError``, naming the model, the HTTP status when there is one and
      the provider's message.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, cast

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
    ContentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
)
from harness.models._overflow import looks_like_context_overflow, overflow_error
from harness.models._shared import (
    SDKChatModel,
    checked_options,
    nearest_error_class,
    parse_tool_arguments,
)

if TYPE_CHECKING:
    import anthropic  # noqa: F401 (named in the quoted base class below)
    from anthropic.types import (
        ContentBlockParam,
        ImageBlockParam,
        MessageParam,
        RawMessageStreamEvent,
        TextBlockParam,
        ToolParam,
    )

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicChatModel"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS: Final = 4096
"""The answer length cap sent when none is given; the messages API requires one."""

_RESERVED_OPTIONS: Final = frozenset({"model", "messages", "system", "tools", "stream"})

_ImageMediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]


class AnthropicChatModel(SDKChatModel["anthropic.AsyncAnthropic"]):
    """A Claude model served over Anthropic's messages API.

    Args:
        model: The model name, such as ``claude-sonnet-4-5``.
        api_key: The API key; by default the SDK resolves one (``ANTHROPIC_API_KEY`` first).
        base_url: The API root; defaults to ``ANTHROPIC_BASE_URL``, then to Anthropic's own.
        max_tokens: The longest answer to ask for; the API requires a cap. An option of the
            same name overrides it per call.
        max_retries: How often the SDK retries connection errors, 408, 409, 429 and 5xx.
        timeout: Seconds before one request attempt times out.
        options: Default request fields (``temperature``, ``thinking``, ``top_k``, ...).
            Options passed to :meth:`stream` override them. They are sent as JSON body fields
            as given.
        prompt_caching: Mark cache breakpoints (see the module docs); off sends none.
        cache_min_tokens: The model's shortest cacheable prefix: no mark ends a shorter one.

    Raises:
        ConfigError: The ``anthropic`` package is not installed.
        ValueError: ``options`` sets a field the adapter controls (``model``, ``messages``,
            ``system``, ``tools``, ``stream``).

    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_retries: int = 2,
        timeout: float = 120.0,
        options: Mapping[str, Any] | None = None,
        prompt_caching: bool = True,
        cache_min_tokens: int = 1024,
    ) -> None:
        if not model:
            msg = "model must be a non-empty model name"
            raise ValueError(msg)
        if cache_min_tokens < 0:
            msg = f"cache_min_tokens must be at least 0, got {cache_min_tokens}"
            raise ValueError(msg)
        if max_tokens < 1:
            msg = f"max_tokens must be at least 1, got {max_tokens}"
            raise ValueError(msg)
        try:
            import anthropic
        except ImportError as exc:
            msg = f"the Anthropic SDK is not installed: {install_hint('anthropic')}"
            raise ConfigError(msg) from exc
        super().__init__(
            model,
            anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
            ),
        )
        self._max_tokens = max_tokens
        self._options = checked_options(options or {}, _RESERVED_OPTIONS)
        self._cache_min_chars = cache_min_tokens * _CHARS_PER_TOKEN if prompt_caching else None

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        """Send the conversation and yield text and thinking deltas, then one response.

        Args:
            messages: The conversation, system prompt included.
            tools: The tools the model may call.
            **options: Request fields for this call only; they override the defaults.

        Raises:
            ContextOverflowError: The conversation does not fit the model's context window.
            RateLimitError: The API kept answering 429 after the SDK's retries.
            ModelError: Any other failure, including a stream that ended with no data.

        """
        import anthropic

        body = {**self._options, **checked_options(options, _RESERVED_OPTIONS)}
        max_tokens = int(body.pop("max_tokens", self._max_tokens))
        system, wire_messages = _to_anthropic_messages(messages)
        wire_tools = _to_anthropic_tools(tools)
        if self._cache_min_chars is not None:
            _mark_cache_points(
                wire_tools, system, wire_messages, _shared_blocks(messages), self._cache_min_chars
            )
        wire_system: str | list[TextBlockParam] = system
        if not any("cache_control" in block for block in system):
            wire_system = "\n\n".join(block["text"] for block in system)
        choice = body.pop("tool_choice", None)
        if wire_tools and choice is not None:
            body["tool_choice"] = _tool_choice(choice)
        answer = _StreamedAnswer(model=self._model)
        with _map_errors(self._model, self.base_url):
            stream = await self._client.messages.create(
                model=self._model,
                max_tokens=max_tokens,
                messages=wire_messages,
                system=wire_system if wire_system else anthropic.omit,
                tools=wire_tools if wire_tools else anthropic.omit,
                stream=True,
                extra_body=body or None,
            )
            async with stream:
                async for event in stream:
                    for delta in answer.add(event):
                        yield delta
        if not answer.received_any:
            msg = f"Anthropic model {self._model!r}: the stream ended without any data"
            raise ModelError(msg)
        yield answer.response()


# -- requests -----------------------------------------------------------------------------------


def _to_anthropic_messages(
    messages: Sequence[Msg],
) -> tuple[list[TextBlockParam], list[MessageParam]]:
    """Encode a conversation as the system blocks and alternating messages (module docs)."""
    system: list[TextBlockParam] = []
    turns: list[tuple[Literal["user", "assistant"], list[ContentBlockParam]]] = []
    for message in messages:
        if message.role == "system":
            system.extend(
                {"type": "text", "text": block.text}
                for block in message.content
                if isinstance(block, TextBlock) and block.text
            )
            continue
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            previous = turns[-1][1]
            if any(block["type"] == "tool_result" for block in blocks):
                # Results answer the previous assistant turn, so they go before other content.
                results = [b for b in blocks if b["type"] == "tool_result"]
                others = [b for b in blocks if b["type"] != "tool_result"]
                split = sum(1 for b in previous if b["type"] == "tool_result")
                previous[split:split] = results
                previous.extend(others)
            else:
                previous.extend(blocks)
        else:
            turns.append((role, blocks))
    wire: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            wire.append({"role": "user", "content": blocks})
        else:
            wire.append({"role": "assistant", "content": blocks})
    return system, wire


_CHARS_PER_TOKEN: Final = 4
_MAX_CACHE_POINTS: Final = 4


def _shared_blocks(messages: Sequence[Msg]) -> int:
    """How many system blocks open the prompt of every user and session (``CACHE_PREFIX_BLOCKS``).

    Counted as :func:`_to_anthropic_messages` sends them: the first system message's non-empty
    text blocks among its first ``CACHE_PREFIX_BLOCKS``; 0 when it says nothing.
    """
    first = next((m for m in messages if m.role == "system"), None)
    if first is None:
        return 0
    shared = first.metadata.get(CACHE_PREFIX_BLOCKS)
    if not isinstance(shared, int) or isinstance(shared, bool) or shared <= 0:
        return 0
    return sum(1 for b in first.content[:shared] if isinstance(b, TextBlock) and b.text)


def _mark_cache_points(
    tools: list[ToolParam],
    system: list[TextBlockParam],
    messages: list[MessageParam],
    shared: int,
    min_chars: int,
) -> None:
    """Put ``cache_control`` on the blocks that end the prefixes worth caching (module docs).

    A prefix is everything before the mark in the provider's order: tools, system, messages.
    Marks go on blocks the API allows (not thinking), at most four, none on a short prefix.
    """
    sizes = [len(json.dumps(tool)) for tool in tools]
    points: list[tuple[int, dict[str, Any]]] = []  # (prefix characters, the block to mark)
    prefix = sum(sizes)
    if tools and not shared:
        points.append((prefix, cast(dict[str, Any], tools[-1])))
    for index, block in enumerate(system, start=1):
        prefix += len(block["text"])
        if index == shared or index == len(system):
            points.append((prefix, cast(dict[str, Any], block)))
    ends: list[tuple[int, dict[str, Any]]] = []
    for message in messages:
        content = message["content"]
        markable: dict[str, Any] | None = None
        for part in content if isinstance(content, list) else ():
            prefix += len(json.dumps(part))
            if part.get("type") not in ("thinking", "redacted_thinking"):
                markable = cast(dict[str, Any], part)
        ends.append((prefix, markable or {}))
    last_answer = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None
    )
    if last_answer is not None and last_answer > 0:
        points.append(ends[last_answer - 1])
    if ends:
        points.append(ends[-1])
    marked = 0
    for size, block in reversed(points):  # the newest marks matter most
        if marked == _MAX_CACHE_POINTS:
            break
        if block and size >= min_chars and "cache_control" not in block:
            block["cache_control"] = {"type": "ephemeral"}
            marked += 1


def _blocks(message: Msg) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            image = _image(block)
            if image is not None:
                blocks.append(image)
        elif isinstance(block, ThinkingBlock):
            if block.signature and message.role == "assistant":
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, ToolUseBlock):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
        elif isinstance(block, ToolResultBlock):
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": _result_content(block),
                    "is_error": block.is_error,
                }
            )
    return blocks


def _result_content(result: ToolResultBlock) -> str | list[TextBlockParam | ImageBlockParam]:
    if isinstance(result.output, str):
        return result.output
    parts: list[TextBlockParam | ImageBlockParam] = []
    for part in result.output:
        if isinstance(part, TextBlock):
            if part.text:
                parts.append({"type": "text", "text": part.text})
        else:
            image = _image(part)
            if image is not None:
                parts.append(image)
    return parts


def _image(image: ImageBlock) -> ImageBlockParam | None:
    if image.data:
        media_type = cast(_ImageMediaType, image.media_type or "image/png")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": image.data},
        }
    if image.url:
        return {"type": "image", "source": {"type": "url", "url": image.url}}
    return None


def _to_anthropic_tools(tools: Sequence[ToolSchema]) -> list[ToolParam]:
    """Encode tool schemas as messages-API tools."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


_TOOL_CHOICES: Final = {"auto": "auto", "none": "none", "required": "any"}


def _tool_choice(choice: object) -> object:
    """Translate the common ``tool_choice`` words; a dict is passed on as Anthropic's own form."""
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICES:
            msg = f"tool_choice must be one of {sorted(_TOOL_CHOICES)} or a dict, got {choice!r}"
            raise ValueError(msg)
        return {"type": _TOOL_CHOICES[choice]}
    return choice


# -- answers ------------------------------------------------------------------------------------


@dataclass
class _PartialBlock:
    kind: Literal["text", "thinking", "tool_use"]
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    id: str = ""
    name: str = ""


@dataclass
class _StreamedAnswer:
    """Accumulates the events of one streamed message."""

    model: str
    received_any: bool = False
    blocks: dict[int, _PartialBlock] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str | None = None

    def add(self, event: RawMessageStreamEvent) -> list[ChatChunk]:
        """Take in one event; return the deltas to show."""
        self.received_any = True
        if event.type == "message_start":
            self.model = event.message.model or self.model
            self._count(event.message.usage)
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._count(event.usage)
        elif event.type == "content_block_start":
            self._start(event.index, event.content_block)
        elif event.type == "content_block_delta":
            return self._delta(event.index, event.delta)
        return []

    def _count(self, usage: object) -> None:
        output = getattr(usage, "output_tokens", None)
        if isinstance(output, int):
            self.output_tokens = output
        fresh = getattr(usage, "input_tokens", None)
        if isinstance(fresh, int):
            written = getattr(usage, "cache_creation_input_tokens", None)
            read = getattr(usage, "cache_read_input_tokens", None)
            self.cache_write_tokens = written if isinstance(written, int) else 0
            self.cache_read_tokens = read if isinstance(read, int) else 0
            self.input_tokens = fresh + self.cache_write_tokens + self.cache_read_tokens

    def _start(self, index: int, block: Any) -> None:
        if block.type == "text":
            self.blocks[index] = _PartialBlock("text", [block.text] if block.text else [])
        elif block.type == "thinking":
            partial = _PartialBlock("thinking", [block.thinking] if block.thinking else [])
            partial.signature = block.signature or None
            self.blocks[index] = partial
        elif block.type == "tool_use":
            partial = _PartialBlock("tool_use", id=block.id, name=block.name)
            if block.input:
                partial.text.append(json.dumps(block.input))
            self.blocks[index] = partial
        else:
            logger.debug("dropping a %r content block from %s", block.type, self.model)

    def _delta(self, index: int, delta: Any) -> list[ChatChunk]:
        partial = self.blocks.get(index)
        if partial is None:
            return []
        if delta.type == "text_delta" and delta.text:
            partial.text.append(delta.text)
            return [ChatChunk(text=delta.text)]
        if delta.type == "thinking_delta" and delta.thinking:
            partial.text.append(delta.thinking)
            return [ChatChunk(thinking=delta.thinking)]
        if delta.type == "signature_delta":
            partial.signature = delta.signature
        elif delta.type == "input_json_delta" and delta.partial_json:
            partial.text.append(delta.partial_json)
        return []

    def response(self) -> ChatResponse:
        content: list[ContentBlock] = []
        for _, partial in sorted(self.blocks.items()):
            text = "".join(partial.text)
            if partial.kind == "text":
                if text:
                    content.append(TextBlock(text=text))
            elif partial.kind == "thinking":
                content.append(ThinkingBlock(thinking=text, signature=partial.signature))
            else:
                tool_input = parse_tool_arguments(text, partial.name)
                content.append(ToolUseBlock(id=partial.id, name=partial.name, input=tool_input))
        usage = None
        if self.input_tokens is not None and self.output_tokens is not None:
            usage = Usage(
                self.input_tokens,
                self.output_tokens,
                cache_read_tokens=self.cache_read_tokens,
                cache_write_tokens=self.cache_write_tokens,
            )
        return ChatResponse(
            content=content, usage=usage, model=self.model, stop_reason=self.stop_reason
        )


# -- errors -------------------------------------------------------------------------------------


@functools.cache
def _error_table() -> Mapping[type[Exception], type[ModelError]]:
    """Map each exception class the SDK exports to the Harness class it becomes.

    Built on first use because the SDK is imported lazily. Every exported class has its own
    entry, so a reader sees how each is treated; the MRO walk in ``nearest_error_class`` only
    matters for the many classes the SDK raises but does not export (they subclass the status
    classes below) and for ones it adds later. ``json.JSONDecodeError`` is here because the SDK
    parses each SSE event with ``json.loads`` and lets a malformed event escape as is, and
    ``httpx2.TransportError`` because it does not wrap network errors that happen mid-stream.
    """
    import anthropic
    import httpx2

    return {
        # HTTP 429 and the spend and ramp limits the SDK reports with it.
        anthropic.RateLimitError: RateLimitError,
        anthropic.ContractSpendLimitReachedError: RateLimitError,
        anthropic.EnforcedSpendLimitReachedError: RateLimitError,
        anthropic.RampLimitExceededError: RateLimitError,
        # HTTP 4xx. A context overflow is a 400 and is recognized by its message.
        anthropic.BadRequestError: ModelError,
        anthropic.CMEKKeyDisabledError: ModelError,
        anthropic.CMEKKeyNetworkBlockedError: ModelError,
        anthropic.ClaudeCodeKeyCreatorNotMemberError: ModelError,
        anthropic.ClaudeCodeVersionTooOldError: ModelError,
        anthropic.OrganizationOnHoldError: ModelError,
        anthropic.OrganizationTypeNotSupportedError: ModelError,
        anthropic.OrganizationURLFetchDisabledError: ModelError,
        anthropic.ParentOrganizationRequiredError: ModelError,
        anthropic.RequestBodyEncodingInvalidError: ModelError,
        anthropic.RequestBodyEncodingUnsupportedError: ModelError,
        anthropic.WorkspaceHumanReviewDisabledError: ModelError,
        anthropic.AuthenticationError: ModelError,
        anthropic.PaymentRequiredError: ModelError,
        anthropic.LinkedOrganizationBillingUnavailableError: ModelError,
        anthropic.LinkedOrganizationSpendLimitReachedError: ModelError,
        anthropic.PermissionDeniedError: ModelError,
        anthropic.SandboxEgressRestrictedError: ModelError,
        anthropic.NotFoundError: ModelError,
        anthropic.RequestTimeoutError: ModelError,
        anthropic.ConflictError: ModelError,
        anthropic.PreconditionFailedError: ModelError,
        anthropic.ContentTooLargeError: ModelError,  # also exported as RequestTooLargeError
        anthropic.RequestBodyTooLargeAfterDecodingError: ModelError,
        anthropic.UnprocessableEntityError: ModelError,
        anthropic.RequestHeaderFieldsTooLargeError: ModelError,
        anthropic.ClientClosedRequestError: ModelError,
        # HTTP 5xx, 529 (overloaded) included: the SDK has already retried them.
        anthropic.InternalServerError: ModelError,
        anthropic.HTTPNotImplementedError: ModelError,
        anthropic.ServiceUnavailableError: ModelError,
        anthropic.StorageNotReadyError: ModelError,
        anthropic.CMEKContextUnavailableError: ModelError,
        anthropic.CMEKKeyUnreachableError: ModelError,
        anthropic.GatewayTimeoutError: ModelError,  # also exported as DeadlineExceededError
        anthropic.OverloadedError: ModelError,
        # Any other status, including an `error` event in the middle of a stream.
        anthropic.APIStatusError: ModelError,
        # No usable response.
        anthropic.APITimeoutError: ModelError,
        anthropic.APIConnectionError: ModelError,
        anthropic.APIResponseValidationError: ModelError,
        anthropic.APIWebhookValidationError: ModelError,
        anthropic.APIError: ModelError,
        # Client-side failures: credentials that cannot be loaded, exhausted middleware retries.
        anthropic.CredentialsError: ModelError,
        anthropic.IdentityTokenFileError: ModelError,
        anthropic.WorkloadIdentityError: ModelError,
        anthropic.RetryableError: ModelError,
        anthropic.AnthropicError: ModelError,
        # Not the SDK's own classes, but raised through it (see the docstring).
        httpx2.TransportError: ModelError,
        json.JSONDecodeError: ModelError,
    }


@contextmanager
def _map_errors(model: str, base_url: str) -> Iterator[None]:
    """Translate SDK exceptions raised in the block into Harness exceptions (module docstring)."""
    table = _error_table()
    try:
        yield
    except tuple(table) as exc:
        raise _translate(exc, model, base_url) from exc


def _translate(exc: Exception, model: str, base_url: str) -> ModelError:
    import anthropic

    cls = nearest_error_class(type(exc), _error_table()) or ModelError
    body = getattr(exc, "body", None)
    detail = _provider_message(exc, body)
    if cls is ModelError and looks_like_context_overflow(detail, body):
        cls = ContextOverflowError
    status = getattr(exc, "status_code", None)
    if status == 200:
        # The SDK raises an `error` event inside a 200 stream as a status error.
        message = f"Anthropic model {model!r} failed mid-stream: {detail}"
    elif isinstance(status, int):
        message = f"Anthropic model {model!r} failed with HTTP {status}: {detail}"
    elif isinstance(exc, anthropic.APIConnectionError):
        message = f"Anthropic model {model!r}: cannot reach {base_url}: {detail}"
    else:
        message = f"Anthropic model {model!r} failed: {detail}"
    if cls is ContextOverflowError:  # with the sizes Anthropic stated
        return overflow_error(message, detail, body)
    return cls(message)


def _provider_message(exc: Exception, body: object) -> str:
    import anthropic

    api_message = getattr(exc, "api_message", None)
    if isinstance(api_message, str) and api_message:
        return api_message
    if isinstance(body, Mapping):
        error = body.get("error")
        message = error.get("message") if isinstance(error, Mapping) else body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    if not isinstance(exc, anthropic.AnthropicError):
        return f"{type(exc).__name__}: {exc}"
    text = str(getattr(exc, "message", None) or exc or type(exc).__name__)
    cause = exc.__cause__
    if isinstance(exc, anthropic.APIConnectionError) and cause is not None:
        text = f"{text} ({type(cause).__name__}: {cause})"
    return text
