"""Session persistence: each conversation saved per user, agent and session."""

from harness.session.store import MESSAGES_FILE, SessionStore, drop_unanswered_tail

__all__ = ["MESSAGES_FILE", "SessionStore", "drop_unanswered_tail"]
