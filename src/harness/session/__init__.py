"""Session persistence: each conversation saved per user, agent and session."""

from harness.session.compactions import COMPACTIONS_SUFFIX, CompactionLog
from harness.session.deletion import SessionFiles
from harness.session.lease import (
    FileLeases,
    ProcessLeases,
    SessionLeases,
    StoreLeases,
    leases_for,
)
from harness.session.store import EVERY_CALL, MESSAGES_FILE, SessionFsync, SessionStore

__all__ = [
    "COMPACTIONS_SUFFIX",
    "EVERY_CALL",
    "MESSAGES_FILE",
    "CompactionLog",
    "FileLeases",
    "ProcessLeases",
    "SessionFiles",
    "SessionFsync",
    "SessionLeases",
    "SessionStore",
    "StoreLeases",
    "leases_for",
]
