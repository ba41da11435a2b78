"""What deleting a session removes: its directory, and its files elsewhere in the workspace.

A session is more than its directory (messages and state): its trace, its memory flush mark and
its compaction log live beside other sessions' files. The session package cannot know every
capability that keeps such a file, so the agent's assembly names them (``outside``), and
:meth:`SessionFiles.delete` removes them all, in the session's user namespace. What memory kept
of the session (its transcript and that transcript's rows in the search index) is memory's to
forget (:meth:`harness.memory.TranscriptWriter.forget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.context import RuntimeContext
from harness.workspace import WorkspaceManager, scoped

__all__ = ["SessionFiles"]


@dataclass(frozen=True, slots=True)
class SessionFiles:
    """The files of one agent's sessions: where each session keeps what."""

    workspace: WorkspaceManager
    outside: Callable[[RuntimeContext], Sequence[str]]
    """A session's files outside its directory, as paths within the user's namespace."""

    async def delete(self, directory: str, ctx: RuntimeContext) -> bool:
        """Delete the session's directory and its files elsewhere; whether it had a directory."""
        saved = [info.path for info in await self.workspace.list_own(directory)]
        for path in [*saved, *(scoped(path, ctx.user_id) for path in self.outside(ctx))]:
            await self.workspace.delete(path)
        return bool(saved)
