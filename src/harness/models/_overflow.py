"""Recognizing a context-window overflow from a provider's error text.

Providers and OpenAI-compatible servers word the same failure in many ways; this list covers
the usual ones so that every adapter maps them to :class:`~harness.errors.ContextOverflowError`.
"""

from __future__ import annotations

import re

__all__ = ["looks_like_context_overflow"]

_OVERFLOW = re.compile(
    r"context_length_exceeded|context[ _-]?window|maximum context|context length"
    r"|prompt is too long|too many tokens|reduce the length|exceeds? the (?:model'?s )?max"
    r"|input is too long|request too large for model|string_above_max_length",
    re.IGNORECASE,
)


def looks_like_context_overflow(*texts: object) -> bool:
    """True when any of the texts (error code, message, body) describes a context overflow."""
    return any(text is not None and _OVERFLOW.search(str(text)) for text in texts)
