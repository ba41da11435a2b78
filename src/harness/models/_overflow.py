"""Recognizing a context-window overflow from a provider's error text, and its sizes.

Providers and OpenAI-compatible servers word the same failure in many ways; this list covers
the usual ones so that every adapter maps them to :class:`~harness.errors.ContextOverflowError`.

Most of them also state the sizes: how many tokens the request needed and how many the model
allows. :func:`overflow_sizes` reads them, so that recovery sizes what it keeps from the
provider's own count instead of guessing. The wordings read (each in any letter case, numbers
with or without thousands separators):

- OpenAI, vLLM, DeepSeek, Groq, llama-cpp-python's server: ``This model's maximum context
  length is 2048 tokens. However, you requested 2503 tokens (2471 in the messages, 32 in the
  completion)``, or ``... your messages resulted in 9000 tokens``, or ``... and your request
  has 2030 input tokens (32 > 2048 - 2030)``;
- llama.cpp's own server: ``request (4476 tokens) exceeds the available context size (4096
  tokens)``, or the ``n_prompt_tokens`` and ``n_ctx`` fields of its error body;
- llama-cpp-python in-process: ``Requested tokens (2300) exceed context window of 2048``;
- Anthropic: ``prompt is too long: 208310 tokens > 200000 maximum``, or ``input length and
  `max_tokens` exceed context limit: 197202 + 21333 > 200000``;
- Gemini: ``The input token count (1234567) exceeds the maximum number of tokens allowed
  (1048576)``.

The text comes from a server and is not trusted: only its first :data:`MAX_SCANNED` characters
are read, with patterns that cannot backtrack far, and sizes that do not describe an overflow
(a request below the limit, an answer's room larger than the request, absurd numbers) are
dropped, so a wrong number can never make recovery shrink a conversation to nothing on its word
alone; the error is still an overflow, only without sizes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from harness.errors import ContextOverflowError

__all__ = ["OverflowSizes", "looks_like_context_overflow", "overflow_error", "overflow_sizes"]

_OVERFLOW = re.compile(
    r"context_length_exceeded|context[ _-]?window|maximum context|context length"
    r"|prompt is too long|too many tokens|reduce the length|exceeds? the (?:model'?s )?max"
    r"|input is too long|request too large for model|string_above_max_length"
    r"|exceeds? (?:the )?available context size|exceed_context_size_error|context limit"
    r"|input token count",
    re.IGNORECASE,
)

MAX_SCANNED: Final = 4_000
"""Characters of each error text read for sizes: the sentence that states them comes first."""

MAX_TOKENS: Final = 100_000_000
"""Sizes above this are not believed: no model's window is that large."""

_N = r"(\d{1,3}(?:,\d{3})+|\d{1,9})"
"""A count: 2048 or 2,048 (a comma followed by anything but three digits ends it)."""

_ANSWER_PART = re.compile(
    rf"\s*(?:input\s+)?tokens?\.?\s*\(\s*{_N} (?:in the messages|in your prompt)\s*[,;]"
    rf"\s*(None|{_N}) (?:in|for) the (completion|functions)\s*\)",
    re.IGNORECASE,
)
_VLLM_ANSWER = re.compile(rf"\(\s*{_N}\s*>\s*{_N}\s*-\s*{_N}\s*\)")

_MAXIMUM_CONTEXT = re.compile(
    rf"maximum context length is {_N} tokens?[^0-9]{{0,60}}?"
    rf"(?:you requested|resulted in|your request has) {_N}",
    re.IGNORECASE,
)
_LLAMA_CPP_SERVER = re.compile(
    rf"request \({_N} tokens?\) exceeds? (?:the )?available context size \({_N} tokens?\)",
    re.IGNORECASE,
)
_LLAMA_CPP_FIELDS = (
    re.compile(rf"""["']?n_prompt_tokens["']?\s*[:=]\s*{_N}"""),
    re.compile(rf"""["']?n_ctx["']?\s*[:=]\s*{_N}"""),
)
_LLAMA_CPP_PYTHON = re.compile(
    rf"requested tokens \({_N}\) exceed context window of {_N}", re.IGNORECASE
)
_ANTHROPIC_PROMPT = re.compile(rf"prompt is too long:\s*{_N} tokens?\s*>\s*{_N}", re.IGNORECASE)
_ANTHROPIC_ANSWER = re.compile(
    rf"exceed context limit:\s*{_N}\s*\+\s*{_N}\s*>\s*{_N}", re.IGNORECASE
)
_GEMINI = re.compile(
    rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_N}\)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class OverflowSizes:
    """The sizes a provider stated for a request it refused as too long.

    Attributes:
        requested: What the request needed: its prompt, plus ``answer`` when counted in.
        limit: The model's context window.
        answer: The part of ``requested`` kept for the answer (None: not counted in).
    """

    requested: int
    limit: int
    answer: int | None = None


