"""Loss 3: a damaged session file lost the next turn, or a line, for good.

``truncate -s -1`` on ``messages.jsonl``, then two more turns: the first new message was
appended onto the last line, the next load dropped the merged line, the rewrite made the loss
permanent, and a tool call was left without its result. Now a missing final newline forces a
whole rewrite, an unreadable line is copied to ``quarantine.jsonl`` before any rewrite, and a
tool call whose result was lost gets an explicit error result. Through real agents, on local
disk and on the store backends.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import HarnessAgent, RuntimeContext
from harness.filesystem import AbstractFilesystem
from harness.kernel import ToolResultBlock
from harness.models import ScriptedChatModel
from harness.session import SessionStore
from harness.session.store import LOST_RESULT
from harness.workspace import WorkspaceManager

CTX = RuntimeContext(session_id="s1")
PATH = "agents/harness/context/s1/messages.jsonl"
QUARANTINE = "agents/harness/context/s1/quarantine.jsonl"


def note(text: str) -> str:
    """Note something down."""
    return f"noted {text}"


def agent(workspace: WorkspaceManager) -> HarnessAgent:
    model = ScriptedChatModel(
        [
            {"match": "^use the tool", "tool_calls": [{"name": "note", "input": {"text": "x"}}],
             "repeat": True},
            {"match": "noted", "text": "tool done", "repeat": True},
            {"text": "ok", "repeat": True},
        ]
    )  # fmt: skip
    return HarnessAgent(model=model, workspace=workspace, tools=[note], memory=None, subagents=None)


async def turn(workspace: WorkspaceManager, text: str) -> None:
    async with agent(workspace) as fresh:  # a new process each time: nothing cached
        await fresh.call(text, ctx=CTX)


async def raw(workspace: WorkspaceManager, path: str = PATH) -> bytes:
    found = await workspace.backend.get(path)
    assert found is not None
    return found[0]


async def users(workspace: WorkspaceManager) -> list[str]:
    messages = await SessionStore(workspace, "harness").load(CTX)
    return [m.text for m in messages if m.role == "user"]


@pytest.fixture
def manager(fs: AbstractFilesystem, tmp_path: Path) -> WorkspaceManager:
    return WorkspaceManager(tmp_path / "workspace", fs)


async def test_a_file_missing_its_final_newline_loses_no_turn(manager: WorkspaceManager) -> None:
    await turn(manager, "one")
    await turn(manager, "two")
    data = await raw(manager)
    await manager.backend.put(PATH, data[:-1])  # truncate -s -1

    await turn(manager, "three")
    await turn(manager, "four")

    assert await users(manager) == ["one", "two", "three", "four"]
    assert (await raw(manager)).endswith(b"\n")
    assert await manager.backend.get(QUARANTINE) is None  # nothing was unreadable


async def test_a_garbled_line_is_quarantined_not_dropped(
    manager: WorkspaceManager, caplog: pytest.LogCaptureFixture
) -> None:
    await turn(manager, "one")
    await turn(manager, "two")
    lines = (await raw(manager)).splitlines(keepends=True)
    garbled = lines[2][:20] + b"\xff garbage\n"  # "two" itself
    await manager.backend.put(PATH, b"".join([*lines[:2], garbled, *lines[3:]]))

    await turn(manager, "three")

    assert await users(manager) == ["one", "three"]
    (kept,) = [json.loads(line) for line in (await raw(manager, QUARANTINE)).splitlines()]
    assert kept["line"] == 3
    assert kept["text"] == garbled.rstrip(b"\n").decode("utf-8", errors="replace")
    assert any(QUARANTINE in record.getMessage() for record in caplog.records)


async def test_a_tool_call_whose_result_line_was_lost_gets_a_lost_result(
    manager: WorkspaceManager,
) -> None:
    await turn(manager, "use the tool")
    lines = (await raw(manager)).splitlines(keepends=True)
    roles = [json.loads(line)["role"] for line in lines]
    assert roles == ["user", "assistant", "tool", "assistant"]
    await manager.backend.put(PATH, b"".join([*lines[:2], b'{"role": "to\n', lines[3]]))

    await turn(manager, "and now?")

    messages = await SessionStore(manager, "harness").load(CTX)
    roles = [m.role for m in messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    (result,) = messages[2].content
    assert isinstance(result, ToolResultBlock)
    assert result.id == messages[1].tool_uses[0].id
    assert result.is_error
    assert result.output == LOST_RESULT
    assert await manager.backend.get(QUARANTINE) is not None
