"""Session transcripts: every message once, in a file a person (and the search index) can read.

In the workspace, in the user's namespace::

    agents/<agent>/sessions/<session>.jsonl       the transcript
    agents/<agent>/sessions/<session>.log.jsonl   the same entries, append-only, for the index
    agents/<agent>/sessions/sessions.json         {"sessions": {<id>: {...}}, "version": 1}

An entry is one JSON object per line::

    {"type": "message", "id": <message id>, "parent_id": <previous entry's id>,
     "timestamp": <ISO time>, "role": "user", "content": <rendered text>, "tool_call_id": ...}

Compaction summaries are written with ``"type": "summary"`` so that search never brings them
back. Offloading is idempotent: an entry's id is its message's id, and messages already in the
transcript are skipped, so offloading the whole conversation after every call appends only what
is new. Appends are whole records on any backend; the ids already written are remembered per
file while the file is unchanged (same size, same last bytes), and re-read when another writer
changed it. ``sessions.json`` is updated by compare-and-set, so no worker's entry is lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.memory.render import is_summary, render_content
from harness.workspace import AGENTS_DIR, WorkspaceManager, safe_segment, scoped

__all__ = ["SESSIONS_INDEX", "TranscriptWriter", "sessions_dir"]

SESSIONS_INDEX: Final = "sessions.json"


def sessions_dir(agent: str) -> str:
    """The workspace-relative directory of an agent's transcripts (before user scoping)."""
    return f"{AGENTS_DIR}/{safe_segment(agent)}/sessions"


@dataclass
class _Known:
    """The ids in a transcript, valid while the file has ``size`` bytes ending in ``tail``."""

    size: int
    tail: bytes
    ids: set[str]
    last_id: str | None


class TranscriptWriter:
    """Appends new messages of a session to its transcript files."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.agent = agent
        self._known: dict[str, _Known] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def transcript_path(self, ctx: RuntimeContext) -> str:
        """The workspace path of the session's transcript (``.jsonl``)."""
        session = safe_segment(ctx.session_id or "default")
        return scoped(f"{sessions_dir(self.agent)}/{session}.jsonl", ctx.user_id)

    def log_path(self, ctx: RuntimeContext) -> str:
        """The workspace path of the transcript's copy for the search index (``.log.jsonl``)."""
        return self.transcript_path(ctx).removesuffix(".jsonl") + ".log.jsonl"

    async def forget(self, ctx: RuntimeContext) -> list[str]:
        """Delete the session's transcript, its copy and its entry in ``sessions.json``.

        Returns the paths of the two files (gone now), for the index to drop their rows. The
        caller holds the session and has waited for its last offload.
        """
        path = self.transcript_path(ctx)
        deleted = [path, self.log_path(ctx)]
        for target in deleted:
            await self.workspace.delete(target)
        self._known.pop(path, None)
        index = f"{path.rsplit('/', 1)[0]}/{SESSIONS_INDEX}"
        if await self.workspace.get_bytes(index) is not None:  # not made when there is none
            await self.workspace.update_text(index, lambda text: _without_session(text, ctx))
        return deleted

    async def offload(self, ctx: RuntimeContext, messages: Sequence[Msg]) -> int:
        """Append the messages not yet in the transcript; returns how many were appended."""
        path = self.transcript_path(ctx)
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:  # one offload of a transcript at a time in this process
            known = await self._known_ids(path)
            lines: list[str] = []
            first_user = ""
            for message in messages:
                if message.role == "system" or message.id in known.ids:
                    continue
                entry = _entry(message, parent=known.last_id)
                lines.append(json.dumps(entry, ensure_ascii=False) + "\n")
                known.ids.add(message.id)
                known.last_id = message.id
                if not first_user and message.role == "user":
                    first_user = entry["content"]
            if not lines:
                return 0
            data = "".join(lines).encode("utf-8")
            for target in (path, self.log_path(ctx)):
                await self.workspace.append_bytes(target, data)
            known.size += len(data)
            known.tail = (known.tail + data)[-_TAIL:]
            index = f"{path.rsplit('/', 1)[0]}/{SESSIONS_INDEX}"
            await self.workspace.update_text(
                index, lambda text: _with_session(text, ctx, first_user, len(known.ids))
            )
            return len(lines)

    async def _known_ids(self, path: str) -> _Known:
        found = await self.workspace.get_bytes(path)
        data = found[0] if found is not None else b""
        known = self._known.get(path)
        if known is not None and known.size == len(data) and data.endswith(known.tail):
            return known
        known = _Known(size=len(data), tail=data[-_TAIL:], ids=set(), last_id=None)
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                entry_id = json.loads(line).get("id")
            except (ValueError, AttributeError):
                continue
            if isinstance(entry_id, str):
                known.ids.add(entry_id)
                known.last_id = entry_id
        self._known[path] = known
        return known


_TAIL: Final = 64


def _parsed_index(text: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``sessions.json`` and its ``sessions`` record; None when it cannot be read."""
    try:
        index = json.loads(text)
        sessions = index["sessions"]
    except (ValueError, KeyError, TypeError):
        return None
    return (index, sessions) if isinstance(sessions, dict) else None


def _with_session(text: str, ctx: RuntimeContext, title: str, count: int) -> str:
    """``sessions.json`` with the session's record updated (a fresh index if unreadable)."""
    index, sessions = _parsed_index(text) or ({"version": 1}, {})
    session_id = ctx.session_id or "default"
    record: dict[str, Any] = dict(sessions.get(session_id) or {})
    if title and not record.get("title"):
        record["title"] = title[:120]
    record["messages"] = count
    record["updated_at"] = datetime.now(UTC).isoformat()
    sessions[session_id] = record
    index["sessions"] = sessions
    index.setdefault("version", 1)
    return json.dumps(index, ensure_ascii=False, indent=2) + "\n"


def _without_session(text: str, ctx: RuntimeContext) -> str:
    """``sessions.json`` without the session's record (unchanged if unreadable)."""
    parsed = _parsed_index(text)
    if parsed is None:
        return text
    index, sessions = parsed
    sessions.pop(ctx.session_id or "default", None)
    return json.dumps(index, ensure_ascii=False, indent=2) + "\n"


def _entry(message: Msg, *, parent: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "summary" if is_summary(message) else "message",
        "id": message.id,
        "parent_id": parent,
        "timestamp": message.timestamp.isoformat(),
        "role": message.role,
        "content": render_content(message),
    }
    call_ids = [b.id for b in message.tool_results] or [b.id for b in message.tool_uses]
    if call_ids:
        entry["tool_call_id"] = call_ids[0]
    return entry
