"""Workspace context: the workspace's files in the system prompt, kept cacheable.

Reads AGENTS.md, MEMORY.md, knowledge/KNOWLEDGE.md, the list of other knowledge files and any
configured extra files (the user's copy first, then the shared one) and appends a section to
the first system message of each step's request. HTML comments are stripped from the files.
The whole section stays within a token budget (estimated at four characters per token):
MEMORY.md is cut, by whole lines, to fit what the rest leaves, and a visible notice says how
much is shown and where the rest is.

Layout (``config.layout``). Providers cache a prompt by its prefix, so the section goes from
what changes least to what changes most, as three blocks of the system message:

1. shared by every user and session of the agent: the agent, the workspace, the OS, the
   operator's ``environment`` lines, the guidance on using the workspace, and AGENTS.md;
2. the user's: their id, MEMORY.md, the knowledge and the extra files;
3. the session's: its id and the date.

The system message's metadata says how many of its blocks are shared (``CACHE_PREFIX_BLOCKS``,
where the Anthropic adapter marks a cache breakpoint) and names the agent and user with a digest
(``CACHE_KEY``, OpenAI's ``prompt_cache_key``). ``"legacy"`` is the single block of before,
which opens with the session id and the date and so shares almost nothing.

A snapshot per session (``config.memory_refresh``). A memory write in the middle of a session
(``memory_save`` into MEMORY.md, a consolidation, an edit) must not change the system prompt,
or every cached token of the session is lost at the next step. So each session keeps the
MEMORY.md, knowledge and extra files it started with (and its date), and a change reaches the
model as a short ``<workspace_update>`` note with the lines added and removed, inserted after
the message that was last when the change was seen (at a call's first step, before the input
that opened the call, so the user's words stay last): at the same place at every later step,
so the prefix before it never changes. The snapshot is taken again after a compaction of the
session (``"compaction"``, the default; the hook listens for ``PostCompact``), only when a
session starts (``"session"``), or at every step (``"step"``, no notes). AGENTS.md is the
operator's instructions and is always shown as it is now. A note whose message is gone (a
rewrite the hook did not see) moves to the end, once.

The snapshot, its date and the notes are the session's state (``state_key``
``"workspace_context"``, :mod:`harness.kernel.state`), saved with the session: a session that
continues in another process or serve worker shows the model the same system prompt, byte for
byte, and the same notes at the same places, until the refresh point above. (Only AGENTS.md,
the operator's, and the list of unusable files are read live at every step.)

Nothing here is written back to memory: PreReasoning input is rebuilt every step, so the section
never accumulates. Reading files on every step would cost a worker-thread round trip per step
(more than the rest of a step), so the hook keeps a snapshot of the files per user and checks
them again when a write to one of them went through the
:class:`~harness.workspace.WorkspaceManager` (``generation_of``: seen at the very next step; the
harness's own writes under ``agents/``, a session saved at every step, do not count) or when
``refresh_seconds`` have passed (edits made outside the harness, by a person or another
process). The check itself re-reads only files whose modification time
or size changed. Rendered sections are cached too, keyed by everything they depend on.

Trust: everything rendered here comes from workspace files, which the model may have written
(MEMORY.md through ``memory_save``) or a user may own; it is shown as file content inside
elements, never as the operator's instructions, and the cache metadata is a digest. The lowest
label of the memory shown to a session (its snapshot and every note) is kept in its state
(:func:`~harness.memory.provenance.lowered`) until a compaction: what the model writes from a
prompt that showed an ``[unknown]`` line is no more trusted than that line.

Priority 900: it runs after every other hook has shaped the request, so the workspace section is
the last block of the system message and whatever comes before it stays a stable prompt prefix.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import platform
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeVar

from pydantic import ValidationError

from harness.kernel import (
    CACHE_KEY,
    CACHE_PREFIX_BLOCKS,
    SYNTHETIC,
    Event,
    Hook,
    Msg,
    PostCompact,
    PreReasoning,
    SessionState,
)
from harness.memory.presentation import MEMORY_IS_DATA, present_lines
from harness.memory.provenance import (
    PROMPT_TRUST,
    MemoryBook,
    Provenance,
    Trust,
    lowered,
    lowest,
)
from harness.sections import SystemSection, escape_markup
from harness.workspace import (
    AGENTS_MD,
    KNOWLEDGE_DIR,
    KNOWLEDGE_MD,
    MEMORY_MD,
    WorkspaceManager,
)
from harness.workspace.context import WorkspaceContextConfig

__all__ = ["WorkspaceContextHook"]

MAX_LISTED_KNOWLEDGE_FILES: Final = 200
"""Knowledge files listed by path; more are counted, not listed."""

_CACHE_ENTRIES: Final = 256

K = TypeVar("K")
V = TypeVar("V")


def _clean(text: str) -> str:
    """The text without its HTML comments (``<!-- ... -->``), stripped.

    In one pass: the files are the model's to write, and a regex for comments retries at each
    unclosed ``<!--`` (20,000 of them held the event loop for 15 s).
    """
    kept: list[str] = []
    start = 0
    while (opened := text.find("<!--", start)) != -1:
        closed = text.find("-->", opened + 4)
        if closed == -1:
            break  # unclosed: no later comment is closed either
        kept.append(text[start:opened])
        start = closed + 3
    kept.append(text[start:])
    return "".join(kept).strip()


def _element(tag: str, content: str) -> str:
    """``content`` inside ``<tag>``: escaped, so that it cannot close the element (module docs)."""
    if not content:
        return f"  <{tag}></{tag}>"
    lines = escape_markup(content).splitlines()
    body = "\n".join(f"    {line}" if line else "" for line in lines)
    return f"  <{tag}>\n{body}\n  </{tag}>"


def _tag_for(path: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", path.lower())


def _fit_memory(memory: str, available_chars: int, notice_hint: str) -> str:
    """Keep whole lines of MEMORY.md within ``available_chars`` of the rendered section.

    Each kept line costs its length plus its indentation and newline in ``<memory_context>``;
    when lines are cut, a notice says how much is shown and where the rest is.
    """
    if len(memory) + 5 * (memory.count("\n") + 1) <= available_chars:
        return memory
    lines = memory.splitlines()
    notice = (
        f"... (memory truncated: showing {{kept}} of {len(lines)} lines of MEMORY.md"
        f"{notice_hint}) ..."
    )
    budget = available_chars - len(notice) - 16
    kept: list[str] = []
    size = 0
    for line in lines:
        cost = len(line) + 5
        if size + cost > budget:
            break
        kept.append(line)
        size += cost
    shown = "\n".join(kept).rstrip()
    return shown + ("\n\n" if shown else "") + notice.format(kept=len(kept))


def _guidance(
    root: str,
    tools: AbstractSet[str],
    extra_files: Sequence[str],
    *,
    auto_memory: bool,
    config: WorkspaceContextConfig,
) -> str:
    readers = [name for name in ("read_file", "grep_files", "glob_files") if name in tools]
    parts = [
        "## Domain Knowledge\n"
        "The knowledge/ folder of the workspace is the source of truth for domain facts. "
        "<domain_knowledge_context> holds knowledge/KNOWLEDGE.md and the paths of the other "
        "knowledge files"
        + (f"; open the ones you need with {', '.join(readers)}." if readers else ".")
    ]
    if "memory_search" in tools:
        get = ", then memory_get for the lines you need" if "memory_get" in tools else ""
        parts.append(
            "## Memory Recall\n"
            "Before answering about earlier work, decisions, dates, people or preferences, run "
            f"memory_search over MEMORY.md, memory/*.md and past conversations{get}. "
            "Cite what you use as memory_search shows it: `Source: <path>#L<line>`."
        )
    persistence = []
    if "memory_save" in tools:
        persistence.append(
            "When you learn a durable fact, decision or preference, record it with memory_save "
            "(one self-contained sentence; it goes to today's log, or to a section of MEMORY.md "
            'with target="MEMORY.md#<Section>"). Do not rewrite MEMORY.md yourself: it is '
            "consolidated from the daily logs."
        )
    else:
        editors = [name for name in ("edit_file", "write_file") if name in tools]
        if editors:
            persistence.append(
                "Keep MEMORY.md current: when you learn a durable fact, decision or preference, "
                f"add it as one concise bullet with {' or '.join(editors)}, without duplicates."
            )
    if auto_memory:
        persistence.append(
            "Facts from each conversation are also extracted automatically into memory/ at "
            "the end of every turn."
        )
    if persistence:
        parts.append("## Memory Persistence\n" + " ".join(persistence))
    parts.append(
        f"## Workspace\nYour workspace is {root}. Follow the persona and rules of AGENTS.md."
    )
    parts.append(MEMORY_IS_DATA)
    files = ", ".join(["MEMORY.md", "knowledge/KNOWLEDGE.md", *extra_files])
    where = "<loaded_context> below holds" if config.layout == "legacy" else "Below are"
    if config.memory_refresh == "step":
        freshness = (
            f"{where} the current AGENTS.md, {files}. They are refreshed whenever they change, "
            "so you do not need to read them again."
        )
    else:
        since = "started" if config.memory_refresh == "session" else "started or was compacted"
        freshness = (
            f"{where} AGENTS.md as it is now, and {files} as they were when this session "
            f"{since}. Changes made since then reach you as <workspace_update> notes in the "
            "conversation, which are newer than the copy here; you do not need to read the "
            "files again."
        )
    parts.append(f"## Workspace Files (Injected)\n{freshness}")
    return "\n\n".join(parts)


_MEMORY_FILES: Final = (MEMORY_MD, KNOWLEDGE_MD)
MAX_NOTE_LINES: Final = 40
"""Changed lines a ``<workspace_update>`` note shows per file; the rest are counted."""


class WorkspaceContextHook(Hook):
    """Injects the workspace section into every reasoning step's system message."""

    priority = 900
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning, PostCompact)
    state_key: ClassVar[str] = "workspace_context"

    def __init__(
        self,
        workspace: WorkspaceManager,
        *,
        agent_name: str,
        config: WorkspaceContextConfig,
        auto_memory: bool = False,
        provenance: Provenance | None = None,
    ) -> None:
        self.workspace = workspace
        self.provenance = provenance or Provenance.for_workspace(workspace)
        self.agent_name = agent_name
        self.config = config
        self.auto_memory = auto_memory
        workspace.watch(*config.context_files)  # their writes make the snapshot stale too
        self._static = (
            f"OS: {platform.system()} {platform.release()}\nTemp dir: {tempfile.gettempdir()}"
        )
        self._snapshots: dict[str | None, _Snapshot] = {}
        self._sections: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._metadata: dict[tuple[int, str | None], dict[str, object]] = {}
        self._versions = itertools.count()
        self._system = SystemSection()

    async def on_event(self, event: Event) -> None:
        if isinstance(event, PostCompact):
            event.state.set(PROMPT_TRUST, None)  # what it showed is summarized: the summary's
            view = self._restored(event.state)
            if view is not None and not view.compacted:
                view.compacted = True
                self._keep(event.state, view)
            return
        assert isinstance(event, PreReasoning)
        messages = event.messages
        before = len(messages[0].content) if messages and messages[0].role == "system" else 0
        blocks, view = await self._prompt(event)
        lowered(event.state, lowest((view.shown.trust, view.told.trust)))
        metadata = self._cache_metadata(before, event.ctx.user_id)
        messages = self._system.apply(messages, blocks, metadata)
        newest = event.memory[-1].id if event.memory else None
        if view.notes and view.reanchor({message.id for message in messages}, newest):
            self._keep(event.state, view)
        event.messages = _with_notes(messages, view)

    async def section(self, event: PreReasoning) -> str:
        """The full workspace section for this step, its blocks joined."""
        blocks, _ = await self._prompt(event)
        return "\n\n".join(blocks)

    async def _prompt(self, event: PreReasoning) -> tuple[tuple[str, ...], _SessionView]:
        """The blocks of this step's section, and the session's view (snapshot and notes)."""
        live = await self._snapshot(event.ctx.user_id)
        view = self._view(event, live)
        tools = frozenset(tool.name for tool in event.tools)
        agents = live.texts.get(AGENTS_MD, "")
        shown = (AGENTS_MD, MEMORY_MD, KNOWLEDGE_MD, *self.config.context_files)
        unusable = tuple(
            sorted(
                (path, why)
                for path, why in self.workspace.unusable_in(event.ctx.user_id).items()
                if path in shown  # the files this section reads, each time it reads them
            )
        )
        key = (
            agents,
            view.shown.version,
            view.date,
            event.ctx.session_id,
            event.ctx.user_id,
            tools,
            unusable,
        )
        blocks = self._sections.get(key)
        if blocks is None:
            texts = {**view.shown.texts, AGENTS_MD: agents}
            blocks = self.render(
                event, texts, view.shown.knowledge_files, tools, view.date, unusable
            )
            _remember(self._sections, key, blocks)
        return blocks, view

    def _view(self, event: PreReasoning, live: _Snapshot) -> _SessionView:
        """The session's view, taken again when the policy says so, with a note for changes."""
        refresh = self.config.memory_refresh
        today = _today()
        if refresh == "step":  # nothing to remember: every step shows the files as they are
            return _SessionView(shown=live, told=live, date=today, told_date=today)
        view = self._restored(event.state, live)
        if view is None or (view.compacted and refresh == "compaction"):
            view = _SessionView(shown=live, told=live, date=today, told_date=today)
            self._keep(event.state, view)
            return view
        if live.version != view.told.version or today != view.told_date:
            text = _change_note(view.told, live, view.told_date, today)
            if text:
                note = Msg(
                    role="user", name="workspace_update", content=text, metadata={SYNTHETIC: True}
                )
                view.notes.append((_anchor(event), note))
            view.told, view.told_date = live, today
            self._keep(event.state, view)
        return view

    def _restored(self, state: SessionState, live: _Snapshot | None = None) -> _SessionView | None:
        """The session's view as its state holds it (None for a session that has none yet)."""
        cached = state.cached(self.state_key)
        if isinstance(cached, _SessionView):
            return cached
        value = state.get(self.state_key)
        if value is None:
            return None
        view = _SessionView.decode(value, live, self._versions)
        if view is None:
            return None  # a state this version cannot read: the session starts a new view
        state.remember(self.state_key, view)
        return view

    def _keep(self, state: SessionState, view: _SessionView) -> None:
        state.set(self.state_key, view.encode(), cache=view)

    def _cache_metadata(self, before: int, user_id: str | None) -> dict[str, object] | None:
        """What the system message says to the adapters about caching (module docs)."""
        if self.config.layout == "legacy":
            return None
        key = (before, user_id)
        metadata = self._metadata.get(key)
        if metadata is None:
            who = hashlib.sha256(f"{self.agent_name}\n{user_id or ''}".encode()).hexdigest()
            metadata = {CACHE_PREFIX_BLOCKS: before + 1, CACHE_KEY: f"harness-{who[:32]}"}
            _remember(self._metadata, key, metadata)
        return metadata

    async def _snapshot(self, user_id: str | None) -> _Snapshot:
        cached = self._snapshots.get(user_id)
        now = time.monotonic()
        if (
            cached is not None
            and cached.generation == self.workspace.generation_of(user_id)
            and now - cached.taken_at < self.config.refresh_seconds
        ):
            return cached
        generation = self.workspace.generation_of(user_id)
        paths = [AGENTS_MD, MEMORY_MD, KNOWLEDGE_MD, *self.config.context_files]
        files = await self.workspace.read_first(paths, user_id, self.config.context_files)
        listing = await self.workspace.list_files(KNOWLEDGE_DIR, user_id)
        texts = {path: _clean(entry.text) for path, entry in files.items()}
        trust = Trust.USER  # the lowest label the section shows
        if MEMORY_MD in texts:  # shown as memory shows it: labelled, nothing that waits
            own = files[MEMORY_MD].path != MEMORY_MD  # the user's copy, not the shared one
            book = await self._book(user_id if own else None)
            # A thread's work: MEMORY.md is the model's to write, megabytes of it.
            texts[MEMORY_MD], trust = await asyncio.to_thread(_shown, texts[MEMORY_MD], book)
        knowledge_files = tuple(p for p in listing if p != KNOWLEDGE_MD)
        if (
            cached is not None
            and cached.texts == texts
            and cached.knowledge_files == knowledge_files
        ):
            version = cached.version  # unchanged: rendered sections stay valid
        else:
            version = next(self._versions)
        snapshot = _Snapshot(
            version=version,
            texts=texts,
            knowledge_files=knowledge_files,
            taken_at=now,
            generation=generation,
            trust=trust,
        )
        _remember(self._snapshots, user_id, snapshot)
        return snapshot

    async def _book(self, user_id: str | None) -> MemoryBook:
        """The records of a MEMORY.md's owner (a line without one shows as unknown)."""
        return await self.provenance.book(user_id)

    def render(
        self,
        event: PreReasoning,
        text: Mapping[str, str],
        knowledge_files: Sequence[str],
        tools: AbstractSet[str],
        today: str,
        unusable: Sequence[tuple[str, str]] = (),
    ) -> tuple[str, ...]:
        """The section's blocks: three (shared, user, session), or one in the legacy layout.

        ``unusable``: files of the caller's namespace that were skipped because they cannot be
        read (:attr:`WorkspaceManager.unusable`), told to the model in the session's block so
        it can repair what it broke.
        """
        root = str(self.workspace.root)
        agent = [f"This is the {self.agent_name} agent, working in the workspace {root}."]
        environment = [self._static]
        if self.config.environment:
            environment.append(self.config.environment.strip())
        session = [f"Session ID: {event.ctx.session_id}"] if event.ctx.session_id else []
        if unusable:
            skipped = "\n".join(f"- {path}: {why}" for path, why in unusable)
            session.append(
                _element(
                    "unusable_files",
                    "These files of the workspace could not be read and were left out; "
                    f"repair or remove them:\n{skipped}",
                )
            )
        user = [f"User ID: {event.ctx.user_id}"] if event.ctx.user_id else []

        knowledge = text.get(KNOWLEDGE_MD, "")
        if knowledge_files:
            listed = [f"- {path}" for path in knowledge_files[:MAX_LISTED_KNOWLEDGE_FILES]]
            hidden = len(knowledge_files) - len(listed)
            if hidden > 0:
                listed.append(f"- ... and {hidden} more (use glob_files or list_files)")
            knowledge = (
                (knowledge + "\n\n" if knowledge else "") + "Knowledge files:\n" + "\n".join(listed)
            )
        extra = [path for path in self.config.context_files if text.get(path)]
        guidance = _guidance(root, tools, extra, auto_memory=self.auto_memory, config=self.config)
        agents = _element("agents_context", text.get(AGENTS_MD, ""))
        others = [
            _element("domain_knowledge_context", knowledge),
            *(_element(_tag_for(path), text[path]) for path in extra),
        ]

        def assemble(memory: str) -> tuple[str, ...]:
            shown = _element("memory_context", memory)
            if self.config.layout == "legacy":
                header = [*agent, f"Today is {today}.", *environment[:1], *session, *user]
                header += environment[1:]
                loaded = "\n".join(
                    ["<loaded_context>", agents, shown, *others, "</loaded_context>"]
                )
                return ("\n".join(["## Session Context", *header]) + f"\n\n{guidance}\n\n{loaded}",)
            shared = "\n".join(["## Agent Context", *agent, *environment])
            return (
                f"{shared}\n\n{guidance}\n\n{agents}",
                "\n".join(["## User Context", *user, shown, *others]),
                "\n".join(["## Session Context", *session, f"Today is {today}."]),
            )

        if "memory_search" in tools:
            hint = ": use memory_search for the rest"
        elif "read_file" in tools:
            hint = ": read MEMORY.md for the rest"
        else:
            hint = ""
        budget = self.config.max_context_tokens * 4
        available = budget - sum(len(block) + 2 for block in assemble(""))
        return assemble(_fit_memory(text.get(MEMORY_MD, ""), available, hint))


