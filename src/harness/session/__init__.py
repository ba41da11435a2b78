"""Session persistence: each conversation saved per user, agent and session."""

from harness.session.store import MESSAGES_FILE, SessionStore

__all__ = ["MESSAGES_FILE", "SessionStore"]