def looks_like_context_overflow(*texts: object) -> bool:
    """True when any of the texts (error code, message, body) describes a context overflow."""
    return any(text is not None and _OVERFLOW.search(str(text)) for text in texts)


def overflow_sizes(*texts: object) -> OverflowSizes | None:
    """The sizes the first text that states them states, or None (module docstring).

    A mapping (an error's JSON body) is read as its text, and its own ``n_prompt_tokens`` and
    ``n_ctx`` fields (llama.cpp's server) are read too.
    """
    for text in texts:
        if text is None:
            continue
        sizes = _checked(_read(text))
        if sizes is not None:
            return sizes
    return None


def overflow_error(message: str, *texts: object) -> ContextOverflowError:
    """A :class:`ContextOverflowError` with the sizes the texts state, when they state them."""
    sizes = overflow_sizes(*texts)
    if sizes is None:
        return ContextOverflowError(message)
    return ContextOverflowError(
        message,
        requested_tokens=sizes.requested,
        limit_tokens=sizes.limit,
        answer_tokens=sizes.answer,
    )


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def _read(source: object) -> OverflowSizes | None:
    if isinstance(source, Mapping):
        fields = _fields(source)
        if fields is not None:
            return fields
    text = str(source)[:MAX_SCANNED]
    if found := _MAXIMUM_CONTEXT.search(text):
        limit, requested = _count(found.group(1)), _count(found.group(2))
        rest = text[found.end() : found.end() + 200]
        if (part := _ANSWER_PART.match(rest)) is not None:
            prompt, answer = _count(part.group(1)), part.group(2)
            if part.group(4).lower() == "completion" and answer != "None":
                if prompt + _count(answer) != requested:
                    return None  # the parts do not add up: no size is believed
                return OverflowSizes(requested, limit, _count(answer))
            return OverflowSizes(requested, limit)
        if (vllm := _VLLM_ANSWER.search(rest)) is not None and _count(vllm.group(3)) == requested:
            answer = _count(vllm.group(1))
            return OverflowSizes(requested + answer, limit, answer)
        return OverflowSizes(requested, limit)
    if found := _ANTHROPIC_ANSWER.search(text):
        prompt, answer = _count(found.group(1)), _count(found.group(2))
        return OverflowSizes(prompt + answer, _count(found.group(3)), answer)
    for pattern in (_LLAMA_CPP_SERVER, _LLAMA_CPP_PYTHON, _ANTHROPIC_PROMPT, _GEMINI):
        if found := pattern.search(text):
            return OverflowSizes(_count(found.group(1)), _count(found.group(2)))
    prompt_field, window_field = (pattern.search(text) for pattern in _LLAMA_CPP_FIELDS)
    if prompt_field is not None and window_field is not None:
        return OverflowSizes(_count(prompt_field.group(1)), _count(window_field.group(1)))
    return None


def _fields(body: Mapping[object, object]) -> OverflowSizes | None:
    """llama.cpp's error body: ``{"n_prompt_tokens": 4476, "n_ctx": 4096, ...}``."""
    error = body.get("error")
    if isinstance(error, Mapping):
        body = error
    prompt, window = body.get("n_prompt_tokens"), body.get("n_ctx")
    if type(prompt) is int and type(window) is int:
        return OverflowSizes(prompt, window)
    return None


def _checked(sizes: OverflowSizes | None) -> OverflowSizes | None:
    """The sizes if they describe an overflow; None for numbers that cannot be right."""
    if sizes is None:
        return None
    if not 0 < sizes.limit <= sizes.requested <= MAX_TOKENS:  # llama.cpp refuses at ==
        return None
    if sizes.answer is not None and not 0 <= sizes.answer < sizes.requested:
        return None
    return sizes
