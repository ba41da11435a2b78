"""Consolidation: the daily logs written since the last run are merged into MEMORY.md.

A model rewrites MEMORY.md from its current text and the new daily-log entries, within a size
limit (``max_memory_tokens``, about four characters per token). Everything goes through the
:class:`~harness.workspace.WorkspaceManager`, in the user's namespace, so it sees what the
flush wrote wherever that is. The watermark, ``memory/.consolidation_state``, holds the time
the last successful run started; daily logs modified after it are "new".

The rewrite is atomic (temp file, fsync, rename: a crash leaves the old or the new MEMORY.md)
and never clobbers an edit: it replaces MEMORY.md only if the file still holds the text the
model was given. If somebody (the agent through ``memory_save``, a person) changed it
meanwhile, the consolidator reads it again and redoes the merge, up to three times. A blank or
failed model answer changes nothing, and the watermark stays where it was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from harness.kernel import ChatModel, Msg, TextBlock, complete
from harness.memory.config import Clock, utc_now
from harness.workspace import MEMORY_DIR, MEMORY_MD, WorkspaceManager

__all__ = [
    "CONSOLIDATION_SYSTEM_PROMPT",
    "STATE_PATH",
    "ConsolidationResult",
    "MemoryConsolidator",
]

logger = logging.getLogger(__name__)

STATE_PATH: Final = f"{MEMORY_DIR}/.consolidation_state"
"""The watermark file (ISO time of the last successful run's start)."""

MAX_ATTEMPTS: Final = 3

CONSOLIDATION_SYSTEM_PROMPT: Final = """\
You are a memory consolidation assistant and you own MEMORY.md, the user's curated long-term \
memory. You are given the current MEMORY.md and new entries from the daily logs.

Write the complete new MEMORY.md (the whole file, not a diff) in markdown:
- MEMORY.md is the single source of truth; keep what is still true in it.
- Promote only durable, reusable facts from the new entries; drop passing details.
- Do not duplicate: merge related facts under clear section headers.
- Update or remove facts the new entries make stale or contradict.
- Stay within {tokens} tokens (about {chars} characters): prefer recent and often-used facts.
Output only the file's content."""


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    """What a run did: ``updated`` when MEMORY.md was rewritten, and which logs it merged."""

    updated: bool
    merged: tuple[str, ...] = ()
    reason: str = ""


class MemoryConsolidator:
    """Merges new daily-log entries into MEMORY.md, one user's namespace at a time."""

    def __init__(
        self,
        workspace: WorkspaceManager,
        model: ChatModel,
        *,
        max_memory_tokens: int = 4000,
        clock: Clock = utc_now,
    ) -> None:
        self.workspace = workspace
        self.model = model
        self.max_memory_tokens = max_memory_tokens
        self.clock = clock

    async def watermark(self, user_id: str | None = None) -> datetime:
        """The start time of the last successful run (the epoch if there was none)."""
        raw = (await self.workspace.read_own(STATE_PATH, user_id) or "").strip()
        try:
            value = datetime.fromisoformat(raw)
        except ValueError:
            return datetime.fromtimestamp(0, UTC)
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    async def consolidate(self, user_id: str | None = None) -> ConsolidationResult:
        """Merge the daily logs modified since the watermark into the user's MEMORY.md."""
        started = self.clock()
        since = await self.watermark(user_id)
        logs = [
            info
            for info in await self.workspace.list_own(MEMORY_DIR, user_id)
            if info.path.endswith(".md") and info.modified > since.timestamp()
        ]
        entries = []
        for info in logs:
            text = (await self.workspace.read_own(info.path, user_id) or "").strip()
            if text:
                entries.append(f"### {info.path.rsplit('/', 1)[-1]}\n{text}\n")
        if not entries:
            return ConsolidationResult(updated=False, reason="no new daily-log entries")
        for _attempt in range(MAX_ATTEMPTS):
            current = await self.workspace.read_own(MEMORY_MD, user_id) or ""
            # A user without a MEMORY.md of their own starts from the shared one, which their
            # prompts have shown them so far.
            base = current or (await self.workspace.read_own(MEMORY_MD) or "" if user_id else "")
            merged = await self._merge(base, since, "\n".join(entries))
            if not merged:
                logger.warning("consolidation skipped: the model returned nothing")
                return ConsolidationResult(updated=False, reason="blank model answer")
            if await self.workspace.replace_text(
                MEMORY_MD, merged + "\n", expected=current, user_id=user_id
            ):
                await self.workspace.write_text(STATE_PATH, started.isoformat(), user_id)
                return ConsolidationResult(updated=True, merged=tuple(info.path for info in logs))
            logger.info("MEMORY.md changed during consolidation; merging again")
        return ConsolidationResult(updated=False, reason="MEMORY.md kept changing; will retry")

    async def _merge(self, current: str, since: datetime, entries: str) -> str:
        tokens = self.max_memory_tokens
        system = CONSOLIDATION_SYSTEM_PROMPT.format(tokens=tokens, chars=tokens * 4)
        window = "" if since.timestamp() == 0 else f" (since {since.isoformat()})"
        user = (
            f"Current MEMORY.md:\n{current.strip() or '(empty)'}\n\n"
            f"New daily log entries to merge{window}:\n{entries}"
        )
        response = await complete(
            self.model, [Msg(role="system", content=system), Msg(role="user", content=user)]
        )
        return "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
