"""Saved conversations, one directory per (user, agent, session).

In the workspace (on whatever filesystem backend it uses)::

    [users/<user>/]agents/<agent>/context/<session>/messages.jsonl

one :class:`~harness.kernel.Msg` per line, as JSON. A save appends when the saved messages only
grew and otherwise replaces the file atomically, so a crash leaves the old file or the new one.
Calls on one session hold its lease (:mod:`harness.session.lease`), so a session has one
writer at a time, across processes and workers. A
line that cannot be parsed (a torn write, a hand edit) is skipped on load with a warning naming
the file and line; the next save rewrites the file without it.

Messages are treated as values: a hook that changes a message replaces it with a new object
(``model_copy``) rather than editing it in place. That lets the store remember, per file, the
message objects it last read or wrote together with the file's size and last bytes. While the
file is unchanged, a load returns those messages without parsing, and a save whose list starts
with exactly those objects appends only the new ones. Any other change, here or in another
worker, falls back to parsing or to a full rewrite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.workspace import WorkspaceManager, session_dir

__all__ = ["MESSAGES_FILE", "SessionStore"]

logger = logging.getLogger(__name__)

MESSAGES_FILE: Final = "messages.jsonl"
"""The file, in a session's directory, holding its messages."""

_TAIL: Final = 64
_PARSE_IN_THREAD: Final = 64 * 1024
"""Sessions bigger than this are parsed in a worker thread, off the event loop."""


@dataclass(frozen=True, slots=True)
class _Known:
    """What the store last read or wrote: the file's size and last bytes, and its messages."""

    size: int
    tail: bytes
    messages: tuple[Msg, ...]

    def matches(self, data: bytes) -> bool:
        return len(data) == self.size and data.endswith(self.tail)


class SessionStore:
    """Loads and saves the conversations of one agent in a workspace."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.agent = agent
        self._known: dict[str, _Known] = {}

    def path(self, ctx: RuntimeContext) -> str:
        """The workspace path of the context's session file."""
        if ctx.session_id is None:
            msg = "a session id is needed to locate a saved session"
            raise ValueError(msg)
        return f"{session_dir(self.agent, ctx.session_id, ctx.user_id)}/{MESSAGES_FILE}"

    async def load(self, ctx: RuntimeContext) -> list[Msg]:
        """The saved messages of the session; empty for a new session."""
        path = self.path(ctx)
        found = await self.workspace.get_bytes(path)
        data = found[0] if found is not None else b""
        known = self._known.get(path)
        if known is not None and known.matches(data):
            return list(known.messages)
        if len(data) > _PARSE_IN_THREAD:
            messages, clean = await asyncio.to_thread(_parse, data, path)
        else:
            messages, clean = _parse(data, path)
        if clean:
            self._known[path] = _Known(len(data), data[-_TAIL:], tuple(messages))
        else:  # the next save must rewrite the file without the bad lines
            self._known.pop(path, None)
        return messages

    async def save(self, ctx: RuntimeContext, messages: Sequence[Msg]) -> None:
        """Persist the session's messages (append when they only grew, else atomic rewrite)."""
        path = self.path(ctx)
        snapshot = tuple(messages)
        found = await self.workspace.get_bytes(path)
        data = found[0] if found is not None else b""
        known = self._known.get(path)
        if known is not None and known.matches(data) and _starts_with(snapshot, known.messages):
            new = _serialize(snapshot[len(known.messages) :])
            if new:
                await self.workspace.append_bytes(path, new)
            data += new
        else:
            data = _serialize(snapshot)
            await self.workspace.put_bytes(path, data)
        self._known[path] = _Known(len(data), data[-_TAIL:], snapshot)


def _parse(data: bytes, path: str) -> tuple[list[Msg], bool]:
    """The file's messages, and whether every line parsed."""
    messages: list[Msg] = []
    clean = True
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages.append(Msg.model_validate_json(line))
        except ValidationError as exc:
            clean = False
            problem = exc.errors()[0]["msg"]
            logger.warning("%s:%d: skipped a corrupt session line (%s)", path, number, problem)
    return messages, clean


def _starts_with(messages: tuple[Msg, ...], prefix: tuple[Msg, ...]) -> bool:
    return len(messages) >= len(prefix) and all(
        a is b for a, b in zip(messages, prefix, strict=False)
    )


def _serialize(messages: Sequence[Msg]) -> bytes:
    return "".join(m.model_dump_json() + "\n" for m in messages).encode("utf-8")
