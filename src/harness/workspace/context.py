"""What the workspace section of the system prompt holds: its settings.

The section itself is built by :mod:`harness.hooks.workspace_context`; its settings live with
the workspace so that what configures an agent (``HarnessAgent``, a subagent's settings) does
not depend on the hook module, which can be left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "DEFAULT_REFRESH_SECONDS",
    "DEFAULT_WORKSPACE_CONTEXT",
    "MemoryRefresh",
    "PromptLayout",
    "WorkspaceContextConfig",
]

MemoryRefresh = Literal["session", "compaction", "step"]
"""When the memory files shown in the system prompt are taken again (see the config)."""

PromptLayout = Literal["stable_first", "legacy"]
"""How the workspace section is laid out (see the config)."""

DEFAULT_MAX_CONTEXT_TOKENS: Final = 8000
"""Token budget of the whole workspace section; MEMORY.md is cut to fit."""

DEFAULT_REFRESH_SECONDS: Final = 1.0
"""How long a snapshot of the workspace files serves before it is checked again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceContextConfig:
    """What the workspace section holds.

    Args:
        max_context_tokens: Budget of the section; MEMORY.md is truncated to fit.
        context_files: Extra workspace files to inject, each as its own element.
        environment: Extra lines for the Session Context section.
        refresh_seconds: How long a snapshot of the files serves before they are checked for
            changes made outside the harness; 0 checks at every step.
        memory_refresh: When the MEMORY.md, knowledge and extra files shown in the system
            prompt are taken again (AGENTS.md is always shown as it is now):

            - ``"compaction"`` (the default): at the start of a session and after each
              compaction of it. A change in between reaches the model as a short note at the
              end of the conversation, and the system prompt stays byte-identical, so the
              provider's prompt cache keeps serving it.
            - ``"session"``: at the start of a session only; compactions keep the old copy
              (and the notes). The cheapest, and the copy in the prompt grows staler.
            - ``"step"``: at every step, as soon as a file changes. The prompt always shows
              the current files, and every memory write costs the whole cached prompt.
        layout: ``"stable_first"`` (the default) sends the section as three blocks, from
            what every user shares (guidance, AGENTS.md) to what is the user's (MEMORY.md,
            knowledge) to what is the session's (its id, the date), so the shared part is one
            cacheable prefix. ``"legacy"`` is the layout before prompt caching: one block that
            opens with the session's id and the date.
    """

    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    context_files: tuple[str, ...] = ()
    environment: str | None = None
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS
    memory_refresh: MemoryRefresh = "compaction"
    layout: PromptLayout = "stable_first"

    def __post_init__(self) -> None:
        if self.max_context_tokens < 1:
            msg = f"max_context_tokens must be positive, got {self.max_context_tokens}"
            raise ValueError(msg)
        if self.refresh_seconds < 0:
            msg = f"refresh_seconds must be zero or more, got {self.refresh_seconds}"
            raise ValueError(msg)
        if self.memory_refresh not in get_args(MemoryRefresh):
            msg = (
                f"memory_refresh must be one of {', '.join(get_args(MemoryRefresh))}, "
                f"got {self.memory_refresh!r}"
            )
            raise ValueError(msg)
        if self.layout not in get_args(PromptLayout):
            msg = f"layout must be one of {', '.join(get_args(PromptLayout))}, got {self.layout!r}"
            raise ValueError(msg)


DEFAULT_WORKSPACE_CONTEXT: Final = WorkspaceContextConfig()
"""The workspace section with every default."""
