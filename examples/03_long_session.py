"""A long session: a huge tool result is evicted to a file, and old history is compacted.

Run::

    python examples/03_long_session.py [DIR]

Offline by default: a ScriptedChatModel plays the agent, the memory model and the summarizer.
Set HARNESS_MODEL (e.g. ``openai:gpt-4o-mini`` with OPENAI_API_KEY) to use a real model. The
limits are tiny on purpose, so three calls show what a long session does. Everything is written
under DIR (default: a new temporary directory).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import (
    CompactionConfig,
    HarnessAgent,
    MemoryConfig,
    RuntimeContext,
    ToolResultEvictionConfig,
)
from harness.memory.render import SUMMARY_NAME
from harness.models import ScriptedChatModel

SCRIPT: list[dict[str, Any]] = [
    {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
    {
        "match": "Context Extraction Assistant",
        "text": "## SESSION INTENT\nFind the errors in the server log.\n\n## SUMMARY\nOne error: "
        "an upstream timeout at 12:02:03.\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nNone",
        "repeat": True,
    },
    {"match": "(?i)check the server log", "tool_calls": [{"name": "read_server_log"}]},
    {"match": "Tool output was too large", "text": "One error: upstream timeout at 12:02:03."},
    {"match": "(?i)how many lines", "text": "400 lines."},
    {"match": "(?i)what was the error", "text": "An upstream timeout at 12:02:03."},
]


def read_server_log() -> str:
    """Read today's server log."""
    lines = [f"12:{i // 60:02d}:{i % 60:02d} INFO served in {20 + i % 7} ms" for i in range(400)]
    lines[123] = "12:02:03 ERROR upstream timeout after 30000 ms"
    return "\n".join(lines)


def evicted_files(workspace: Path) -> list[tuple[str, int]]:
    """The evicted results on disk, with their sizes."""
    found = sorted((workspace / "large_tool_results").rglob("*.txt"))
    return [(path.relative_to(workspace).as_posix(), path.stat().st_size) for path in found]


async def main(workdir: Path) -> None:
    workspace = workdir / "workspace"
    agent = HarnessAgent(
        model=os.environ.get("HARNESS_MODEL") or ScriptedChatModel(SCRIPT),
        workspace=workspace,
        tools=[read_server_log],
        memory=MemoryConfig(auto_consolidate=False),
        # Results over 2,000 characters go to a file; the context keeps head and tail.
        tool_result_eviction=ToolResultEvictionConfig(max_result_chars=2_000, preview_chars=80),
        # Compact at 6 messages (no token trigger), keeping the newest 2 verbatim.
        compaction=CompactionConfig(trigger_messages=6, trigger_tokens=0, keep_messages=2),
    )
    ctx = RuntimeContext(session_id="ops")
    async with agent:
        for question in ("Check the server log.", "How many lines?", "What was the error?"):
            reply = (await agent.call(question, ctx=ctx)).reply
            print(f"you: {question}\nagent: {reply.text}")
            if question.startswith("Check"):
                results = [r for m in await agent.sessions.load(ctx) for r in m.tool_results]
                print(f"  the session keeps: {results[0].text.splitlines()[0]}")
        saved = await agent.sessions.load(ctx)
        records = await agent.compactions.read("ops", None)

    for path, size in await asyncio.to_thread(evicted_files, workspace):
        print(f"evicted result: {path} ({size:,} bytes)")
    for record in records:
        print(f"compacted: {record['messages_before']} -> {record['messages_after']} messages")
    if saved and saved[0].name == SUMMARY_NAME:
        print(f"the session now starts with a summary:\n{saved[0].text[:300]}")
    print(f"{len(saved)} messages kept; the full history: agents/harness/sessions/ops.jsonl")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="harness-"))
    asyncio.run(main(target))
