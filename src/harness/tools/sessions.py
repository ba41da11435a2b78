"""The session tools: find and read earlier conversations of this agent, for the caller.

They read the transcripts the memory flush hook writes (``agents/<agent>/sessions/`` in the
caller's namespace; see :mod:`harness.memory.transcript`):

- ``session_search(query, max_results?)``: entries containing every word of the query, newest
  first, as ``[<session>] <entry id> — [<ROLE>]: <text>``;
- ``session_list()``: the sessions with their titles, sizes and last update;
- ``session_history(session_id, last_n?)``: the last entries of one session.

Compaction summaries are never returned (they would re-inflate the context they replaced).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

from harness.context import RuntimeContext
from harness.kernel import ToolFailure
from harness.memory.transcript import SESSIONS_INDEX, sessions_dir
from harness.workspace import WorkspaceManager, safe_segment

__all__ = ["SessionTools"]

SEARCH_PREVIEW: Final = 200
HISTORY_PREVIEW: Final = 500


class SessionTools:
    """session_search, session_list and session_history for one agent."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.directory = sessions_dir(agent)

    def tools(self) -> list[Callable[..., Any]]:
        return [self.session_search, self.session_list, self.session_history]

    async def session_search(
        self, query: str, ctx: RuntimeContext, max_results: int | None = None
    ) -> str:
        """Search your earlier conversations with this user for a word or phrase.

        Args:
            query: Words that must all appear in a message.
            max_results: How many messages to return (default 10).
        """
        words = [w.lower() for w in re.findall(r"\w+", query)]
        if not words:
            return ToolFailure("No query provided")
        limit = max(1, min(max_results or 10, 50))
        matches: list[tuple[str, str, str, str, str]] = []
        for info in await self.workspace.list_own(self.directory, ctx.user_id):
            if not info.path.endswith(".jsonl") or info.path.endswith(".log.jsonl"):
                continue
            session = info.path.rsplit("/", 1)[-1].removesuffix(".jsonl")
            for entry in await self._entries(info.path, ctx):
                text = entry["content"]
                if all(word in text.lower() for word in words):
                    matches.append((entry["timestamp"], session, entry["id"], entry["role"], text))
        if not matches:
            return f"No matches found for: {query}"
        matches.sort(reverse=True)
        lines = [
            f"  [{session}] {entry_id} — [{role.upper()}]: {_preview(text, SEARCH_PREVIEW)}"
            for _, session, entry_id, role, text in matches[:limit]
        ]
        return f'Found {len(matches)} matches for "{query}":\n' + "\n".join(lines)

    async def session_list(self, ctx: RuntimeContext) -> str:
        """List your earlier conversations with this user, most recent first."""
        raw = await self.workspace.read_own(f"{self.directory}/{SESSIONS_INDEX}", ctx.user_id)
        try:
            sessions = json.loads(raw or "{}").get("sessions") or {}
        except (ValueError, AttributeError):
            sessions = {}
        if not sessions:
            return "No sessions found"
        ordered = sorted(
            sessions.items(), key=lambda item: item[1].get("updated_at", ""), reverse=True
        )
        lines = [
            f"- {sid}: {meta.get('title', '(untitled)')} "
            f"({meta.get('messages', '?')} messages, updated {meta.get('updated_at', '?')})"
            for sid, meta in ordered
        ]
        return f"{len(lines)} sessions:\n" + "\n".join(lines)

    async def session_history(
        self, session_id: str, ctx: RuntimeContext, last_n: int | None = None
    ) -> str:
        """Show the last messages of one earlier conversation.

        Args:
            session_id: The session, as session_list shows it.
            last_n: How many messages to show (default 20).
        """
        path = f"{self.directory}/{safe_segment(session_id)}.jsonl"
        entries = await self._entries(path, ctx)
        if not entries:
            return ToolFailure(f"Session not found: {session_id}")
        shown = entries[-max(1, min(last_n or 20, 200)) :]
        lines = [f"[{e['role'].upper()}]: {_preview(e['content'], HISTORY_PREVIEW)}" for e in shown]
        header = f"Session {session_id} ({len(entries)} total messages, showing last {len(shown)}):"
        return header + "\n" + "\n".join(lines)

    async def _entries(self, path: str, ctx: RuntimeContext) -> list[dict[str, str]]:
        text = await self.workspace.read_own(path, ctx.user_id, limit=None) or ""  # transcripts
        entries = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("type") == "message":
                entries.append(
                    {k: str(entry.get(k, "")) for k in ("id", "role", "content", "timestamp")}
                )
        return entries


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
