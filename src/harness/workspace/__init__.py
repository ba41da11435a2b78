"""The workspace: its layout, its path policy, and the manager that reads and writes it."""

from harness.workspace.layout import (
    AGENTS_DIR,
    AGENTS_MD,
    KNOWLEDGE_DIR,
    KNOWLEDGE_MD,
    MEMORY_DIR,
    MEMORY_MD,
    SKILLS_DIR,
    SUBAGENTS_DIR,
    TASKS_DIR,
    TRACES_DIR,
    USERS_DIR,
    safe_segment,
    session_dir,
    user_from_segment,
    user_prefix,
)
from harness.workspace.manager import (
    FileInfo,
    FileText,
    WorkspaceManager,
    atomic_write,
    file_lock,
    locked_append,
    scoped,
)
from harness.workspace.paths import normalize, resolve_inside
from harness.workspace.skeleton import init_workspace

__all__ = [
    "AGENTS_DIR",
    "AGENTS_MD",
    "KNOWLEDGE_DIR",
    "KNOWLEDGE_MD",
    "MEMORY_DIR",
    "MEMORY_MD",
    "SKILLS_DIR",
    "SUBAGENTS_DIR",
    "TASKS_DIR",
    "TRACES_DIR",
    "USERS_DIR",
    "FileInfo",
    "FileText",
    "WorkspaceManager",
    "atomic_write",
    "file_lock",
    "init_workspace",
    "locked_append",
    "normalize",
    "resolve_inside",
    "safe_segment",
    "scoped",
    "session_dir",
    "user_from_segment",
    "user_prefix",
]