def _shown(memory: str, book: MemoryBook) -> tuple[str, Trust]:
    """MEMORY.md as the prompt shows it (nothing that waits), and the lowest label it shows."""
    shown = present_lines(MEMORY_MD, memory, book, untrusted=False)
    labels = (label for _, _, label in shown if label is not None)
    return "\n".join(line for _, line, _ in shown), lowest((Trust.USER, *labels))


def _anchor(event: PreReasoning) -> str | None:
    """The id of the message a note seen now follows (None: before the whole conversation).

    The conversation's last message; at a call's first step, the one before the input that
    opened the call (its last user messages), so that the user's words stay the last thing the
    model reads.
    """
    memory = event.memory
    index = len(memory)
    if event.step == 0:
        while index and memory[index - 1].role == "user":
            index -= 1
    return memory[index - 1].id if index else None


def _with_notes(messages: list[Msg], view: _SessionView) -> list[Msg]:
    """``messages`` with the session's notes, each after the message it follows (module docs)."""
    if not view.notes:
        return messages
    where = {message.id: index for index, message in enumerate(messages)}
    system = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    after: dict[int, list[Msg]] = {}
    for anchor, note in view.notes:  # None: the conversation was empty, so before all of it
        after.setdefault(where[anchor] if anchor is not None else system - 1, []).append(note)
    result = list(after.get(-1, ()))
    for index, message in enumerate(messages):
        result.append(message)
        result.extend(after.get(index, ()))
    return result


