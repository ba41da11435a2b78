"""The sessions a user has, newest first, with their titles: one listing for the CLI, HTTP, page.

A session's title lives beside its messages, in ``meta.json`` of its directory::

    [users/<user>/]agents/<agent>/context/<session>/meta.json   {"title": ..., "by": ...}

A session nobody titled gets the head of its first user message, worked out once when it is
first listed and then kept in ``meta.json`` (``"by": "auto"``), so a listing reads one small
file per session, not every conversation. A title someone gave (``"by": "user"``) is never
replaced by the automatic one.

Recency is the time the session's messages were last written, as the store's listing reports
it. A directory without a messages file (a session deleted, or never saved) is not listed.

Titles are text a user or a model wrote: they are cleaned of control characters and cut to
:data:`MAX_TITLE_CHARS`, and every reader shows them as text, never as markup.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from harness.context import RuntimeContext
from harness.errors import HarnessError
from harness.session.store import MESSAGES_FILE, SessionStore
from harness.workspace import (
    FileInfo,
    WorkspaceManager,
    safe_segment,
    saved_sessions_dir,
    session_dir,
)

__all__ = ["MAX_TITLE_CHARS", "META_FILE", "SessionCatalogue", "SessionInfo", "clean_title"]

logger = logging.getLogger(__name__)

META_FILE: Final = "meta.json"
"""The file, in a session's directory, holding its title."""

MAX_TITLE_CHARS: Final = 80

_SPACE: Final = re.compile(r"\s+")


def clean_title(text: str) -> str:
    """``text`` as a title: one line of printable text, at most :data:`MAX_TITLE_CHARS`.

    Control and format characters (newlines, bidi overrides, zero-width joiners) are dropped or
    turned into spaces, so a title cannot break a listing's lines or disguise itself.
    """
    kept = "".join(
        " " if unicodedata.category(ch) in {"Cc", "Zl", "Zp"} else ch
        for ch in text
        if unicodedata.category(ch) not in {"Cf", "Cs", "Co", "Cn"} or ch == "\t"
    )
    line = _SPACE.sub(" ", kept).strip()
    if len(line) > MAX_TITLE_CHARS:
        line = line[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return line


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One saved session as a listing shows it."""

    id: str
    title: str | None
    updated_at: float | None
    """When its messages were last written (seconds since the epoch), when the store knows."""
    messages: int | None = None
    """How many messages it holds, when the listing was asked to count them."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "updated_at": self.updated_at,
            "messages": self.messages,
        }


class SessionCatalogue:
    """The saved sessions of one agent, per user."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.agent = agent

    def _meta_path(self, session_id: str, user_id: str | None) -> str:
        return f"{session_dir(self.agent, session_id, user_id)}/{META_FILE}"

    async def list(
        self, user_id: str | None, *, limit: int | None = None, count_messages: bool = False
    ) -> list[SessionInfo]:
        """The user's sessions, most recently active first (at most ``limit``).

        ``count_messages`` reads every listed conversation to count its messages: for a
        command line on a local disk, not for a page that lists on every load.
        """
        root = saved_sessions_dir(self.agent, user_id)
        found: list[tuple[str, float | None]] = []
        for name in await self.workspace.list_dirs(root):
            if not _client_id(name):
                continue
            messages = _messages_file(await self.workspace.list_own(f"{root}/{name}"))
            if messages is None or messages.size == 0:
                continue
            found.append((name, messages.modified or None))
        found.sort(key=lambda item: (item[1] or 0.0, item[0]), reverse=True)
        shown = found if limit is None else found[:limit]
        return [
            SessionInfo(
                id=name,
                title=await self.title(name, user_id),
                updated_at=updated,
                messages=await self._count(name, user_id) if count_messages else None,
            )
            for name, updated in shown
        ]

    async def get(self, session_id: str, user_id: str | None) -> SessionInfo | None:
        """One session's entry; None when it holds no messages."""
        directory = session_dir(self.agent, session_id, user_id)
        messages = _messages_file(await self.workspace.list_own(directory))
        if messages is None or messages.size == 0:
            return None
        title = await self.title(session_id, user_id)
        return SessionInfo(session_id, title, messages.modified or None)

    async def title(self, session_id: str, user_id: str | None) -> str | None:
        """The session's title: the one given, else the head of its first user message."""
        meta = await self._meta(session_id, user_id)
        if isinstance(meta.get("title"), str) and meta["title"]:
            return clean_title(meta["title"])
        first = await self._first_user_text(session_id, user_id)
        if first is None:
            return None
        title = clean_title(first) or None
        if title is not None:
            await self._write_meta(session_id, user_id, {"title": title, "by": "auto"})
        return title

    async def rename(self, session_id: str, user_id: str | None, title: str) -> SessionInfo:
        """Give the session a title; a blank one goes back to the automatic title.

        Raises:
            KeyError: The session holds no messages.
        """
        if await self.get(session_id, user_id) is None:
            raise KeyError(session_id)
        cleaned = clean_title(title)
        if cleaned:
            await self._write_meta(session_id, user_id, {"title": cleaned, "by": "user"})
        else:
            await self.workspace.delete(self._meta_path(session_id, user_id))
        info = await self.get(session_id, user_id)
        assert info is not None
        return info

    async def _meta(self, session_id: str, user_id: str | None) -> dict[str, Any]:
        found = await self.workspace.get_bytes(self._meta_path(session_id, user_id))
        if found is None:
            return {}
        try:
            data = json.loads(found[0])
        except ValueError:
            logger.warning("unreadable %s of session %r: ignored", META_FILE, session_id)
            return {}
        return data if isinstance(data, dict) else {}

    async def _write_meta(self, session_id: str, user_id: str | None, meta: dict[str, str]) -> None:
        text = json.dumps(meta, ensure_ascii=False)
        try:
            await self.workspace.write_text(self._meta_path(session_id, user_id), text)
        except HarnessError as exc:  # a title is a convenience: the listing goes on without it
            logger.warning("could not keep the title of session %r: %s", session_id, exc)

    async def _first_user_text(self, session_id: str, user_id: str | None) -> str | None:
        ctx = RuntimeContext(session_id=session_id, user_id=user_id)
        for message in await SessionStore(self.workspace, self.agent).read(ctx):
            # A user turn the harness wrote (a compaction's summary, a task's notice) has a
            # name; the user's own have none.
            if message.role == "user" and message.name is None and message.text.strip():
                return message.text
        return None

    async def _count(self, session_id: str, user_id: str | None) -> int:
        ctx = RuntimeContext(session_id=session_id, user_id=user_id)
        return len(await SessionStore(self.workspace, self.agent).read(ctx))


def _messages_file(infos: Iterable[FileInfo]) -> FileInfo | None:
    return next((i for i in infos if i.path.endswith(f"/{MESSAGES_FILE}")), None)


def _client_id(name: str) -> bool:
    """Whether a session directory's name is an id a client can have used (it round-trips)."""
    try:
        return bool(name) and safe_segment(name) == name
    except ValueError:
        return False
