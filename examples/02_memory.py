"""Memory across sessions: a fact flushed to the daily log, found later by memory_search.

Run::

    python examples/02_memory.py [DIR]

Offline by default: ScriptedChatModels play the agent and the memory model. Set HARNESS_MODEL
(e.g. ``openai:gpt-4o-mini`` with OPENAI_API_KEY) to use a real model for both. Everything is
written under DIR (default: a new temporary directory).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.kernel import ChatModel
from harness.models import ScriptedChatModel

SCRIPT: list[dict[str, Any]] = [
    # The memory model: the first flush keeps the fact, later ones find nothing new.
    {
        "match": r"Extract NEW memories[\s\S]*dentist",
        "text": "- Ada's dentist appointment is on 14 May at 9:30.",
    },
    {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
    # The agent: Monday's session, then Friday's, which has to search.
    {"match": "(?i)remember that", "text": "Noted: dentist on 14 May at 9:30."},
    {
        "match": "(?i)when is my dentist",
        "tool_calls": [{"name": "memory_search", "input": {"query": "dentist appointment"}}],
    },
    {"match": r"Found \d+ match", "text": "Your dentist appointment is on 14 May at 9:30."},
]

# No background consolidation: this example shows the flush and the search only.
MEMORY = MemoryConfig(auto_consolidate=False)


def model() -> ChatModel | str:
    """The model of $HARNESS_MODEL, or the scripted one (one script for both agents)."""
    return os.environ.get("HARNESS_MODEL") or ScriptedChatModel(SCRIPT)


async def main(workdir: Path) -> None:
    workspace = workdir / "workspace"
    llm = model()
    monday = RuntimeContext(session_id="monday", user_id="ada")
    async with HarnessAgent(model=llm, workspace=workspace, memory=MEMORY) as agent:
        said = "Remember that my dentist appointment is on 14 May at 9:30."
        reply = (await agent.call(said, ctx=monday)).reply
        print(f"[monday] you:   {said}\n[monday] agent: {reply.text}")
    # Closing the agent waited for the flush that followed the call.
    daily = f"users/ada/memory/{datetime.now().astimezone().date().isoformat()}.md"
    log = await asyncio.to_thread((workspace / daily).read_text, encoding="utf-8")
    print(f"daily log {daily}:\n{log.strip()}\n")

    friday = RuntimeContext(session_id="friday", user_id="ada")  # a new, empty session
    async with HarnessAgent(model=llm, workspace=workspace, memory=MEMORY) as agent:
        asked = "When is my dentist appointment?"
        reply = (await agent.call(asked, ctx=friday)).reply
        for message in await agent.sessions.load(friday):
            for result in message.tool_results:
                print(f"memory_search returned:\n{result.text}\n")
        print(f"[friday] you:   {asked}\n[friday] agent: {reply.text}")
    print(f"search index: {workdir / 'memory_index.db'} (a cache; `harness memory index` rebuilds)")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="harness-"))
    asyncio.run(main(target))
