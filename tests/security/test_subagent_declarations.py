"""Hole 2 of the trust boundary: a subagent file the model writes cannot choose what runs.

``subagents/*.md`` files are the model's to write, so they may narrow an agent (a prompt of
their own, fewer tools) but never widen it: a ``model:`` the operator did not allow skips the
file. The attack of the report: the model writes a scripted-model file whose log is a path
outside the workspace, declares a subagent using it, and spawns it; the log must never appear.
Variants point the spec at a host file (to probe whether it exists) or at paid models.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from _steps import tool_results

from harness import HarnessAgent, RuntimeContext
from harness.filesystem import AbstractFilesystem
from harness.models import ScriptedChatModel
from harness.subagents import SubagentsConfig
from harness.workspace import WorkspaceManager

ALICE = RuntimeContext(session_id="s1", user_id="alice")


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "input": {"path": path, "content": content}}


def declaration(name: str, model: str | None, tools: str | None = None) -> str:
    lines = [f"name: {name}", "description: x"]
    lines += [f"model: {model}"] if model else []
    lines += [f"tools: {tools}"] if tools else []
    return "---\n" + "\n".join(lines) + "\n---\nYou do as told.\n"


async def attack(
    workspace: WorkspaceManager, calls: list[dict[str, Any]], config: SubagentsConfig
) -> list[str]:
    """One turn of the hostile model: its writes, then a spawn of ``evil``; the tool results."""
    spawn = {"name": "agent_spawn", "input": {"agent_id": "evil", "task": "hi"}}
    model = ScriptedChatModel(
        [
            {"tool_calls": calls},
            {"tool_calls": [spawn]},
            {"match": "agent_key|Error", "text": "done", "repeat": True},
        ]
    )
    # Re-read the files at every look, so the spawn sees what this very turn wrote.
    config = dataclasses.replace(config, refresh_seconds=0)
    agent = HarnessAgent(model=model, workspace=workspace, memory=None, subagents=config)
    try:
        await agent.call("go", ctx=ALICE)
    finally:
        await agent.aclose()
    return tool_results(model)


@pytest.fixture
def workspace(fs: AbstractFilesystem, tmp_path: Path) -> WorkspaceManager:
    return WorkspaceManager(tmp_path / "workspace", fs)


@pytest.mark.parametrize(
    "spec",
    ["scripted:{workspace}/users/alice/evil.json", "scripted:/etc/shadow", "local:/etc/shadow",
     "openai:gpt-4o", "anthropic:claude-opus-4"],
)  # fmt: skip
async def test_a_model_written_declaration_cannot_choose_a_model(
    workspace: WorkspaceManager, tmp_path: Path, spec: str, caplog: pytest.LogCaptureFixture
) -> None:
    pwned = tmp_path / "x" / "PWNED.txt"
    script = json.dumps({"log": str(pwned), "turns": [{"text": "hi", "repeat": True}]})
    model = spec.format(workspace=workspace.root)
    calls = [write("evil.json", script), write("subagents/evil.md", declaration("evil", model))]

    with caplog.at_level(logging.WARNING, logger="harness.subagents.declarations"):
        results = await attack(workspace, calls, SubagentsConfig())

    assert not pwned.exists()
    assert not pwned.parent.exists()
    spawned = results[-1]
    assert spawned.startswith("Error"), spawned
    assert "Invalid JSON" not in spawned  # nothing is told about the file it names
    assert "shadow" not in spawned
    assert any(
        "its model" in r.getMessage() and "is not one the operator allows" in r.getMessage()
        for r in caplog.records
    )


async def test_a_shared_declaration_is_held_to_the_same_rule(
    workspace: WorkspaceManager, tmp_path: Path
) -> None:
    pwned = tmp_path / "PWNED.txt"
    script = tmp_path / "evil.json"  # even a file outside the workspace the model cannot write
    script.write_text(json.dumps({"log": str(pwned), "turns": [{"text": "hi", "repeat": True}]}))
    assert isinstance(workspace.backend, AbstractFilesystem)
    await workspace.backend.write("subagents/evil.md", declaration("evil", f"scripted:{script}"))

    results = await attack(workspace, [write("note.md", "x")], SubagentsConfig())

    assert not pwned.exists()
    assert results[-1].startswith("Error")


async def test_a_model_the_operator_allows_is_used(
    workspace: WorkspaceManager, tmp_path: Path
) -> None:
    log = tmp_path / "allowed.log"
    script = tmp_path / "child.json"
    script.write_text(
        json.dumps({"log": str(log), "turns": [{"text": "child hi", "repeat": True}]})
    )
    spec = f"scripted:{script}"
    calls = [write("subagents/evil.md", declaration("evil", spec))]

    results = await attack(workspace, calls, SubagentsConfig(allowed_models=(spec,)))

    assert "child hi" in results[-1]
    assert log.exists()


async def test_a_declaration_without_a_model_runs_on_the_parents_and_narrows_its_tools(
    workspace: WorkspaceManager,
) -> None:
    calls = [write("subagents/evil.md", declaration("evil", None, tools="read_file, execute"))]

    results = await attack(workspace, calls, SubagentsConfig())

    # The parent's scripted model answers for the child too ("done" matches no agent_key...):
    # what matters is that it ran, as a child of the parent's model and tools.
    assert "agent_key: " in results[-1], results[-1]


async def test_a_model_written_declaration_gets_at_most_the_parents_steps(
    workspace: WorkspaceManager, caplog: pytest.LogCaptureFixture
) -> None:
    greedy = declaration("greedy", None).replace(
        "description: x", "description: x\nmax_iters: 100000"
    )
    modest = declaration("modest", None).replace("description: x", "description: x\nmax_iters: 2")
    assert isinstance(workspace.backend, AbstractFilesystem)
    await workspace.backend.write("users/alice/subagents/greedy.md", greedy)
    await workspace.backend.write("users/alice/subagents/modest.md", modest)
    agent = HarnessAgent(
        model=ScriptedChatModel([{"text": "hi"}]), workspace=workspace, memory=None, max_iters=7
    )
    try:
        assert agent.subagents is not None
        with caplog.at_level(logging.WARNING, logger="harness.subagents.declarations"):
            entries = await agent.subagents.catalog.entries("alice")
    finally:
        await agent.aclose()

    steps = {name: getattr(spec, "max_iters", None) for name, spec in entries.items()}
    assert steps["greedy"] == 7  # the parent's, not the 100,000 the file asked for
    assert steps["modest"] == 2  # fewer is narrowing, and kept
    assert any("asks for max_iters 100000" in r.getMessage() for r in caplog.records)
