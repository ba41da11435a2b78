"""What the operator sets for a served agent: who may call it and how much a request may take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from harness.serve.keys import ApiKeys

__all__ = ["DEFAULT_SERVE", "ServeConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    """Limits and keys of :func:`~harness.serve.create_app`.

    Args:
        keys: The API keys and their users; None serves one local user (no user id) and
            answers only requests from loopback addresses.
        max_body_bytes: The largest request body; a larger one gets 413.
        max_header_bytes: The most all of a request's headers may hold; more gets 431.
        max_input_chars: The longest new turn (the text the model is given); longer: 413.
        body_timeout: Seconds to receive a whole body; a slower client gets 408.
        session_wait: Seconds a request waits while another turn runs on its session, in this
            process or another worker; then 409 ``session_busy``.
        turn_timeout: Seconds a turn may run; then it is interrupted (its completed steps are
            saved) and the request gets 504, or a ``error`` event on a stream.
        flush_wait: After ``turn.completed``, a turn's event stream waits this long for the
            turn's memory flush and reports it (``memory.flushed``); 0 ends the stream at once.
        ping_seconds: A streamed response sends an SSE comment after this much silence, so
            proxies keep the connection and a gone client is noticed.
        max_history: The most messages ``GET /v1/sessions/{id}`` returns (the newest).
    """

    keys: ApiKeys | None = None
    max_body_bytes: int = 1_000_000
    max_header_bytes: int = 16_384
    max_input_chars: int = 100_000
    body_timeout: float = 30.0
    session_wait: float = 5.0
    turn_timeout: float = 600.0
    flush_wait: float = 30.0
    ping_seconds: float = 15.0
    max_history: int = 1_000


DEFAULT_SERVE: Final = ServeConfig()
