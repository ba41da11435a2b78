from __future__ import annotations

import json
from pathlib import Path

from harness.context import RuntimeContext
from harness.kernel import Msg, ToolResultBlock, ToolUseBlock
from harness.memory import SUMMARY_NAME, TranscriptWriter
from harness.workspace import WorkspaceManager

CTX = RuntimeContext(session_id="s1", user_id="ann")


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_offload_is_idempotent_by_message_id(workspace: Path) -> None:
    writer = TranscriptWriter(WorkspaceManager(workspace), "bot")
    m1 = Msg(id="m1", role="user", content="hello")
    m2 = Msg(id="m2", role="assistant", content="world")
    assert await writer.offload(CTX, [m1, m2]) == 2
    m3 = Msg(id="m3", role="user", content="again")
    m4 = Msg(id="m4", role="assistant", content="sure")
    assert await writer.offload(CTX, [m1, m2, m3, m4]) == 2
    assert await writer.offload(CTX, [m1, m2, m3, m4]) == 0
    base = workspace / "users" / "ann" / "agents" / "bot" / "sessions"
    entries = lines(base / "s1.jsonl")
    assert [e["id"] for e in entries] == ["m1", "m2", "m3", "m4"]
    assert [e["parent_id"] for e in entries] == [None, "m1", "m2", "m3"]
    assert lines(base / "s1.log.jsonl") == entries
    index = json.loads((base / "sessions.json").read_text())
    assert index["version"] == 1
    assert index["sessions"]["s1"]["title"] == "hello"
    assert index["sessions"]["s1"]["messages"] == 4


async def test_a_new_writer_continues_from_the_file(workspace: Path) -> None:
    ws = WorkspaceManager(workspace)
    m1 = Msg(id="m1", role="user", content="hello")
    await TranscriptWriter(ws, "bot").offload(CTX, [m1])
    m2 = Msg(id="m2", role="assistant", content="hi")
    assert await TranscriptWriter(ws, "bot").offload(CTX, [m1, m2]) == 1
    path = workspace / "users" / "ann" / "agents" / "bot" / "sessions" / "s1.jsonl"
    assert [e["parent_id"] for e in lines(path)] == [None, "m1"]


async def test_entries_render_tools_and_mark_summaries(workspace: Path) -> None:
    writer = TranscriptWriter(WorkspaceManager(workspace), "bot")
    call = Msg(role="assistant", content=[ToolUseBlock(id="t1", name="search", input={"q": "x"})])
    result = Msg.tool_result(ToolResultBlock(id="t1", name="search", output="meow"))
    summary = Msg(role="user", name=SUMMARY_NAME, content="earlier: lots")
    system = Msg(role="system", content="never offloaded")
    await writer.offload(RuntimeContext(session_id="s"), [system, summary, call, result])
    entries = lines(workspace / "agents" / "bot" / "sessions" / "s.jsonl")
    assert [(e["type"], e["role"], e["content"]) for e in entries] == [
        ("summary", "user", "earlier: lots"),
        ("message", "assistant", '[tool_call: search({"q": "x"})]'),
        ("message", "tool", "[tool_result: search] meow"),
    ]
    assert entries[1]["tool_call_id"] == "t1"
    assert entries[2]["tool_call_id"] == "t1"
