"""Hole 5 of the trust boundary: what calls without a user keep is no user's to read.

A call made without a ``user_id`` (an operator's session, say) keeps its memory, sessions,
transcripts, tasks and offloaded results in the shared workspace. A user's reads fall back to
shared files only for what is meant for every user (AGENTS.md, knowledge/, skills/,
subagents/: ``shared_with_users``), so ``mallory`` finds none of it through any file tool, the
memory tools or the search index, on every backend, while the shared persona and knowledge
still reach her.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _steps import QUIET, one_step

from harness import HarnessAgent, RuntimeContext
from harness.filesystem import AbstractFilesystem
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

SECRET = "Tr0ub4dor"
PUBLIC = "PUBLIC-PERSONA"
MALLORY = RuntimeContext(session_id="m1", user_id="mallory")

ROOT_FILES = {
    "MEMORY.md": f"# Memory\n## Access\n- the root password is {SECRET}\n",
    "memory/2026-11-30.md": f"# 2026-11-30\n- the root password is {SECRET}\n",
    "agents/harness/sessions/admin.jsonl": f'{{"text": "the root password is {SECRET}"}}\n',
    "agents/harness/sessions/admin.log.jsonl": f'{{"text": "the root password is {SECRET}"}}\n',
    "agents/harness/context/admin/messages.jsonl": f'{{"text": "password {SECRET}"}}\n',
    "agents/harness/tasks/task_1.result.md": f"the root password is {SECRET}\n",
    "agents/harness/traces/admin.jsonl": f'{{"args": "{SECRET}"}}\n',
    "large_tool_results/harness/call_1": f"the root password is {SECRET}\n",
}
SHARED_FILES = {
    "AGENTS.md": f"# Persona\n{PUBLIC}\n",
    "knowledge/faq.md": f"{PUBLIC} faq\n",
    "skills/greet/SKILL.md": f"---\nname: greet\ndescription: {PUBLIC}\n---\nSay hi.\n",
}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


async def mallory_tries(workspace: WorkspaceManager, calls: list[dict[str, Any]]) -> list[str]:
    """Mallory's model runs ``calls`` in one step; the tool results, in order."""
    return await one_step(workspace, calls, MALLORY)


@pytest.fixture
async def workspace(fs: AbstractFilesystem, tmp_path: Path) -> WorkspaceManager:
    for path, text in {**ROOT_FILES, **SHARED_FILES}.items():
        result = await fs.write(path, text)
        assert result.error is None, result
    return WorkspaceManager(tmp_path / "workspace", fs)


async def test_no_file_tool_reads_what_calls_without_a_user_kept(
    workspace: WorkspaceManager,
) -> None:
    calls = [call("read_file", path=path) for path in ROOT_FILES]
    calls += [call("memory_get", path="MEMORY.md"), call("memory_get", path="memory/2026-11-30.md")]
    calls += [
        call("grep_files", pattern=SECRET),
        call("grep_files", pattern=SECRET, path="agents"),
        call("glob_files", pattern="**/*"),
        call("list_files", path="agents/harness/sessions"),
        call("list_files"),
    ]

    results = await mallory_tries(workspace, calls)

    assert len(results) == len(calls)
    for sent, result in zip(calls, results, strict=True):
        assert SECRET not in result, (sent, result)
        if sent["name"] != "read_file" and sent["name"] != "memory_get":  # listings
            assert "admin" not in result, (sent, result)  # not even the names


async def test_the_shared_persona_knowledge_and_skills_still_reach_a_user(
    workspace: WorkspaceManager,
) -> None:
    calls = [call("read_file", path=path) for path in SHARED_FILES]

    results = await mallory_tries(workspace, calls)

    for result in results:
        assert PUBLIC in result, result


async def test_the_workspace_context_of_a_user_holds_the_persona_not_the_shared_memory(
    workspace: WorkspaceManager,
) -> None:
    model = ScriptedChatModel([{"text": "done", "repeat": True}])
    async with HarnessAgent(model=model, workspace=workspace, memory=QUIET) as agent:
        await agent.call("hi", ctx=MALLORY)

    prompt = model.requests[0][0].text
    assert PUBLIC in prompt
    assert SECRET not in prompt


def test_a_users_search_finds_nothing_of_the_calls_without_a_user(tmp_path: Path) -> None:
    """The index holds shared rows for the no-user calls; no user's search returns them."""
    root = tmp_path / "ws"
    for path, text in {**ROOT_FILES, **SHARED_FILES}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    harness = Path(sys.executable).parent / "harness"

    def search(*user: str) -> str:
        done = subprocess.run(
            [str(harness), "memory", "search", "root password", "-w", str(root), *user],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout

    assert SECRET in search()  # the calls without a user find their own memory
    assert SECRET not in search("-u", "mallory")