def _change_note(old: _Snapshot, new: _Snapshot, old_date: str, new_date: str) -> str:
    """A ``<workspace_update>`` note of what changed in the memory files, or ``""``."""
    parts: list[str] = []
    if new_date != old_date:
        parts.append(f"Today is now {new_date}.")
    paths = [
        *_MEMORY_FILES,
        *sorted(p for p in {*old.texts, *new.texts} if p not in (AGENTS_MD, *_MEMORY_FILES)),
    ]
    for path in paths:
        before, after = old.texts.get(path, ""), new.texts.get(path, "")
        if before != after:
            parts.append(_file_change(path, before, after))
    added = [p for p in new.knowledge_files if p not in old.knowledge_files]
    removed = [p for p in old.knowledge_files if p not in new.knowledge_files]
    if added or removed:
        listed = [f"+ {p}" for p in added[:MAX_NOTE_LINES]] + [
            f"- {p}" for p in removed[:MAX_NOTE_LINES]
        ]
        parts.append("Knowledge files changed:\n" + "\n".join(listed))
    if not parts:
        return ""
    body = "\n\n".join(parts)
    return f"<workspace_update>\n{body}\n</workspace_update>"


def _file_change(path: str, before: str, after: str) -> str:
    """The lines of ``path`` removed (``-``) and added (``+``), at most MAX_NOTE_LINES.

    Lines are compared as a multiset, in one pass over each text: a line that only moved is
    not a change. The files are the model's to write (a MEMORY.md of megabytes), and this runs
    on the event loop, so no diff whose cost grows faster than the text (``difflib.ndiff``
    stalled every user for seconds on a 1 MB file).
    """
    old_lines, new_lines = before.splitlines(), after.splitlines()
    common = Counter(old_lines) & Counter(new_lines)
    changed: list[str] = []
    for sign, lines in (("- ", old_lines), ("+ ", new_lines)):
        unmatched = common.copy()
        for line in lines:
            if unmatched[line] > 0:
                unmatched[line] -= 1
            elif line.strip():
                changed.append(sign + escape_markup(line))
    shown = changed[:MAX_NOTE_LINES]
    more = len(changed) - len(shown)
    tail = f"\n... and {more} more changed lines: read {path} for all of it" if more > 0 else ""
    return f"{path} changed (- removed, + added):\n" + "\n".join(shown) + tail


