from __future__ import annotations

from pathlib import Path

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext, ToolResultEvictionConfig
from harness.compaction.eviction import eviction_stem
from harness.filesystem import LocalFilesystem
from harness.models import ScriptedChatModel
from harness.tools import FilesystemTools
from harness.tools.filesystem import MAX_LINE_CHARS, MAX_READ_CHARS

ANN = RuntimeContext(user_id="ann")


def tools(workspace: Path) -> FilesystemTools:
    return FilesystemTools(LocalFilesystem(workspace))


async def test_reads_numbered_lines_in_pieces(workspace: Path) -> None:
    (workspace / "knowledge").mkdir()
    (workspace / "knowledge" / "notes.md").write_text("\n".join(f"line {i}" for i in range(1, 11)))
    # A shared knowledge file, which every user reads (knowledge/ is shared with users).
    out = await tools(workspace).read_file("knowledge/notes.md", ANN, offset=2, limit=3)
    assert out == "3\tline 3\n4\tline 4\n5\tline 5\n... (lines 3-5 of 10; continue with offset=5)"
    assert (await tools(workspace).read_file("knowledge/notes.md", ANN, offset=8)).splitlines() == [
        "9\tline 9",
        "10\tline 10",
    ]


async def test_long_lines_and_big_reads_are_capped(workspace: Path) -> None:
    (workspace / "wide.txt").write_text(("W" * 50_000 + "\n") * 30)
    out = await tools(workspace).read_file("wide.txt", RuntimeContext(), limit=30)
    rows = out.splitlines()
    assert rows[0] == f"1\t{'W' * MAX_LINE_CHARS}... [line cut: 50,000 chars]"
    assert len(out) <= MAX_READ_CHARS + 200
    assert rows[-1].startswith("... (lines 1-")


async def test_errors_and_namespaces(workspace: Path) -> None:
    t = tools(workspace)
    assert await t.read_file("../etc/passwd", ANN) == (
        "Error: path '../etc/passwd' climbs out with '..'; use a path inside the workspace"
    )
    assert await t.read_file("missing.md", ANN) == "Error: File 'missing.md' not found"
    (workspace / "users" / "ann").mkdir(parents=True)
    (workspace / "users" / "ann" / "mine.md").write_text("ann only")
    assert await t.read_file("mine.md", ANN) == "1\tann only"
    assert (await t.read_file("mine.md", RuntimeContext(user_id="bob"))).startswith("Error:")
    (workspace / "users" / "ann" / "one.md").write_text("a\nb")
    assert await t.read_file("one.md", ANN, offset=5) == (
        "Error: offset 5 is past the end of 'one.md' (2 lines); use an offset below 2"
    )


async def test_an_evicted_result_is_read_back_by_the_agent(workspace: Path) -> None:
    output = "\n".join(f"row {i}" for i in range(3_000))

    def dump() -> str:
        """Produce a big output."""
        return output

    # The evicted file's name is a hash of the call id and the output: known in advance.
    evicted = f"large_tool_results/harness/{eviction_stem('dump', 'call_0', output.encode())}.txt"
    read = {"path": evicted, "offset": 1500, "limit": 2}
    model = ScriptedChatModel(
        [
            {"match": "^dump it$", "tool_calls": [{"name": "dump", "input": {}}]},
            {"match": "too large", "tool_calls": [{"name": "read_file", "input": read}]},
            {"match": "row", "text": "done"},
        ]
    )
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        tools=[dump],
        tool_result_eviction=ToolResultEvictionConfig(max_result_chars=1_000),
    )
    reply = answer(await agent.call("dump it"))
    assert reply.text == "done"
    placeholder = model.requests[1][-1].tool_results[0].text
    assert f"`{evicted}`" in placeholder
    result = model.requests[-1][-1].tool_results[0].text
    assert result.splitlines() == [
        "1501\trow 1500",
        "1502\trow 1501",
        "... (lines 1501-1502 of 3000; continue with offset=1502)",
    ]
