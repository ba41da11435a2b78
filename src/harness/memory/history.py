"""Earlier versions of MEMORY.md: each rewrite keeps the text it replaces, and any can come back.

MEMORY.md holds facts that may exist nowhere else (``memory_save`` into a section writes only
there), so a rewrite of the whole file, a consolidation or a restore, first saves the current
text as ``memory/.history/MEMORY-<UTC time>.md`` in the same namespace, and only then replaces
the file. The newest ``keep`` versions stay; older ones are deleted after a save. The folder is
a dot-folder, so neither the search index nor consolidation reads it as a daily log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from harness.errors import StorageError
from harness.memory.config import Clock, utc_now
from harness.workspace import MEMORY_DIR, MEMORY_MD, WorkspaceManager

__all__ = ["DEFAULT_KEEP", "HISTORY_DIR", "MemoryHistory", "MemoryVersion"]

HISTORY_DIR: Final = f"{MEMORY_DIR}/.history"
DEFAULT_KEEP: Final = 10

_NAME = re.compile(r"MEMORY-(\d{8}T\d{6}\.\d{6}Z)\.md")
_STAMP = "%Y%m%dT%H%M%S.%fZ"


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """One saved version: its id (the time it was replaced, ``20261201T114700.000000Z``)."""

    id: str
    path: str
    size: int


class MemoryHistory:
    """The saved versions of one workspace's MEMORY.md files, per namespace."""

    def __init__(
        self, workspace: WorkspaceManager, *, keep: int = DEFAULT_KEEP, clock: Clock = utc_now
    ) -> None:
        if keep < 1:
            msg = f"the memory history must keep at least 1 version, got {keep}"
            raise ValueError(msg)
        self.workspace = workspace
        self.keep = keep
        self.clock = clock

    async def save(self, text: str, user_id: str | None = None) -> str | None:
        """Keep ``text`` (MEMORY.md as it is now) as a version; returns its id.

        None when ``text`` is blank; the newest version's id when that holds ``text`` already.

        Raises:
            StorageError: The version could not be written (then do not rewrite MEMORY.md).
        """
        if not text.strip():
            return None
        saved = await self.versions(user_id)
        if saved and await self.workspace.read_own(saved[0].path, user_id) == text:
            return saved[0].id  # kept already (a retried rewrite saves the same text)
        stamp = _unique(self.clock(), {version.id for version in saved})
        path = f"{HISTORY_DIR}/MEMORY-{stamp}.md"
        await self.workspace.write_text(path, text, user_id)
        for old in (await self.versions(user_id))[self.keep :]:
            await self.workspace.delete(old.path, user_id)
        return stamp

    async def versions(self, user_id: str | None = None) -> list[MemoryVersion]:
        """The saved versions, newest first."""
        found = []
        for info in await self.workspace.list_own(HISTORY_DIR, user_id):
            match = _NAME.fullmatch(info.path.rsplit("/", 1)[-1])
            if match:
                found.append(MemoryVersion(match.group(1), info.path, info.size))
        return sorted(found, key=lambda version: version.id, reverse=True)

    async def read(self, version: str, user_id: str | None = None) -> str:
        """The text of a saved version.

        Raises:
            StorageError: No version has this id.
        """
        name = f"MEMORY-{version}.md"
        text = None
        if _NAME.fullmatch(name):
            text = await self.workspace.read_own(f"{HISTORY_DIR}/{name}", user_id)
        if text is None:
            known = ", ".join(v.id for v in await self.versions(user_id)) or "none"
            msg = f"no saved MEMORY.md version {version!r}; saved versions: {known}"
            raise StorageError(msg)
        return text

    async def restore(self, version: str, user_id: str | None = None) -> str | None:
        """Put a saved version back as MEMORY.md; the text it replaces is saved first.

        Returns the id under which the replaced text was saved (None: MEMORY.md was empty).

        Raises:
            StorageError: No version has this id, or the files could not be written.
        """
        text = await self.read(version, user_id)
        current = await self.workspace.read_own(MEMORY_MD, user_id) or ""
        saved = await self.save(current, user_id)
        restored = await self.workspace.replace_text(
            MEMORY_MD, text, expected=current, user_id=user_id
        )
        if not restored:
            msg = "MEMORY.md changed while it was being restored; run the restore again"
            raise StorageError(msg)
        return saved


def _unique(now: datetime, taken: set[str]) -> str:
    """A version id for ``now`` that no saved version has (two saves in one microsecond)."""
    stamp = now.strftime(_STAMP)
    while stamp in taken:
        now = now.replace(microsecond=(now.microsecond + 1) % 1_000_000)
        stamp = now.strftime(_STAMP)
    return stamp
