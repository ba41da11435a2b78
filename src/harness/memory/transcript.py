"""Session transcripts: every message once, in a file a person (and the search index) can read.

On disk, in the user's namespace::

    agents/<agent>/sessions/<session>.jsonl       the transcript
    agents/<agent>/sessions/<session>.log.jsonl   the same entries, append-only, for the index
    agents/<agent>/sessions/sessions.json         {"sessions": {<id>: {...}}, "version": 1}

An entry is one JSON object per line::

    {"type": "message", "id": <message id>, "parent_id": <previous entry's id>,
     "timestamp": <ISO time>, "role": "user", "content": <rendered text>, "tool_call_id": ...}

Compaction summaries are written with ``"type": "summary"`` so that search never brings them
back. Offloading is idempotent: an entry's id is its message's id, and messages already in the
transcript are skipped, so offloading the whole conversation after every call appends only what
is new. Appends happen under a lock on the transcript; the ids already written are remembered
per file while the file is unchanged on disk.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.memory.render import is_summary, render_content
from harness.workspace import (
    AGENTS_DIR,
    WorkspaceManager,
    atomic_write,
    file_lock,
    safe_segment,
    scoped,
)

__all__ = ["SESSIONS_INDEX", "TranscriptWriter", "sessions_dir"]

SESSIONS_INDEX: Final = "sessions.json"


def sessions_dir(agent: str) -> str:
    """The workspace-relative directory of an agent's transcripts (before user scoping)."""
    return f"{AGENTS_DIR}/{safe_segment(agent)}/sessions"


@dataclass
class _Known:
    size: int
    ids: set[str]
    last_id: str | None


class TranscriptWriter:
    """Appends new messages of a session to its transcript files."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.agent = agent
        self._known: dict[Path, _Known] = {}
        self._guard = threading.Lock()

    def transcript_path(self, ctx: RuntimeContext) -> str:
        """The workspace path of the session's transcript (``.jsonl``)."""
        session = safe_segment(ctx.session_id or "default")
        return scoped(f"{sessions_dir(self.agent)}/{session}.jsonl", ctx.user_id)

    async def offload(self, ctx: RuntimeContext, messages: Sequence[Msg]) -> int:
        """Append the messages not yet in the transcript; returns how many were appended."""
        path = self.transcript_path(ctx)
        entries = list(messages)
        appended = await asyncio.to_thread(self._offload, path, ctx, entries)
        if appended:
            self.workspace.generation += 1
        return appended

    def _offload(self, rel: str, ctx: RuntimeContext, messages: list[Msg]) -> int:
        path = self.workspace.local_path(rel)
        log = path.with_name(path.name.removesuffix(".jsonl") + ".log.jsonl")
        with self._guard, file_lock(path):
            known = self._known_ids(path)
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
            for target in (path, log):
                with target.open("ab") as handle:
                    handle.write(data)
            known.size = path.stat().st_size
            self._update_index(path.parent / SESSIONS_INDEX, ctx, first_user, len(known.ids))
            return len(lines)

    def _known_ids(self, path: Path) -> _Known:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = -1
        known = self._known.get(path)
        if known is not None and known.size == size:
            return known
        known = _Known(size=size, ids=set(), last_id=None)
        if size >= 0:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry_id = json.loads(line).get("id")
                except (ValueError, AttributeError):
                    continue
                if isinstance(entry_id, str):
                    known.ids.add(entry_id)
                    known.last_id = entry_id
        self._known[path] = known
        return known

    def _update_index(self, path: Path, ctx: RuntimeContext, title: str, count: int) -> None:
        with file_lock(path):
            try:
                index = json.loads(path.read_text(encoding="utf-8"))
                sessions = index["sessions"]
                if not isinstance(sessions, dict):
                    raise TypeError
            except (OSError, ValueError, KeyError, TypeError):
                index, sessions = {"version": 1}, {}
            session_id = ctx.session_id or "default"
            record: dict[str, Any] = dict(sessions.get(session_id) or {})
            if title and not record.get("title"):
                record["title"] = title[:120]
            record["messages"] = count
            record["updated_at"] = datetime.now(UTC).isoformat()
            sessions[session_id] = record
            index["sessions"] = sessions
            index.setdefault("version", 1)
            atomic_write(path, (json.dumps(index, ensure_ascii=False, indent=2) + "\n").encode())


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
