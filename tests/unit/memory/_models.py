"""Test doubles for memory tests: a model answered by a Python function."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from harness.kernel import ChatChunk, ChatResponse, Msg, TextBlock, ToolSchema


class FunctionModel:
    """Answers each request with ``answer(messages)`` (sync or async); records requests."""

    model_name = "function"

    def __init__(self, answer: Callable[[list[Msg]], str | Awaitable[str]]) -> None:
        self.answer = answer
        self.requests: list[list[Msg]] = []

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.requests.append(list(messages))
        text = self.answer(list(messages))
        if not isinstance(text, str):
            text = await text
        yield ChatResponse(content=[TextBlock(text=text)] if text else [])
