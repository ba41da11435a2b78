"""Consolidation: the daily logs written since the last run are merged into MEMORY.md.

A model rewrites MEMORY.md from its current text and the new daily-log entries, within a size
limit (``max_memory_tokens``, about four characters per token). Everything goes through the
:class:`~harness.workspace.WorkspaceManager`, in the user's namespace, so it sees what the
flush wrote wherever that is. The watermark, ``memory/.consolidation_state``, holds the time
the last successful run started; daily logs modified after it are "new".

Only what is not untrusted is merged (:mod:`harness.memory.provenance`): a line recorded as
drawn from content no user typed, or rejected by a reviewer, stays out; a line without a record
(from before provenance, or written through the file tools) is unknown, and what it becomes in
MEMORY.md is unknown too. What waits for review or was rejected is not shown to the model, and
its removal from MEMORY.md is not a lost fact. Every line of the answer is attributed by code
to the lines it is drawn from (:func:`~harness.memory.provenance.attribute`) and recorded with
the lowest trust of them; a line drawn from none of them is the model's own and is left out.

MEMORY.md may hold facts that exist nowhere else (``memory_save`` into a section writes only
there), so the model's answer is treated like a migration that must prove itself before it
runs (:func:`refusal`): an answer cut by the length limit, blank, a bare sentinel such as
``NO_REPLY``, or one that leaves out a fact of the current file is refused, with the reason in
the log and the result, and MEMORY.md stays as it was. The answer has an output budget of its
own (``max_output_tokens``), so a small ``max_tokens`` the user gave the model for chatting
does not cut it. Before a rewrite the current text is kept in the history
(:mod:`harness.memory.history`), from which ``harness memory restore`` brings it back.

The rewrite is atomic (temp file, fsync, rename: a crash leaves the old or the new MEMORY.md)
and never clobbers an edit: it replaces MEMORY.md only if the file still holds the text the
model was given. If somebody (the agent through ``memory_save``, a person) changed it
meanwhile, the consolidator reads it again and redoes the merge, up to three times. A refused
or failed model answer changes nothing, and the watermark stays where it was.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from harness.kernel import ChatModel, ChatResponse, Msg, TextBlock, complete
from harness.memory.config import Clock, utc_now
from harness.memory.history import MemoryHistory
from harness.memory.provenance import (
    Entry,
    MemoryBook,
    Provenance,
    Source,
    Trust,
    attribute,
    entry_digest,
    is_fact,
    lowest,
)
from harness.workspace import MEMORY_DIR, MEMORY_MD, WorkspaceManager

__all__ = [
    "CONSOLIDATION_SYSTEM_PROMPT",
    "STATE_PATH",
    "ConsolidationResult",
    "MemoryConsolidator",
    "refusal",
]

logger = logging.getLogger(__name__)

STATE_PATH: Final = f"{MEMORY_DIR}/.consolidation_state"
"""The watermark file (ISO time of the last successful run's start)."""

MAX_ATTEMPTS: Final = 3

CONSOLIDATION_SYSTEM_PROMPT: Final = """\
You are a memory consolidation assistant and you own MEMORY.md, the user's curated long-term \
memory. You are given the current MEMORY.md and new entries from the daily logs.

Write the complete new MEMORY.md (the whole file, not a diff) in markdown:
- MEMORY.md is the single source of truth: keep every fact in it. You may reword, merge \
duplicates and move facts between sections, but never leave one out.
- Promote only durable, reusable facts from the new entries; drop passing details.
- Do not duplicate: merge related facts under clear section headers.
- When a new entry makes a fact stale, rewrite that fact to what is true now.
- Aim for {tokens} tokens (about {chars} characters): say each fact briefly.
Output only the file's content."""

CUT_STOP_REASONS: Final = frozenset({"length", "max_tokens", "model_length"})
"""Stop reasons (OpenAI and llama.cpp, Anthropic, vLLM) of an answer cut by its token limit."""

KEPT_FRACTION: Final = 0.5
"""A fact is kept when at least this share of its words is in the new file (rewording is fine)."""

_SENTINEL = re.compile(r"[A-Z][A-Z_ ]{1,39}")
_WORD = re.compile(r"[^\W_]+")
_BULLET = re.compile(r"([-*+]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    """What a run did: ``updated`` when MEMORY.md was rewritten, and which logs it merged."""

    updated: bool
    merged: tuple[str, ...] = ()
    reason: str = ""
    refused: bool = False
    """The model answered, and its answer was refused (:func:`refusal`)."""
    dropped: tuple[str, ...] = ()
    """Lines of the answer drawn from nothing it was given (left out of MEMORY.md)."""


class MemoryConsolidator:
    """Merges new daily-log entries into MEMORY.md, one user's namespace at a time."""

    def __init__(
        self,
        workspace: WorkspaceManager,
        model: ChatModel,
        *,
        max_memory_tokens: int = 4000,
        max_output_tokens: int | None = None,
        history: MemoryHistory | None = None,
        provenance: Provenance | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.workspace = workspace
        self.model = model
        self.max_memory_tokens = max_memory_tokens
        self.max_output_tokens = max_output_tokens
        self.history = history or MemoryHistory(workspace, clock=clock)
        self.provenance = provenance or Provenance.for_workspace(workspace)
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
        book = await self.provenance.book(user_id)
        texts = [
            (info.path, await self.workspace.read_own(info.path, user_id) or "") for info in logs
        ]
        # Word sets of every line: work for a thread, not the event loop.
        entries, sources = await asyncio.to_thread(_given, book, texts, since)
        if not entries:
            return ConsolidationResult(updated=False, reason="no new daily-log entries")
        for attempt in range(MAX_ATTEMPTS):
            if attempt:  # MEMORY.md changed: so may have the records of its lines
                book = await self.provenance.book(user_id)
            # The user's own MEMORY.md only: the shared one is the memory of calls without a
            # user, which no user may read (layout.shared_with_users), so none starts from it.
            current = await self.workspace.read_own(MEMORY_MD, user_id) or ""
            kept = await asyncio.to_thread(book.kept, MEMORY_MD, current)  # not what waits
            response = await self._merge(kept, since, "\n".join(entries))
            answer = _text(response)
            merged, records, dropped, refused = await asyncio.to_thread(
                _checked, answer, response.stop_reason, kept, book, sources
            )
            if refused is not None:
                shown = MEMORY_MD if not user_id else f"{MEMORY_MD} of user {user_id!r}"
                logger.warning("consolidation refused, %s kept as it was: %s", shown, refused)
                reason = f"refused: {refused}"
                return ConsolidationResult(updated=False, reason=reason, refused=True)
            if dropped:
                logger.warning(
                    "consolidation left out %d line(s) drawn from nothing it was given: %s",
                    len(dropped),
                    "; ".join(repr(line[:60]) for line in dropped[:3]),
                )
            await self.history.save(current, user_id)
            await self.provenance.add(user_id, records)  # first: no line without a record
            if await self.workspace.replace_text(
                MEMORY_MD, merged + "\n", expected=current, user_id=user_id
            ):
                await self.workspace.write_text(STATE_PATH, started.isoformat(), user_id)
                return ConsolidationResult(
                    updated=True, merged=tuple(info.path for info in logs), dropped=dropped
                )
            logger.info("MEMORY.md changed during consolidation; merging again")
        return ConsolidationResult(updated=False, reason="MEMORY.md kept changing; will retry")

    async def _merge(self, current: str, since: datetime, entries: str) -> ChatResponse:
        tokens = self.max_memory_tokens
        system = CONSOLIDATION_SYSTEM_PROMPT.format(tokens=tokens, chars=tokens * 4)
        window = "" if since.timestamp() == 0 else f" (since {since.isoformat()})"
        user = (
            f"Current MEMORY.md:\n{current.strip() or '(empty)'}\n\n"
            f"New daily log entries to merge{window}:\n{entries}"
        )
        # Room for all it was given (a merge is never longer), whatever limit chatting uses,
        # and no more: a small model that rambles on is cut, and refused, soon.
        budget = self.max_output_tokens or (len(current) + len(entries)) // 3 + 512
        return await complete(
            self.model,
            [Msg(role="system", content=system), Msg(role="user", content=user)],
            max_tokens=budget,
        )


def _given(
    book: MemoryBook, texts: list[tuple[str, str]], since: datetime
) -> tuple[list[str], dict[str, Source]]:
    """What consolidation is given from the daily logs, and the sources it was given.

    Not what waits for review or was rejected; a line without a record (from before
    provenance, or written by hand) is unknown, and stays so in MEMORY.md. Then the entries a
    reviewer promoted since, wherever they were written.
    """
    entries = []
    sources: dict[str, Source] = {}
    for path, text in texts:
        facts = {
            key: source
            for key, source in book.sources(path, text).items()
            if source.trust is not Trust.UNTRUSTED
        }
        if facts:
            sources.update(facts)
            entries.append(f"### {path.rsplit('/', 1)[-1]}\n{book.kept(path, text).strip()}\n")
    promoted = book.promoted_since(since.timestamp())
    if promoted:
        sources.update({e.id: Source.of(e.text, Trust.OPERATOR) for e in promoted})
        entries.append("### promoted by a reviewer\n" + "\n".join(f"- {e.text}" for e in promoted))
    return entries, sources


def _checked(
    answer: str, stop_reason: str | None, kept: str, book: MemoryBook, given: dict[str, Source]
) -> tuple[str, list[Entry], tuple[str, ...], str | None]:
    """What of the answer may be written, its records, the lines left out, and the refusal.

    The answer as given is refused for what :func:`refusal` says (cut, blank, a sentinel), and
    so is what is left of it once the lines drawn from nothing are left out.
    """
    merged, records, dropped = _attributed(answer, book, {**book.sources(MEMORY_MD, kept), **given})
    return merged, records, dropped, refusal(kept, answer, stop_reason) or refusal(kept, merged)


def _attributed(
    answer: str, book: MemoryBook, sources: dict[str, Source]
) -> tuple[str, list[Entry], tuple[str, ...]]:
    """The answer without lines drawn from none of ``sources``, and the records of the rest.

    A record vouches for one line: a line is recorded unless a record of the same text and
    trust is left for it (one not taken by an earlier copy in the answer).
    """
    lines: list[str] = []
    records: list[Entry] = []
    dropped: list[str] = []
    taken: Counter[tuple[str, Trust]] = Counter()
    # The model read all of them: a line no trusted one holds is as low as the lowest.
    context = lowest(source.trust for source in sources.values())
    for line in answer.splitlines():
        if not is_fact(line):
            lines.append(line)
            continue
        judged = attribute(line, (), sources, context)
        if not judged.sources:
            dropped.append(line.strip())
            continue
        lines.append(line)
        key = (entry_digest(line), judged.trust)
        taken[key] += 1
        same = [e for e in book.of_line(MEMORY_MD, line) if book.trust(e) is judged.trust]
        if len(same) < taken[key]:
            records.append(
                Entry.new(MEMORY_MD, line.strip(), "consolidation", judged.trust, judged.sources)
            )
    return "\n".join(lines).strip(), records, tuple(dropped)


def refusal(current: str, answer: str, stop_reason: str | None = None) -> str | None:
    """Why a model's rewrite of MEMORY.md must not replace ``current``; None when it may.

    Refused: an answer cut by its token limit, a blank one, a bare sentinel (``NO_REPLY``,
    ``NOTHING NEW``), and one that leaves out a fact of ``current``. A fact is a line that is
    not a heading; it is kept when at least :data:`KEPT_FRACTION` of its words appear in the
    answer, so merged, reworded and moved facts pass, and a dropped section does not.
    """
    if stop_reason in CUT_STOP_REASONS:
        return f"the answer was cut by its token limit (stop reason {stop_reason!r})"
    if not answer.strip():
        return "the answer is blank"
    if _SENTINEL.fullmatch(answer.strip()):
        return f"the answer is {answer.strip()!r}, not a memory file"
    words = set(_words(answer))
    lost = [fact for fact in _facts(current) if not _kept(fact, words)]
    if lost:
        shown = "; ".join(repr(fact if len(fact) <= 60 else fact[:57] + "...") for fact in lost[:3])
        more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
        return f"the answer leaves out {len(lost)} fact(s) of MEMORY.md: {shown}{more}"
    return None


def _facts(text: str) -> list[str]:
    return [_BULLET.sub("", line.strip(), count=1) for line in text.splitlines() if is_fact(line)]


def _kept(fact: str, words: set[str]) -> bool:
    own = set(_words(fact))
    return not own or len(own & words) >= KEPT_FRACTION * len(own)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if len(w) > 2 or w.isdigit()]


def _text(response: ChatResponse) -> str:
    return "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
