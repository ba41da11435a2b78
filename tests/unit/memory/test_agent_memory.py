"""Memory through HarnessAgent: flush, transcript, index and the memory tools together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.errors import ModelError
from harness.memory import MemoryMaintenance
from harness.models import ScriptedChatModel

FLUSH = "Extract NEW memories"


def script(*turns: dict[str, object]) -> ScriptedChatModel:
    return ScriptedChatModel(list(turns))


async def test_a_file_edited_by_hand_before_the_start_is_found_by_the_first_search(
    workspace: Path,
) -> None:
    # Written while no worker ran (by hand, or by another process): the worker's start-up
    # catch-up indexes it, and the first search waits for that.
    (workspace / "users" / "alice").mkdir(parents=True)
    (workspace / "users" / "alice" / "MEMORY.md").write_text("- Favourite mineral: zanzibarite\n")
    model = script(
        {
            "match": "^find",
            "tool_calls": [{"name": "memory_search", "input": {"query": "mineral"}}],
        },
        {"match": "zanzibarite", "text": "found"},
        {"text": "not found"},
    )
    async with HarnessAgent(
        model=model,
        workspace=workspace,
        memory=MemoryConfig(flush=False, auto_consolidate=False),
        subagents=None,
    ) as agent:
        reply = answer(await agent.call("find it", ctx=RuntimeContext(user_id="alice")))
    assert reply.text == "found"


async def test_a_flushed_fact_is_found_by_memory_search_in_a_later_call(workspace: Path) -> None:
    memory_model = script(
        {"match": f"{FLUSH}[\\s\\S]*Berlin", "text": "- Anna moved to Berlin in March 2026."},
        {"match": FLUSH, "text": "NO_REPLY", "repeat": True},
    )
    agent_model = script(
        {"match": "^Anna moved", "text": "Noted."},
        {
            "match": "When did",
            "tool_calls": [
                {"name": "memory_search", "input": {"query": "When did Anna move to Berlin?"}}
            ],
        },
        {"match": "Source: ", "text": "In March 2026."},
    )
    alice = RuntimeContext(session_id="s1", user_id="alice")
    async with HarnessAgent(
        model=agent_model,
        memory_model=memory_model,
        workspace=workspace,
        memory=MemoryConfig(auto_consolidate=False),
    ) as agent:
        answer(await agent.call("Anna moved to Berlin last March.", ctx=alice))
        reply = answer(
            await agent.call(
                "When did Anna move?", ctx=RuntimeContext(session_id="s2", user_id="alice")
            )
        )
    assert reply.text == "In March 2026."
    tool_result = agent_model.requests[-1][-1].tool_results[0].text
    assert tool_result.startswith("Found ")
    assert "- Anna moved to Berlin in March 2026." in tool_result
    assert "Source: memory/" in tool_result  # shown relative to the user's namespace
    # every flush request went to the memory model, none to the agent's
    assert all(FLUSH not in r[-1].text for r in agent_model.requests)
    assert sum(FLUSH in r[-1].text for r in memory_model.requests) == 2
    sessions = workspace / "users" / "alice" / "agents" / "harness" / "sessions"
    assert (sessions / "s1.jsonl").exists()
    assert (sessions / "s2.log.jsonl").exists()
    assert (workspace.parent / "memory_index.db").exists()


async def test_one_users_memories_never_reach_another(workspace: Path) -> None:
    memory_model = script(
        {"match": f"{FLUSH}[\\s\\S]*passport", "text": "- Alice's passport number is X1234."},
        {"match": FLUSH, "text": "NO_REPLY", "repeat": True},
    )
    agent_model = script(
        {"match": "passport number is", "text": "Saved."},
        {
            "match": "What is",
            "tool_calls": [{"name": "memory_search", "input": {"query": "passport number"}}],
        },
        {"match": "memories|Found", "text": "done", "repeat": True},
    )
    async with HarnessAgent(
        model=agent_model,
        memory_model=memory_model,
        workspace=workspace,
        memory=MemoryConfig(auto_consolidate=False),
    ) as agent:
        answer(
            await agent.call("My passport number is X1234.", ctx=RuntimeContext(user_id="alice"))
        )
        answer(await agent.call("What is my passport number?", ctx=RuntimeContext(user_id="bob")))
    result = agent_model.requests[-1][-1].tool_results[0].text
    assert result == "No matching memories found for: passport number"


async def test_a_failing_flush_never_fails_the_call(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent_model = script({"text": "hello", "repeat": True})
    memory_model = script()  # every flush request fails: no turn fits
    async with HarnessAgent(
        model=agent_model, memory_model=memory_model, workspace=workspace
    ) as agent:
        with caplog.at_level(logging.WARNING):
            reply = answer(await agent.call("hi there"))
    assert reply.text == "hello"
    assert "memory flush for session 'default' failed, will retry next call" in caplog.text
    # the transcript is still written
    assert (workspace / "agents" / "harness" / "sessions" / "default.jsonl").exists()


class HangingModel:
    """A memory model that answers only when released: a flush as slow as a real model's."""

    model_name = "hanging"

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.released = asyncio.Event()

    async def stream(
        self, messages: object, tools: object, **options: object
    ) -> AsyncIterator[Any]:
        self.asked.set()
        await self.released.wait()
        raise ModelError("released")
        yield  # an async generator, as the protocol asks


async def test_the_transcript_is_written_before_the_flush_asks_its_model(workspace: Path) -> None:
    """A process stopped while the flush waits for its (slow) model still has the transcript."""
    memory_model = HangingModel()
    transcript = workspace / "agents" / "harness" / "sessions" / "default.jsonl"
    async with HarnessAgent(
        model=script({"text": "hello there", "repeat": True}),
        memory_model=memory_model,
        workspace=workspace,
    ) as agent:
        answer(await agent.call("hi"))
        await asyncio.wait_for(memory_model.asked.wait(), 10)
        written = transcript.read_text(encoding="utf-8") if transcript.exists() else ""
        memory_model.released.set()
    assert "hello there" in written


async def test_agents_of_one_workspace_and_memory_model_share_one_worker_until_the_last_closes(
    workspace: Path,
) -> None:
    model = script()
    first = HarnessAgent(model=model, workspace=workspace)
    second = HarnessAgent(model=model, workspace=workspace)
    other = HarnessAgent(model=script(), workspace=workspace)  # its own model: its own worker
    assert first.maintenance is second.maintenance
    assert other.maintenance is not first.maintenance
    shared = first.maintenance
    assert shared is not None
    await first.aclose()
    assert shared in MemoryMaintenance._running.values()
    await second.aclose()
    await other.aclose()
    assert not any(
        m.workspace.root == workspace.absolute() for m in MemoryMaintenance._running.values()
    )


async def test_guidance_mentions_only_enabled_memory_features(workspace: Path) -> None:
    model = script({"text": "ok", "repeat": True}, {"match": FLUSH, "text": "NO_REPLY"})
    async with HarnessAgent(model=model, workspace=workspace) as agent:
        answer(await agent.call("hi"))
    system = model.requests[0][0].text
    assert "## Memory Recall" in system
    assert "memory_save" in system
    assert "extracted automatically" in system
    off = script({"text": "ok"})
    async with HarnessAgent(model=off, workspace=workspace, memory=None) as agent:
        answer(await agent.call("hi", ctx=RuntimeContext(session_id="other")))
    system = off.requests[0][0].text
    assert "## Memory Recall" not in system
    assert "memory_save" not in system
    assert "extracted automatically" not in system
