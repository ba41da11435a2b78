"""Traced agents for the observability tests: scripted calls that produce known trace files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from harness import HarnessAgent, RuntimeContext
from harness.compaction import CompactionConfig, ToolResultEvictionConfig
from harness.hooks.trace import AgentTraceHook
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

BIG: Final = "x" * 300
"""The output of ``dump``: over the eviction limit the tests use (100 characters)."""

SESSION: Final = "s1"
USER: Final = "ann"


def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: The term.
    """
    return f"{term}: found"


def fail(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise RuntimeError(f"broken on purpose: {reason}")


def dump() -> str:
    """Return a large output."""
    return BIG


# The first call: three tools in one step (one fails, one is evicted), then an answer;
# compaction (trigger 4 messages) runs before the second step.
FULL_SCRIPT: Final[list[dict[str, Any]]] = [
    {
        "match": "start",
        "tool_calls": [
            {"name": "lookup", "input": {"term": "alpha"}},
            {"name": "fail", "input": {"reason": "test"}},
            {"name": "dump", "input": {}},
        ],
        "usage": {"input_tokens": 100, "output_tokens": 20},
    },
    {"text": "done", "usage": {"input_tokens": 150, "output_tokens": 5}},
]


def traced_agent(
    root: Path, script: list[dict[str, Any]], **hook_options: Any
) -> tuple[HarnessAgent, AgentTraceHook, WorkspaceManager]:
    """An agent whose only trace hook is the one under test, compacting and evicting early."""
    workspace = WorkspaceManager(root)
    hook = AgentTraceHook(workspace, agent_name="harness", **hook_options)
    agent = HarnessAgent(
        model=ScriptedChatModel(script),
        workspace=workspace,
        tools=[lookup, fail, dump],
        hooks=[hook],
        trace=False,
        memory=None,
        subagents=None,
        workspace_context=None,
        compaction=CompactionConfig(
            trigger_messages=4,
            trigger_tokens=0,
            keep_messages=2,
            flush_before=False,
            offload_before=False,
        ),
        compaction_model=ScriptedChatModel([{"text": "## SUMMARY\nshort", "repeat": True}]),
        tool_result_eviction=ToolResultEvictionConfig(max_result_chars=100, preview_chars=10),
    )
    return agent, hook, workspace


async def run_full_call(root: Path) -> None:
    """The first call of :data:`FULL_SCRIPT` for ``ann``'s session ``s1``."""
    agent, _, _ = traced_agent(root, FULL_SCRIPT)
    async with agent:
        await agent.call("start", ctx=RuntimeContext(session_id=SESSION, user_id=USER))


def trace_file(root: Path, session: str = SESSION, user: str | None = USER) -> Path:
    base = root / "users" / user if user else root
    return base / "agents" / "harness" / "traces" / f"{session}.jsonl"


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
