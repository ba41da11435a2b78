"""The contract between an agent and a language model.

A :class:`ChatModel` turns a list of messages (and the tools on offer) into a stream: zero or
more :class:`ChatChunk` deltas for display, then exactly one :class:`ChatResponse` with the full
content and the provider's token usage. Adapters translate provider errors into
:class:`~harness.errors.ModelError` and its subclasses, so the agent can tell a context overflow
from a rate limit without knowing the provider.

Every adapter understands one option, ``tool_choice``: ``"auto"`` (the default), ``"none"``
(answer in text; the tools are still described, because providers reject a conversation with
tool calls but no tools) or ``"required"``. A tool call whose arguments are not a JSON object
is kept as ``{INVALID_ARGUMENTS_KEY: "<raw text>"}`` so the toolkit can tell the model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

from harness.errors import ModelError
from harness.kernel.message import ContentBlock, Msg, storable

__all__ = [
    "CACHE_KEY",
    "CACHE_PREFIX_BLOCKS",
    "INVALID_ARGUMENTS_KEY",
    "OUTPUT_SCHEMA",
    "ChatChunk",
    "ChatModel",
    "ChatResponse",
    "ToolSchema",
    "Usage",
    "complete",
    "constrains_output",
]

INVALID_ARGUMENTS_KEY: Final = "__invalid_arguments__"
"""The input key under which an adapter keeps tool-call arguments that were not a JSON object."""

CACHE_PREFIX_BLOCKS: Final = "cache_prefix_blocks"
"""Metadata key of a system message: how many of its leading content blocks every user and
session of the agent share. An adapter whose provider caches prompt prefixes at marked points
(Anthropic) marks the end of those blocks, so one user's session reads what another's wrote."""

CACHE_KEY: Final = "cache_key"
"""Metadata key of a system message: an opaque, stable name for who shares its prompt prefix
(an agent and a user), for providers that route requests to a cache by such a key (OpenAI's
``prompt_cache_key``). It names no one: it is a digest."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them.

    ``input_tokens`` is the whole prompt, cached or not, for every provider (Anthropic reports
    the uncached rest apart; the adapter adds its cache reads and writes back), so compaction
    and budgets count the same thing everywhere. ``cache_read_tokens`` of it were served from
    the provider's prompt cache (billed at a fraction of the price), ``cache_write_tokens``
    were written to it (Anthropic bills these above the normal price; OpenAI reports none).
    """

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    FIELDS: ClassVar[tuple[str, ...]] = (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    )
    """The counts, as :meth:`as_dict` names them: the one spelling of usage in saved messages,
    traces and stream reports."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        """The four counts by name (:attr:`FIELDS`)."""
        return {name: getattr(self, name) for name in self.FIELDS}

    @property
    def uncached_input_tokens(self) -> int:
        """The prompt tokens the provider neither read from nor wrote to its cache."""
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)


def usage_fields(usage: Usage | None) -> dict[str, int | None]:
    """:meth:`Usage.as_dict`, or every count None when the provider reported no usage."""
    if usage is None:
        return dict.fromkeys(Usage.FIELDS)
    return {**usage.as_dict()}


@dataclass(frozen=True, slots=True)
class ChatChunk:
    """A streamed delta: text or thinking as it arrives."""

    text: str = ""
    thinking: str = ""


@dataclass(slots=True)
class ChatResponse:
    """A complete model answer.

    ``stop_reason`` is the provider's own word (``stop``, ``end_turn``, ``tool_calls``, ...),
    for logs and traces; the agent decides what to do from the content, not from it.
    """

    content: list[ContentBlock]
    usage: Usage | None = None
    model: str | None = None
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: a name, a description and a JSON schema of its input."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


OUTPUT_SCHEMA: Final = "output_schema"
"""The request option holding the JSON schema a structured turn's answer must fit
(:mod:`harness.structured`). Only a model that declares ``constrains_output = True`` is given
it, and holds its text answers to the schema (the local model, by a grammar); any other model
is told the schema in words, and its answer checked all the same."""


def constrains_output(model: object) -> bool:
    """Whether ``model`` takes :data:`OUTPUT_SCHEMA` and holds its text answers to it."""
    return getattr(model, "constrains_output", False) is True


@runtime_checkable
class ChatModel(Protocol):
    """A language model the agent can talk to."""

    @property
    def model_name(self) -> str:
        """The provider's name of the model, for logs and traces."""
        ...

    def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        """Yield deltas, then one final :class:`ChatResponse`."""
        ...


async def complete(
    model: ChatModel, messages: Sequence[Msg], tools: Sequence[ToolSchema] = (), **options: Any
) -> ChatResponse:
    """Run ``model.stream`` to the end and return its final response.

    Its content is :func:`~harness.kernel.message.storable`: what the harness writes from it
    (a daily log, a summary, MEMORY.md) must never hold text that cannot be saved.
    """
    response: ChatResponse | None = None
    async for item in model.stream(messages, tools, **options):
        if isinstance(item, ChatResponse):
            response = item
    if response is None:
        msg = f"model {model.model_name!r} ended its stream without a final response"
        raise ModelError(msg)
    response.content = storable(response.content)
    return response
