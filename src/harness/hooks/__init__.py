"""The harness's built-in hooks, one module each; each module says its priority and why."""

from harness.hooks.approvals import ApprovalHook
from harness.hooks.compaction import CompactionHook, FixedPartCheck
from harness.hooks.memory_flush import MemoryFlushHook
from harness.hooks.memory_maintenance import MemoryMaintenanceHook
from harness.hooks.sandbox_lifecycle import SandboxLifecycleHook
from harness.hooks.session_persistence import SessionPersistenceHook
from harness.hooks.skills import SkillsHook
from harness.hooks.subagents import SubagentsHook
from harness.hooks.tool_result_eviction import ToolResultEvictionHook
from harness.hooks.trace import AgentTraceHook
from harness.hooks.workspace_context import WorkspaceContextHook
from harness.workspace.context import (  # the section's settings, exported here as before
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_REFRESH_SECONDS,
    DEFAULT_WORKSPACE_CONTEXT,
    WorkspaceContextConfig,
)

__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "DEFAULT_REFRESH_SECONDS",
    "DEFAULT_WORKSPACE_CONTEXT",
    "AgentTraceHook",
    "ApprovalHook",
    "CompactionHook",
    "FixedPartCheck",
    "MemoryFlushHook",
    "MemoryMaintenanceHook",
    "SandboxLifecycleHook",
    "SessionPersistenceHook",
    "SkillsHook",
    "SubagentsHook",
    "ToolResultEvictionHook",
    "WorkspaceContextConfig",
    "WorkspaceContextHook",
]
