"""The per-call runtime context.

A :class:`RuntimeContext` says *who* a call is for (``user_id``) and *which conversation* it
continues (``session_id``). It is immutable and travels with every hook event and every tool
call of that one call, so nothing about a call is kept in fields shared by concurrent calls: two
users calling one agent at the same time never see each other's context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

__all__ = ["DEFAULT_SESSION_ID", "RuntimeContext"]

DEFAULT_SESSION_ID = "default"
"""The session a call continues when it names none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeContext:
    """Who a call is for and which session it continues.

    Args:
        session_id: The conversation to continue; calls with the same id share history.
        user_id: The user the call acts for. Per-user state (sessions, memory, files) lives in
            that user's namespace, and no user sees another's.
        agent: The agent running the call (a ``HarnessAgent`` sets its own name). Under
            ``IsolationScope.AGENT`` the call's files live in that agent's namespace.
        extra: Application values passed through to hooks and tools, copied on construction.
    """

    session_id: str | None = None
    user_id: str | None = None
    agent: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("session_id", "user_id", "agent"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                msg = f"RuntimeContext.{name} must be a non-empty string or None, got {value!r}"
                raise ValueError(msg)
            if value is not None and not _is_text(value):
                msg = (
                    f"RuntimeContext.{name} {value[:40]!r} is not valid text (it holds a lone "
                    "surrogate); use a UTF-8 string"
                )
                raise ValueError(msg)
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def get(self, key: str, default: Any = None) -> Any:
        """Return ``extra[key]``, or ``default`` when it is absent."""
        return self.extra.get(key, default)

    def with_defaults(self, *, session_id: str, agent: str | None = None) -> RuntimeContext:
        """Return this context with ``session_id`` filled in and ``agent`` set.

        ``session_id`` fills in a missing session; ``agent``, when given, names the agent that
        runs the call (it replaces the one the context named).
        """
        if self.session_id is not None and (agent is None or self.agent == agent):
            return self
        return replace(
            self,
            session_id=self.session_id or session_id,
            agent=agent or self.agent,
            extra=dict(self.extra),
        )


def _is_text(value: str) -> bool:
    """Whether an id can name a directory and be saved: whether it encodes to UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