_today_cache: tuple[float, str] = (0.0, "")


def _today() -> str:
    """Today's date as ``Monday Nov 30, 2026``, recomputed at most once a minute."""
    global _today_cache
    expires, text = _today_cache
    now = time.time()
    if now >= expires:
        local = time.localtime(now)
        text = f"{time.strftime('%A %b', local)} {local.tm_mday}, {local.tm_year}"
        _today_cache = (now - now % 60 + 60, text)
    return text


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The workspace files as one user sees them, at one moment."""

    version: int
    texts: Mapping[str, str]
    knowledge_files: tuple[str, ...]
    taken_at: float
    generation: int
    trust: Trust = Trust.USER
    """The lowest label of the memory it shows: what the model's context holds."""

    def encode(self) -> dict[str, Any]:
        return {
            "texts": dict(self.texts),
            "knowledge_files": list(self.knowledge_files),
            "trust": self.trust.value,
        }

    @staticmethod
    def decode(value: Any, live: _Snapshot | None, versions: Iterator[int]) -> _Snapshot:
        """A kept snapshot: ``live`` itself when it holds the same files (raises if malformed)."""
        texts, knowledge_files = value["texts"], tuple(value["knowledge_files"])
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in texts.items()):
            raise TypeError("texts")
        if not all(isinstance(path, str) for path in knowledge_files):
            raise TypeError("knowledge_files")
        if live is not None and live.texts == texts and live.knowledge_files == knowledge_files:
            return live
        # Kept before labels were counted: as low as a label it may show.
        trust = Trust(value.get("trust", Trust.UNKNOWN.value))
        return _Snapshot(next(versions), texts, knowledge_files, 0.0, -1, trust)


