"""Workspace context: the workspace's files in the system prompt, at every reasoning step.

Reads AGENTS.md, MEMORY.md, knowledge/KNOWLEDGE.md, the list of other knowledge files and any
configured extra files (the user's copy first, then the shared one) and appends one section to
the first system message of the step's request: a ``## Session Context`` header (agent, date,
session, user), guidance on using the workspace, and a ``<loaded_context>`` block with the
files. HTML comments are stripped from the files. The whole section stays within a token
budget (estimated at four characters per token): MEMORY.md is cut, by whole lines, to fit what
the rest leaves, and a visible notice says how much is shown and where the rest is.

Nothing here is written back to memory: PreReasoning input is rebuilt every step, so the section
never accumulates. Reading files on every step would cost a worker-thread round trip per step
(more than the rest of a step), so the hook keeps a snapshot of the files per user and checks
them again when a write went through the :class:`~harness.workspace.WorkspaceManager` (seen at
the very next step) or when ``refresh_seconds`` have passed (edits made outside the harness,
by a person or another process). The check itself re-reads only files whose modification time
or size changed. Rendered sections are cached too, keyed by everything they depend on.

Priority 900: it runs after every other hook has shaped the request, so the workspace section is
the last block of the system message and whatever comes before it stays a stable prompt prefix.
"""

from __future__ import annotations

import itertools
import platform
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from harness.kernel import Event, Hook, PreReasoning
from harness.sections import SystemSection
from harness.workspace import AGENTS_MD, KNOWLEDGE_DIR, KNOWLEDGE_MD, MEMORY_MD, WorkspaceManager
from harness.workspace.context import WorkspaceContextConfig

__all__ = ["WorkspaceContextHook"]

MAX_LISTED_KNOWLEDGE_FILES: Final = 200
"""Knowledge files listed by path; more are counted, not listed."""

_CACHE_ENTRIES: Final = 256

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)

K = TypeVar("K")
V = TypeVar("V")


def _clean(text: str) -> str:
    return _COMMENT.sub("", text).strip()


def _element(tag: str, content: str) -> str:
    if not content:
        return f"  <{tag}></{tag}>"
    body = "\n".join(f"    {line}" if line else "" for line in content.splitlines())
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
    notice = (
        f"... (memory truncated: showing {{kept}} of {len(memory)} characters of MEMORY.md"
        f"{notice_hint}) ..."
    )
    budget = available_chars - len(notice) - 16
    kept: list[str] = []
    size = 0
    for line in memory.splitlines():
        cost = len(line) + 5
        if size + cost > budget:
            break
        kept.append(line)
        size += cost
    shown = "\n".join(kept).rstrip()
    return shown + ("\n\n" if shown else "") + notice.format(kept=len(shown))


def _guidance(
    root: str, tools: AbstractSet[str], extra_files: Sequence[str], *, auto_memory: bool
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
    injected = ", ".join(["AGENTS.md", "MEMORY.md", "knowledge/KNOWLEDGE.md", *extra_files])
    parts.append(
        f"## Workspace\nYour workspace is {root}. Follow the persona and rules of AGENTS.md."
    )
    parts.append(
        "## Workspace Files (Injected)\n"
        f"<loaded_context> below holds the current {injected}. They are refreshed whenever "
        "they change, so you do not need to read them again."
    )
    return "\n\n".join(parts)


class WorkspaceContextHook(Hook):
    """Injects the workspace section into every reasoning step's system message."""

    priority = 900
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning,)

    def __init__(
        self,
        workspace: WorkspaceManager,
        *,
        agent_name: str,
        config: WorkspaceContextConfig,
        auto_memory: bool = False,
    ) -> None:
        self.workspace = workspace
        self.agent_name = agent_name
        self.config = config
        self.auto_memory = auto_memory
        self._static = (
            f"OS: {platform.system()} {platform.release()}\nTemp dir: {tempfile.gettempdir()}"
        )
        self._snapshots: dict[str | None, _Snapshot] = {}
        self._sections: dict[tuple[object, ...], str] = {}
        self._versions = itertools.count()
        self._system = SystemSection()

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PreReasoning)
        event.messages = self._system.apply(event.messages, await self.section(event))

    async def section(self, event: PreReasoning) -> str:
        """The full workspace section for this step."""
        snapshot = await self._snapshot(event.ctx.user_id)
        tools = frozenset(tool.name for tool in event.tools)
        key = (snapshot.version, event.ctx.session_id, event.ctx.user_id, tools, _today())
        section = self._sections.get(key)
        if section is None:
            section = self.render(event, snapshot.texts, snapshot.knowledge_files, tools)
            _remember(self._sections, key, section)
        return section

    async def _snapshot(self, user_id: str | None) -> _Snapshot:
        cached = self._snapshots.get(user_id)
        now = time.monotonic()
        if (
            cached is not None
            and cached.generation == self.workspace.generation
            and now - cached.taken_at < self.config.refresh_seconds
        ):
            return cached
        generation = self.workspace.generation
        paths = [AGENTS_MD, MEMORY_MD, KNOWLEDGE_MD, *self.config.context_files]
        files = await self.workspace.read_first(paths, user_id, self.config.context_files)
        listing = await self.workspace.list_files(KNOWLEDGE_DIR, user_id)
        texts = {path: _clean(entry.text) for path, entry in files.items()}
        if (
            cached is not None
            and cached.texts == texts
            and cached.knowledge_files == tuple(listing)
        ):
            version = cached.version  # unchanged: rendered sections stay valid
        else:
            version = next(self._versions)
        snapshot = _Snapshot(
            version=version,
            texts=texts,
            knowledge_files=tuple(p for p in listing if p != KNOWLEDGE_MD),
            taken_at=now,
            generation=generation,
        )
        _remember(self._snapshots, user_id, snapshot)
        return snapshot

    def render(
        self,
        event: PreReasoning,
        text: Mapping[str, str],
        knowledge_files: Sequence[str],
        tools: AbstractSet[str],
    ) -> str:
        root = str(self.workspace.root)
        lines = [
            "## Session Context",
            f"This is the {self.agent_name} agent, working in the workspace {root}.",
            f"Today is {_today()}.",
            self._static,
        ]
        if event.ctx.session_id:
            lines.append(f"Session ID: {event.ctx.session_id}")
        if event.ctx.user_id:
            lines.append(f"User ID: {event.ctx.user_id}")
        if self.config.environment:
            lines.append(self.config.environment.strip())
        session = "\n".join(lines)

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
        guidance = _guidance(root, tools, extra, auto_memory=self.auto_memory)
        head = [
            "<loaded_context>",
            _element("agents_context", text.get(AGENTS_MD, "")),
        ]
        tail = [
            _element("domain_knowledge_context", knowledge),
            *(_element(_tag_for(path), text[path]) for path in extra),
            "</loaded_context>",
        ]

        def assemble(memory: str) -> str:
            loaded = "\n".join([*head, _element("memory_context", memory), *tail])
            return f"{session}\n\n{guidance}\n\n{loaded}"

        if "memory_search" in tools:
            hint = ": use memory_search for the rest"
        elif "read_file" in tools:
            hint = ": read MEMORY.md for the rest"
        else:
            hint = ""
        available = self.config.max_context_tokens * 4 - len(assemble(""))
        return assemble(_fit_memory(text.get(MEMORY_MD, ""), available, hint))


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


def _remember(cache: dict[K, V], key: K, value: V) -> None:
    """Store in a small bounded cache; the oldest entry goes first."""
    cache[key] = value
    if len(cache) > _CACHE_ENTRIES:
        del cache[next(iter(cache))]
