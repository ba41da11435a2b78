"""Subagents: declarations, building children, and durable background tasks."""

from harness.subagents.children import (
    SPAWN_DEPTH_KEY,
    SUBAGENT_CONTEXT,
    SubagentAgent,
    close_child,
    spawn_depth,
)
from harness.subagents.config import DEFAULT_SUBAGENTS, SubagentsConfig
from harness.subagents.declarations import (
    DEFAULT_SUBAGENT_MAX_ITERS,
    GENERAL_PURPOSE,
    Declaration,
    SubagentCatalog,
    SubagentFactory,
    SubagentSpec,
    general_purpose,
    parse_declaration,
)
from harness.subagents.tasks import WORKER_LOST, TaskRecord, TaskRepository, TaskStatus
from harness.subagents.waiting import waiting_approvals

__all__ = [
    "DEFAULT_SUBAGENTS",
    "DEFAULT_SUBAGENT_MAX_ITERS",
    "GENERAL_PURPOSE",
    "SPAWN_DEPTH_KEY",
    "SUBAGENT_CONTEXT",
    "WORKER_LOST",
    "Declaration",
    "SubagentAgent",
    "SubagentCatalog",
    "SubagentFactory",
    "SubagentSpec",
    "SubagentsConfig",
    "TaskRecord",
    "TaskRepository",
    "TaskStatus",
    "close_child",
    "general_purpose",
    "parse_declaration",
    "spawn_depth",
    "waiting_approvals",
]
