"""The compaction record: one JSON line per compaction of a session.

On disk, in the user's namespace::

    agents/<agent>/sessions/<session>.compactions.jsonl

Each record says when the session was compacted, how many messages and estimated tokens it had
before and after, the id of the first message kept, whether the memory flush and the transcript
offload before it succeeded, and a hash of the summary, so a person (``harness sessions show``)
can see what happened to a long conversation and find its full text in the transcript.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from harness.context import RuntimeContext
from harness.workspace import AGENTS_DIR, WorkspaceManager, safe_segment

__all__ = ["COMPACTIONS_SUFFIX", "CompactionLog"]

COMPACTIONS_SUFFIX: Final = ".compactions.jsonl"


class CompactionLog:
    """Appends and reads the compaction records of an agent's sessions."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.agent = agent

    def path(self, session_id: str) -> str:
        """The record file of a session (before user scoping)."""
        name = safe_segment(session_id)
        return f"{AGENTS_DIR}/{safe_segment(self.agent)}/sessions/{name}{COMPACTIONS_SUFFIX}"

    async def append(self, ctx: RuntimeContext, record: Mapping[str, Any]) -> None:
        """Add one record (a whole line, safe against concurrent appenders)."""
        line = json.dumps(dict(record), ensure_ascii=False, default=str) + "\n"
        await self.workspace.append_text(self.path(ctx.session_id or "default"), line, ctx.user_id)

    async def read(self, session_id: str, user_id: str | None = None) -> list[dict[str, Any]]:
        """The session's records, oldest first; unreadable lines are left out."""
        text = await self.workspace.read_own(self.path(session_id), user_id, limit=None) or ""
        records = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records
