"""Saved conversations, one directory per (user, agent, session).

On disk::

    <workspace>/[users/<user>/]agents/<agent>/context/<session>/messages.jsonl

one :class:`~harness.kernel.Msg` per line, as JSON. A save appends when the saved messages only
grew and otherwise rewrites the file atomically (temp file, fsync, rename), so a crash leaves the
old file or the new one. Loads and saves of one session are serialized, across threads and
processes, by ``flock`` on a lock file beside the messages. A line that cannot be parsed
(a torn write, a hand edit) is skipped on load with a warning naming the file and line; the next
save rewrites the file without it.

Messages are treated as values: a hook that changes a message replaces it with a new object
(``model_copy``) rather than editing it in place. That lets the store remember, per file, the
message objects it last read or wrote together with the file's identity (inode, size, mtime).
While the file is unchanged on disk, a load returns those messages without parsing, and a save
whose list starts with exactly those objects appends only the new ones. Any other change, here
or in another process, falls back to parsing or to a full rewrite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from harness.context import RuntimeContext
from harness.errors import StorageError
from harness.kernel import Msg
from harness.workspace import WorkspaceManager, atomic_write, file_lock, session_dir

__all__ = ["MESSAGES_FILE", "SessionStore"]

logger = logging.getLogger(__name__)

MESSAGES_FILE: Final = "messages.jsonl"
"""The file, in a session's directory, holding its messages."""


class SessionStore:
    """Loads and saves the conversations of one agent in a workspace."""

    def __init__(self, workspace: WorkspaceManager, agent: str) -> None:
        self.workspace = workspace
        self.agent = agent
        self._known: dict[Path, tuple[_FileId, tuple[Msg, ...]]] = {}

    def path(self, ctx: RuntimeContext) -> Path:
        """The local messages file of the context's session."""
        if ctx.session_id is None:
            msg = "a session id is needed to locate a saved session"
            raise ValueError(msg)
        directory = session_dir(self.agent, ctx.session_id, ctx.user_id)
        return self.workspace.local_path(f"{directory}/{MESSAGES_FILE}")

    async def load(self, ctx: RuntimeContext) -> list[Msg]:
        """The saved messages of the session; empty for a new session."""
        return await asyncio.to_thread(lambda: self._load(self.path(ctx)))

    async def save(self, ctx: RuntimeContext, messages: Sequence[Msg]) -> None:
        """Persist the session's messages (append when they only grew, else atomic rewrite)."""
        snapshot = tuple(messages)
        await asyncio.to_thread(lambda: self._save(self.path(ctx), snapshot))

    def _load(self, path: Path) -> list[Msg]:
        with file_lock(path):
            known = self._known.get(path)
            current = _file_id(path)
            if known is not None and known[0] == current:
                return list(known[1])
            messages, clean = self._parse(path)
            if clean:
                self._known[path] = (current, tuple(messages))
            else:  # the next save must rewrite the file without the bad lines
                self._known.pop(path, None)
            return messages

    def _parse(self, path: Path) -> tuple[list[Msg], bool]:
        """The file's messages, and whether every line parsed."""
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            return [], True
        except OSError as exc:
            msg = f"cannot read session file {path}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        messages: list[Msg] = []
        clean = True
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                messages.append(Msg.model_validate_json(line))
            except ValidationError as exc:
                clean = False
                problem = exc.errors()[0]["msg"]
                logger.warning("%s:%d: skipped a corrupt session line (%s)", path, number, problem)
        return messages, clean

    def _save(self, path: Path, messages: tuple[Msg, ...]) -> None:
        with file_lock(path):
            known = self._known.get(path)
            if (
                known is not None
                and known[0] == _file_id(path)
                and _starts_with(messages, known[1])
            ):
                new = messages[len(known[1]) :]
                if new:
                    _append(path, _serialize(new))
            else:
                atomic_write(path, _serialize(messages))
            self._known[path] = (_file_id(path), messages)


_FileId = tuple[int, int, int] | None
"""(inode, size, mtime_ns) of a file, or None when it does not exist."""


def _file_id(path: Path) -> _FileId:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _starts_with(messages: tuple[Msg, ...], prefix: tuple[Msg, ...]) -> bool:
    return len(messages) >= len(prefix) and all(
        a is b for a, b in zip(messages, prefix, strict=False)
    )


def _serialize(messages: Sequence[Msg]) -> bytes:
    return "".join(m.model_dump_json() + "\n" for m in messages).encode("utf-8")


def _append(path: Path, data: bytes) -> None:
    """Append whole lines.

    No fsync: an append lost to a power cut loses only the newest turn, and the next save
    notices that the file changed and rewrites it.
    """
    try:
        with path.open("ab") as handle:
            handle.write(data)
    except OSError as exc:
        msg = f"cannot append to session file {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
