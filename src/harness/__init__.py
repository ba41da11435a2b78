"""Harness: an agent harness with a workspace, memory, compaction, sessions and subagents.

The names a user needs are here; everything else lives in the subpackages.
"""

from harness.agent import HarnessAgent
from harness.compaction import CompactionConfig, ToolResultEvictionConfig, TruncateArgsConfig
from harness.context import RuntimeContext
from harness.errors import (
    AgentInterrupted,
    ConfigError,
    ContextOverflowError,
    HarnessError,
    InvalidDecision,
    InvalidText,
    ModelError,
    OutputInvalid,
    PathOutsideWorkspace,
    RateLimitError,
    ScriptExhaustedError,
    SessionBusy,
    StorageError,
    TurnNotSaved,
    WorkspaceError,
)
from harness.kernel import Hook, Msg
from harness.memory import MemoryConfig
from harness.options import AgentOptions
from harness.subagents import SubagentFactory, SubagentsConfig, SubagentSpec
from harness.workspace.context import WorkspaceContextConfig

__all__ = [
    "AgentInterrupted",
    "AgentOptions",
    "CompactionConfig",
    "ConfigError",
    "ContextOverflowError",
    "HarnessAgent",
    "HarnessError",
    "Hook",
    "InvalidDecision",
    "InvalidText",
    "MemoryConfig",
    "ModelError",
    "Msg",
    "OutputInvalid",
    "PathOutsideWorkspace",
    "RateLimitError",
    "RuntimeContext",
    "ScriptExhaustedError",
    "SessionBusy",
    "StorageError",
    "SubagentFactory",
    "SubagentSpec",
    "SubagentsConfig",
    "ToolResultEvictionConfig",
    "TruncateArgsConfig",
    "TurnNotSaved",
    "WorkspaceContextConfig",
    "WorkspaceError",
]