@dataclass(slots=True, eq=False)
class _SessionView:
    """What one session's prompt shows of the memory files, and the notes it was given since."""

    shown: _Snapshot
    """The snapshot the system prompt shows."""
    told: _Snapshot
    """The snapshot the model knows of: ``shown`` and every note since."""
    date: str
    told_date: str
    notes: list[tuple[str | None, Msg]] = field(default_factory=list)
    """(the id of the message a note follows, None before all; the note), oldest first."""
    compacted: bool = False

    def reanchor(self, present: AbstractSet[str], newest: str | None) -> bool:
        """Move every note to ``newest`` when one's message is gone; True if they moved.

        The history was rewritten under the note; from then on the notes stay there.
        """
        if all(anchor is None or anchor in present for anchor, _ in self.notes):
            return False
        self.notes = [(newest, note) for _, note in self.notes]
        return True

    def encode(self) -> dict[str, Any]:
        """The view as the session's state keeps it (JSON)."""
        return {
            "shown": self.shown.encode(),
            "told": None if self.told is self.shown else self.told.encode(),
            "date": self.date,
            "told_date": self.told_date,
            "notes": [[anchor, note.model_dump(mode="json")] for anchor, note in self.notes],
            "compacted": self.compacted,
        }

    @classmethod
    def decode(
        cls, value: object, live: _Snapshot | None, versions: Iterator[int]
    ) -> _SessionView | None:
        """The view :meth:`encode` kept; None if ``value`` is not one."""
        try:
            if not isinstance(value, dict):
                raise TypeError("not an object")
            shown = _Snapshot.decode(value["shown"], live, versions)
            told = value["told"]
            told = shown if told is None else _Snapshot.decode(told, live, versions)
            notes = [(anchor, Msg.model_validate(note)) for anchor, note in value["notes"]]
            dates = (value["date"], value["told_date"])
            if not all(isinstance(x, str) for x in dates) or not all(
                anchor is None or isinstance(anchor, str) for anchor, _ in notes
            ):
                raise TypeError("dates or anchors")
            return cls(shown, told, *dates, notes, bool(value["compacted"]))
        except (KeyError, TypeError, ValueError, ValidationError):
            return None


def _remember(cache: dict[K, V], key: K, value: V, *, limit: int = _CACHE_ENTRIES) -> None:
    """Store in a bounded cache; the oldest entry goes first."""
    cache.pop(key, None)
    cache[key] = value
    if len(cache) > limit:
        del cache[next(iter(cache))]
