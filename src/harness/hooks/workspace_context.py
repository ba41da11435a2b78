"""Workspace context: the workspace's files in the system prompt, at every reasoning step.

Reads AGENTS.md, MEMORY.md, knowledge/KNOWLEDGE.md, the list of other knowledge files and any
configured extra files (the user's copy first, then the shared one) and appends one section to
the first system message of the step's request: a ``## Session Context`` header (agent, date,
session, user), guidance on using the workspace, and a ``<loaded_context>`` block with the
files. HTML comments are stripped from the files. MEMORY.md is cut to fit what is left of the
token budget (estimated at four characters per token) and a visible notice says so.

Nothing here is written back to memory: PreReasoning input is rebuilt every step, so the section
is always current and never accumulates. Files are re-read only when they change (see
:class:`~harness.workspace.WorkspaceManager`).

Priority 900: it runs after every other hook has shaped the request, so the workspace section is
the last block of the system message and whatever comes before it stays a stable prompt prefix.
"""

from __future__ import annotations

import platform
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Final

from harness.kernel import Event, Hook, Msg, PreReasoning, TextBlock, ToolSchema
from harness.workspace import AGENTS_MD, KNOWLEDGE_DIR, KNOWLEDGE_MD, MEMORY_MD, WorkspaceManager

__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "WorkspaceContextConfig",
    "WorkspaceContextHook",
    "estimate_tokens",
    "inject_section",
]

DEFAULT_MAX_CONTEXT_TOKENS: Final = 8000
"""Token budget of the whole workspace section; MEMORY.md is cut to fit."""

MAX_LISTED_KNOWLEDGE_FILES: Final = 200
"""Knowledge files listed by path; more are counted, not listed."""

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceContextConfig:
    """What the workspace section holds.

    Args:
        max_context_tokens: Budget of the section; MEMORY.md is truncated to fit.
        context_files: Extra workspace files to inject, each as its own element.
        environment: Extra lines for the Session Context section.
    """

    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    context_files: tuple[str, ...] = ()
    environment: str | None = None

    def __post_init__(self) -> None:
        if self.max_context_tokens < 1:
            msg = f"max_context_tokens must be positive, got {self.max_context_tokens}"
            raise ValueError(msg)


def estimate_tokens(text: str) -> int:
    """The workspace budget's token estimate: four characters per token."""
    return len(text) // 4


def _clean(text: str) -> str:
    return _COMMENT.sub("", text).strip()


def _element(tag: str, content: str) -> str:
    if not content:
        return f"  <{tag}></{tag}>"
    body = "\n".join(f"    {line}" if line else "" for line in content.splitlines())
    return f"  <{tag}>\n{body}\n  </{tag}>"


def _tag_for(path: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", path.lower())


def _fit_memory(memory: str, available_tokens: int, notice_hint: str) -> str:
    """Keep whole lines of MEMORY.md within the budget, then say what was cut and where it is."""
    if estimate_tokens(memory) <= available_tokens:
        return memory
    limit = max(available_tokens, 0) * 4
    kept: list[str] = []
    size = 0
    for line in memory.splitlines():
        if size + len(line) + 1 > limit:
            break
        kept.append(line)
        size += len(line) + 1
    notice = (
        f"... (memory truncated: showing {size} of {len(memory)} characters of MEMORY.md"
        f"{notice_hint}) ..."
    )
    return "\n".join(kept).rstrip() + ("\n\n" if kept else "") + notice


def _guidance(root: str, tools: set[str], extra_files: Sequence[str]) -> str:
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
            f"memory_search over MEMORY.md and memory/*.md{get}. Cite what you use as "
            "`Source: <path#line>`."
        )
    editors = [name for name in ("edit_file", "write_file") if name in tools]
    if editors:
        parts.append(
            "## Memory Persistence\n"
            "Keep MEMORY.md current: when you learn a durable fact, decision or preference, add "
            f"it as one concise bullet with {' or '.join(editors)}, without duplicates."
        )
    injected = ", ".join(["AGENTS.md", "MEMORY.md", "knowledge/KNOWLEDGE.md", *extra_files])
    parts.append(
        "## Workspace\n"
        f"Your workspace is {root}. Follow the persona and rules of AGENTS.md."
    )
    parts.append(
        "## Workspace Files (Injected)\n"
        f"<loaded_context> below holds the current {injected}. They are refreshed whenever "
        "they change, so you do not need to read them again."
    )
    return "\n\n".join(parts)


def inject_section(messages: list[Msg], section: str) -> list[Msg]:
    """Append ``section`` as a new text block of the first system message (a copy).

    Without a system message, one named ``workspace_context`` is put first.
    """
    for index, message in enumerate(messages):
        if message.role == "system":
            updated = message.model_copy(
                update={"content": [*message.content, TextBlock(text=section)]}
            )
            return [*messages[:index], updated, *messages[index + 1 :]]
    return [Msg(role="system", name="workspace_context", content=section), *messages]


class WorkspaceContextHook(Hook):
    """Injects the workspace section into every reasoning step's system message."""

    priority = 900
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning,)

    def __init__(
        self, workspace: WorkspaceManager, *, agent_name: str, config: WorkspaceContextConfig
    ) -> None:
        self.workspace = workspace
        self.agent_name = agent_name
        self.config = config
        self._static = (
            f"OS: {platform.system()} {platform.release()}\nTemp dir: {tempfile.gettempdir()}"
        )

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PreReasoning)
        event.messages = inject_section(event.messages, await self.section(event))

    async def section(self, event: PreReasoning) -> str:
        """The full workspace section for this step."""
        user_id = event.ctx.user_id
        extra = self.config.context_files
        files = await self.workspace.read_first([AGENTS_MD, MEMORY_MD, KNOWLEDGE_MD, *extra], user_id)
        text = {path: _clean(entry.text) for path, entry in files.items()}
        knowledge_files = [
            path
            for path in await self.workspace.list_files(KNOWLEDGE_DIR, user_id)
            if path != KNOWLEDGE_MD
        ]
        return self.render(event, text, knowledge_files, _tool_names(event.tools))

    def render(
        self,
        event: PreReasoning,
        text: dict[str, str],
        knowledge_files: Sequence[str],
        tools: set[str],
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
            knowledge = (knowledge + "\n\n" if knowledge else "") + "Knowledge files:\n" + "\n".join(listed)
        additional = [
            _element(_tag_for(path), text[path]) for path in self.config.context_files if text.get(path)
        ]
        agents = text.get(AGENTS_MD, "")
        fixed = sum(estimate_tokens(part) for part in (session, agents, knowledge, *additional))
        if "memory_search" in tools:
            hint = ": use memory_search for the rest"
        elif "read_file" in tools:
            hint = ": read MEMORY.md for the rest"
        else:
            hint = ""
        memory = _fit_memory(text.get(MEMORY_MD, ""), self.config.max_context_tokens - fixed, hint)
        loaded = "\n".join(
            [
                "<loaded_context>",
                _element("agents_context", agents),
                _element("memory_context", memory),
                _element("domain_knowledge_context", knowledge),
                *additional,
                "</loaded_context>",
            ]
        )
        guidance = _guidance(root, tools, self.config.context_files)
        return f"{session}\n\n{guidance}\n\n{loaded}"


def _today() -> str:
    now = datetime.now().astimezone()
    return f"{now:%A %b} {now.day}, {now.year}"


def _tool_names(tools: Sequence[ToolSchema]) -> set[str]:
    return {tool.name for tool in tools}


