"""The skill tool: ``load_skill(name)``.

The prompt lists each skill's name and description only (see :mod:`harness.hooks.skills`);
``load_skill`` returns the rest when the model decides to use one: the instructions of its
``SKILL.md`` and the paths of its other files, which the model reads with ``read_file``. So a
workspace can hold many skills without their instructions filling every step's prompt.

The answer reads::

    Skill: weekly-report (skills/weekly-report)

    <the instructions>

    Resources (read them with read_file when the instructions refer to them):
    - skills/weekly-report/templates/report.md

A resource path is what ``read_file`` resolves for the calling user: under the default
per-user filesystem scope that is ``skills/<name>/...`` for shared and own skills alike (a
user's read falls back to the shared file); under a scope whose namespace is the whole
workspace, a user's own skill's files are named with their ``users/<user>/`` prefix.
An unknown name is answered with an error listing the skills there are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from harness.context import RuntimeContext
from harness.filesystem.base import IsolationScope
from harness.kernel import ToolFailure
from harness.skills import Skill, SkillRepository
from harness.workspace import user_prefix

__all__ = ["MAX_LISTED_RESOURCES", "SkillTools", "format_skill"]

MAX_LISTED_RESOURCES: Final = 100
"""Resources one ``load_skill`` answer lists; a last line says how to list the rest."""


def format_skill(skill: Skill, scope: IsolationScope = IsolationScope.USER) -> str:
    """What ``load_skill`` answers: the instructions and the readable resource paths."""
    prefix = "" if scope is IsolationScope.USER else user_prefix(skill.user_id)
    folder = prefix + skill.folder
    lines = [f"Skill: {skill.name} ({folder})", ""]
    lines.append(skill.instructions or "(SKILL.md has no instructions beyond its description)")
    lines.append("")
    if not skill.resources:
        lines.append("This skill has no other files.")
        return "\n".join(lines)
    lines.append("Resources (read them with read_file when the instructions refer to them):")
    shown = skill.resources[:MAX_LISTED_RESOURCES]
    lines += [f"- {prefix}{path}" for path in shown]
    if len(skill.resources) > len(shown):
        more = len(skill.resources) - len(shown)
        lines.append(f"... and {more} more; glob_files('**/*', path='{folder}') lists them all.")
    return "\n".join(lines)


class SkillTools:
    """Loads the caller's skills on demand."""

    def __init__(self, repository: SkillRepository) -> None:
        self.repository = repository

    def tools(self) -> list[Callable[..., Any]]:
        return [self.load_skill]

    async def load_skill(self, name: str, ctx: RuntimeContext) -> str:
        """Load a skill's instructions and the list of its files before you use the skill.

        Args:
            name: The skill's name, as listed under "Available skills".
        """
        skills = await self.repository.skills(ctx.user_id)
        wanted = (name or "").strip()
        skill = skills.get(wanted)
        if skill is not None:
            return format_skill(skill, self.repository.workspace.backend.scope)
        if not skills:
            return ToolFailure("Error: there are no skills in this workspace")
        available = ", ".join(skills)
        if not wanted:
            return ToolFailure(f"Error: name is required; available skills: {available}")
        return ToolFailure(f"Error: no skill named {wanted!r}; available skills: {available}")
