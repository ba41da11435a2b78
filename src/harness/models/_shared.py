"""What the SDK-backed adapters do alike.

Checking request options, reading a tool call's arguments, and finding the Harness error class
for an SDK exception.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from harness.errors import ModelError
from harness.kernel import INVALID_ARGUMENTS_KEY, Msg, TextBlock

__all__ = [
    "DEFAULT_LOCAL_CONTEXT_WINDOW",
    "SDKChatModel",
    "checked_options",
    "nearest_error_class",
    "parse_tool_arguments",
    "system_text",
]

DEFAULT_LOCAL_CONTEXT_WINDOW = 8192
"""The context window a local model is given when nobody says (``models/__init__`` and
``local.py`` both need it, so it lives below both)."""

logger = logging.getLogger("harness.models")


def checked_options(options: Mapping[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    """Copy request options, refusing those that would replace fields the adapter sets itself.

    Raises:
        ValueError: An option names a reserved field.
    """
    clashes = sorted(reserved.intersection(options))
    if clashes:
        msg = f"options cannot set {', '.join(clashes)}: the adapter sets these fields itself"
        raise ValueError(msg)
    return dict(options)


def parse_tool_arguments(raw: str, tool: str) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; text that is not a JSON object is kept, not raised.

    Empty text means no arguments. Anything else that does not parse to an object comes back
    as ``{INVALID_ARGUMENTS_KEY: raw}``, which the toolkit reports to the model as an error, so
    the model can try again instead of the call crashing.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    logger.warning("tool call %r has arguments that are not a JSON object: %.200s", tool, raw)
    return {INVALID_ARGUMENTS_KEY: raw}


def nearest_error_class(
    exc_type: type[BaseException], table: Mapping[type[Exception], type[ModelError]]
) -> type[ModelError] | None:
    """The Harness class of the nearest class in ``exc_type``'s MRO that the table lists."""
    for cls in exc_type.__mro__:
        if cls in table:
            return table[cls]
    return None


class _Client(Protocol):
    @property
    def base_url(self) -> Any: ...

    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


class SDKChatModel(Generic[ClientT]):
    """What every SDK-backed model has: its name and the SDK client it holds and closes."""

    def __init__(self, model: str, client: ClientT) -> None:
        self._model = model
        self._client = client

    @property
    def model_name(self) -> str:
        """The model name sent to the provider."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API root requests go to (after the SDK applied its environment variables)."""
        return str(self._client.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        """Close the SDK client's connection pool; the model must not be used afterwards."""
        await self._client.close()


def system_text(message: Msg) -> str:
    """A system message's text blocks as one prompt, a blank line between them.

    Hooks add their sections to the system message as blocks of their own; joined without a
    separator, a section's heading would run on from the end of the previous one.
    """
    return "\n\n".join(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
