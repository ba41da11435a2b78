"""Deleting a session leaves nothing of its conversation to read, search or list.

``HarnessAgent.delete_session`` (the HTTP ``DELETE /v1/sessions/{id}`` and the page's delete)
used to remove the saved conversation and its transcript but keep the transcript's searchable
copy (``.log.jsonl``) with its rows in the memory index, the session's entry (titled with the
user's first words) in ``sessions.json`` and its flush mark: the agent still found the deleted
conversation with ``memory_search``, ``session_search`` and ``session_list``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness import HarnessAgent, RuntimeContext
from harness.memory.consolidation import ConsolidationResult
from harness.models import ScriptedChatModel
from harness.tools import MemoryTools
from harness.tools.sessions import SessionTools

SECRET = "quokkaplatypus"


def model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
            {"text": "Noted.", "repeat": True},
        ]
    )


def files_of(root: Path, session: str) -> list[str]:
    """The session's files in the workspace, lock files aside."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and session in path.name and not path.name.endswith(".lock")
    )


async def test_a_deleted_session_is_found_by_no_search_and_listed_nowhere(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ctx = RuntimeContext(session_id="doomed", user_id="ann")
    kept = RuntimeContext(session_id="kept", user_id="ann")
    async with HarnessAgent(model=model(), workspace=root) as agent:
        await agent.call(f"My codeword is {SECRET}", ctx=ctx)
        await agent.call("Something else entirely", ctx=kept)
        assert agent.maintenance is not None
        await agent.maintenance.settled()
        memory = MemoryTools(agent.workspace, agent.maintenance)
        sessions = SessionTools(agent.workspace, agent.name)
        assert SECRET in await memory.memory_search(SECRET, ctx)
        assert SECRET in await sessions.session_search(SECRET, ctx)
        assert files_of(root, "doomed")

        assert await agent.delete_session(ctx) is True

        assert files_of(root, "doomed") == []
        assert (await memory.memory_search(SECRET, ctx)).startswith("No matching memories")
        assert (await sessions.session_search(SECRET, ctx)).startswith("No matches found")
        listed = await sessions.session_list(ctx)
        assert "doomed" not in listed
        assert "kept" in listed  # the user's other sessions stay as they were
        assert files_of(root, "kept")


async def test_deleting_right_after_a_call_waits_for_its_background_work(tmp_path: Path) -> None:
    """The call's transcript is written in the background after it returns: a delete at once
    must not be followed by that work writing the conversation back."""
    root = tmp_path / "ws"
    ctx = RuntimeContext(session_id="quick", user_id="ann")
    async with HarnessAgent(model=model(), workspace=root) as agent:
        await agent.call(f"My codeword is {SECRET}", ctx=ctx)
        assert await agent.delete_session(ctx) is True
        assert agent.maintenance is not None
        await agent.maintenance.settled()
        assert files_of(root, "quick") == []


async def test_deleting_a_session_waits_for_the_consolidation_its_call_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consolidation a call requests runs in the workspace's worker and traces its result
    to the call's session: it once ran past the delete and wrote the trace file back (CI,
    about one run in fifteen on a loaded machine). Here it is held until the delete is done
    (or has waited a second for it), which made the old code fail every time."""
    root = tmp_path / "ws"
    ctx = RuntimeContext(session_id="held", user_id="ann")
    async with HarnessAgent(model=model(), workspace=root) as agent:
        assert agent.maintenance is not None
        assert agent.maintenance.consolidator is not None
        consolidate = agent.maintenance.consolidator.consolidate
        deleting: asyncio.Task[bool] | None = None
        entered, consolidated = asyncio.Event(), asyncio.Event()

        async def held(user_id: str | None) -> ConsolidationResult:
            entered.set()
            assert deleting is not None
            await asyncio.wait({deleting}, timeout=1.0)
            try:
                return await consolidate(user_id)
            finally:
                consolidated.set()

        monkeypatch.setattr(agent.maintenance.consolidator, "consolidate", held)
        await agent.call(f"My codeword is {SECRET}", ctx=ctx)
        deleting = asyncio.create_task(agent.delete_session(ctx))
        await asyncio.wait_for(entered.wait(), timeout=30)
        assert await deleting is True
        assert consolidated.is_set()
        await agent.maintenance.settled()
        assert files_of(root, "held") == []


async def test_a_session_started_again_after_a_delete_is_remembered_from_its_start(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    ctx = RuntimeContext(session_id="again", user_id="ann")
    async with HarnessAgent(model=model(), workspace=root) as agent:
        await agent.call("A first conversation", ctx=ctx)
        await agent.delete_session(ctx)
        await agent.call(f"A new one about {SECRET}", ctx=ctx)
        assert agent.maintenance is not None
        await agent.maintenance.settled()
        sessions = SessionTools(agent.workspace, agent.name)
        assert "1 sessions" in await sessions.session_list(ctx)
        found = await sessions.session_search(SECRET, ctx)
        assert "[again]" in found
        history = await sessions.session_history("again", ctx)
        assert "A first conversation" not in history
