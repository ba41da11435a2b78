"""Skills: task instructions in the workspace, listed in the prompt and loaded on demand."""

from harness.skills.repository import (
    DEFAULT_SKILL_REFRESH_SECONDS,
    MAX_DESCRIPTION_CHARS,
    SKILL_FILE,
    Skill,
    SkillRepository,
    parse_skill,
)

__all__ = [
    "DEFAULT_SKILL_REFRESH_SECONDS",
    "MAX_DESCRIPTION_CHARS",
    "SKILL_FILE",
    "Skill",
    "SkillRepository",
    "parse_skill",
]
