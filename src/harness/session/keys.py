"""The key of a session's background work, shared by the hooks that schedule it."""

from __future__ import annotations

from harness.context import RuntimeContext

__all__ = ["session_key"]


def session_key(ctx: RuntimeContext) -> str:
    """The key that keeps one session's background memory work in order (user, session)."""
    return f"{ctx.user_id or ''}\x00{ctx.session_id or ''}"
