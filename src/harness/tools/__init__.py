"""The harness's built-in tools, one module per family."""

from harness.tools.filesystem import FilesystemTools
from harness.tools.memory import MemoryTools
from harness.tools.sessions import SessionTools
from harness.tools.skills import SkillTools
from harness.tools.subagents import SubagentTools
from harness.tools.tasks import TaskTools

__all__ = [
    "FilesystemTools",
    "MemoryTools",
    "SessionTools",
    "SkillTools",
    "SubagentTools",
    "TaskTools",
]
