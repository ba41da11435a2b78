"""User isolation through every tool, on the local disk and on a shared Redis.

Alice works through a HarnessAgent (a file, a memory, a session, a background task). Then Bob,
through the same agent and the same backend, tries every tool on her things, by her paths and
by escapes, and must get nothing of hers back.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.filesystem import AbstractFilesystem, LocalFilesystem, RemoteFilesystem
from harness.models import ScriptedChatModel
from harness.stores.redis import RedisStore

SECRET = "zanzibarite"
ALICE = RuntimeContext(session_id="alice-session", user_id="alice")
BOB = RuntimeContext(session_id="bob-session", user_id="bob")


@pytest.fixture(params=["local", "redis"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[AbstractFilesystem]:
    if request.param == "local":
        yield LocalFilesystem(tmp_path / "workspace")
        return
    url = request.getfixturevalue("redis_url")
    store = RedisStore(url, prefix=f"iso{uuid.uuid4().hex[:8]}")
    try:
        yield RemoteFilesystem(store)
    finally:
        await store.aclose()


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "input": args}


async def test_bob_reaches_nothing_of_alices_by_any_tool(
    backend: AbstractFilesystem, tmp_path: Path
) -> None:
    alice_turns: list[dict[str, Any]] = [
        {
            "match": "^start$",
            "tool_calls": [
                call("write_file", path="notes/plan.md", content=f"the plan: {SECRET}"),
                call("memory_save", content=f"Alice's favourite mineral is {SECRET}."),
                call("agent_spawn", agent_id="general-purpose", task="echo", timeout_seconds=0),
            ],
        },
        {"match": "^echo$", "text": f"child says {SECRET}"},
        {"text": "done", "repeat": True},
    ]
    model = ScriptedChatModel(alice_turns)
    async with HarnessAgent(
        model=model,
        workspace=tmp_path / "local",
        filesystem=backend,
        memory=MemoryConfig(flush=False, auto_consolidate=False),
    ) as agent:
        await agent.call("start", ctx=ALICE)
        assert agent.tasks is not None
        (task,) = await agent.tasks.records("alice")
        await agent.tasks.wait(task, 10)
        # Alice herself sees her things (so Bob's empty answers below mean something).
        tools = agent.delegate.toolkit
        assert SECRET in await _run(tools, "read_file", ALICE, path="notes/plan.md")
        assert "favourite mineral is" in await _run(tools, "memory_search", ALICE, query=SECRET)
        history = await _run(tools, "session_history", ALICE, session_id="alice-session")
        assert "start" in history
        output = await _run(tools, "task_output", ALICE, task_id=task.task_id)
        assert f"child says {SECRET}" in output

        attempts = [
            call("read_file", path="notes/plan.md"),
            call("read_file", path="../alice/notes/plan.md"),
            call("read_file", path="/users/alice/notes/plan.md"),
            call("read_file", path="users/alice/notes/plan.md"),
            call("list_files", path="/"),
            call("list_files", path="../alice"),
            call("glob_files", pattern="**/*.md"),
            call("grep_files", pattern=SECRET),
            call("grep_files", pattern=SECRET, path="../alice"),
            call("edit_file", path="../alice/notes/plan.md", old_string="plan", new_string="x"),
            call("memory_search", query=SECRET),
            call("memory_search", query="favourite mineral"),
            call("memory_get", path="MEMORY.md"),
            call("memory_get", path="../alice/MEMORY.md"),
            call("session_list"),
            call("session_search", query=SECRET),
            call("session_history", session_id="alice-session"),
            call("task_list"),
            call("task_output", task_id=task.task_id),
            call("task_cancel", task_id=task.task_id),
            call("agent_list"),
        ]
        for attempt in attempts:
            answer = await _run(tools, attempt["name"], BOB, **attempt["input"])
            # A tool may repeat the query it was given; nothing else may carry the secret.
            for echoed in attempt["input"].values():
                answer = answer.replace(str(echoed), "<query>")
            assert SECRET not in answer, (attempt, answer)
            assert "notes/plan.md" not in answer or "Error" in answer, (attempt, answer)
        # Nothing Bob did changed Alice's file or her task.
        assert SECRET in await _run(tools, "read_file", ALICE, path="notes/plan.md")
        record = await agent.tasks.get(task.task_id, "alice")
        assert record is not None
        assert record.status.value == "completed"


async def _run(tools: Any, name: str, ctx: RuntimeContext, **args: Any) -> str:
    from harness.kernel import ToolUseBlock

    result = await tools.call(ToolUseBlock(id="t", name=name, input=args), ctx)
    text: str = result.text
    return text
