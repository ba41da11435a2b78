"""The files ``harness init`` creates in a new workspace."""

from __future__ import annotations

from pathlib import Path

from harness.layout import (
    AGENTS_MD,
    KNOWLEDGE_MD,
    MEMORY_DIR,
    MEMORY_MD,
    SKILLS_DIR,
    SUBAGENTS_DIR,
)
from harness.workspace.manager import atomic_write

__all__ = ["SKELETON", "init_workspace"]

AGENTS_TEMPLATE = """\
# Agent

<!--
AGENTS.md is your agent's persona and standing rules. Harness injects this whole file into the
system prompt at every reasoning step, so keep it short and specific. HTML comments like this
one are stripped before injection.

Examples:
- Who the agent is and whom it serves.
- Tone, language, formatting preferences.
- Rules it must always follow ("never delete files outside drafts/").
-->

You are a helpful assistant. Answer concisely.
"""

MEMORY_TEMPLATE = """\
# Memory

<!--
MEMORY.md is curated long-term memory: durable facts about the user, decisions, preferences.
It is injected into every reasoning step under a token budget (8000 tokens by default for the
whole workspace context); when it is longer, the start is kept and a notice says it was cut.
Keep one fact per bullet. Daily logs go to memory/YYYY-MM-DD.md.
-->
"""

KNOWLEDGE_TEMPLATE = """\
# Knowledge

<!--
knowledge/KNOWLEDGE.md is injected into every reasoning step. Put other reference files in
knowledge/: they are listed by path in the prompt and read on demand.
-->
"""

SKELETON: dict[str, str] = {
    AGENTS_MD: AGENTS_TEMPLATE,
    MEMORY_MD: MEMORY_TEMPLATE,
    KNOWLEDGE_MD: KNOWLEDGE_TEMPLATE,
}
"""Files created by ``harness init`` (existing files are never overwritten)."""

DIRECTORIES = (MEMORY_DIR, SKILLS_DIR, SUBAGENTS_DIR)


def init_workspace(root: Path) -> list[str]:
    """Create the workspace skeleton under ``root``; returns the paths it created."""
    created: list[str] = []
    for directory in DIRECTORIES:
        path = root / directory
        if not path.exists():
            path.mkdir(parents=True)
            created.append(f"{directory}/")
    for rel, text in SKELETON.items():
        path = root / rel
        if not path.exists():
            atomic_write(path, text.encode("utf-8"))
            created.append(rel)
    return created
