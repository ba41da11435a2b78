"""What the workspace section of the system prompt holds: its settings.

The section itself is built by :mod:`harness.hooks.workspace_context`; its settings live with
the workspace so that what configures an agent (``HarnessAgent``, a subagent's settings) does
not depend on the hook module, which can be left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "DEFAULT_REFRESH_SECONDS",
    "DEFAULT_WORKSPACE_CONTEXT",
    "WorkspaceContextConfig",
]

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
    """

    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    context_files: tuple[str, ...] = ()
    environment: str | None = None
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS

    def __post_init__(self) -> None:
        if self.max_context_tokens < 1:
            msg = f"max_context_tokens must be positive, got {self.max_context_tokens}"
            raise ValueError(msg)
        if self.refresh_seconds < 0:
            msg = f"refresh_seconds must be zero or more, got {self.refresh_seconds}"
            raise ValueError(msg)


DEFAULT_WORKSPACE_CONTEXT: Final = WorkspaceContextConfig()
"""The workspace section with every default."""
