"""Skills: the "## Skills" prompt section and the ``load_skill`` tool.

At every reasoning step this hook appends a ``## Skills`` section to the system message: each
skill the caller has (``skills/<name>/SKILL.md``, and the caller's own under
``users/<user>/skills/``, which replace shared skills of the same name) by name and
description, and the instruction to call ``load_skill(name)`` before using one. The bodies
are not in the prompt: ``load_skill`` returns them, with the skill's files, on demand. When the
caller has no skills the prompt is left alone. The skills are read through the workspace at
most once per ``refresh_seconds`` per user (see :mod:`harness.skills.repository`).

It contributes ``load_skill``.

Priority 85: after compaction (10) and eviction (50), so the section is added to the request
as they left it, and after subagents (80), so the prompt reads "delegate, then skills" in a
fixed order that keeps its prefix stable between steps; before user hooks (100), which then
see the whole capability listing, and before the workspace context (900), which goes last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

from harness.kernel import Event, Hook, PreReasoning, Tool
from harness.sections import SystemSection
from harness.skills import DEFAULT_SKILL_REFRESH_SECONDS, Skill, SkillRepository
from harness.tools.skills import SkillTools
from harness.workspace import WorkspaceManager

__all__ = ["SkillsHook", "skills_section"]

_GUIDE: Final = """\
## Skills

Skills are instructions for particular tasks, kept in the workspace. When a task matches a \
skill's description, call `load_skill(name)` before you start and follow the instructions it \
returns; it also lists the skill's files, which you read with `read_file` when the \
instructions refer to them. Load only the skills you use.

### Available skills"""


def skills_section(skills: Iterable[Skill]) -> str:
    """The prompt section: how to use skills, and each skill's name and description."""
    lines = [f"- `{skill.name}`: {skill.description}" for skill in skills]
    return "\n".join([_GUIDE, *lines])


class SkillsHook(Hook):
    """Lists the caller's skills in the prompt and loads them on demand.

    Args:
        workspace: Where the skills live.
        refresh_seconds: How long a user's skills are reused before the workspace is read
            again.
    """

    priority = 85
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning,)

    def __init__(
        self,
        workspace: WorkspaceManager,
        *,
        refresh_seconds: float = DEFAULT_SKILL_REFRESH_SECONDS,
    ) -> None:
        self.repository = SkillRepository(workspace, refresh_seconds=refresh_seconds)
        self.skill_tools = SkillTools(self.repository)
        # A cache keyed by the repository's snapshot (same object until the next read), not
        # per-call state: any call for any user may reuse it.
        self._section: tuple[Mapping[str, Skill], str] | None = None
        self._system = SystemSection()

    def tools(self) -> Sequence[Callable[..., Any] | Tool]:
        return self.skill_tools.tools()

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PreReasoning)
        skills = await self.repository.skills(event.ctx.user_id)
        if not skills:
            return
        cached = self._section
        if cached is None or cached[0] is not skills:
            cached = self._section = (skills, skills_section(skills.values()))
        event.messages = self._system.apply(event.messages, cached[1])
