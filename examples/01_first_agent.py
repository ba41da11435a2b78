"""A first agent: one tool, a saved session, and a second agent that restores it.

Run::

    python examples/01_first_agent.py [DIR]

Offline by default: a ScriptedChatModel plays the model, so the output is always the same.
Set HARNESS_MODEL (e.g. ``openai:gpt-4o-mini`` with OPENAI_API_KEY, and OPENAI_BASE_URL for a
local server; or ``anthropic:claude-sonnet-4-5`` with ANTHROPIC_API_KEY) to use a real model.
Everything is written under DIR (default: a new temporary directory).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext
from harness.kernel import ChatModel
from harness.models import ScriptedChatModel

SCRIPT: list[dict[str, Any]] = [
    # The memory model's flush request after each call: nothing worth remembering here.
    {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
    {
        "match": "(?i)how many words",
        "tool_calls": [{"name": "word_count", "input": {"text": "to be or not to be"}}],
    },
    {"match": r"^6$", "text": "'to be or not to be' has 6 words."},
    {"match": "(?i)what did i ask", "text": "You asked how many words 'to be or not to be' has."},
]


def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return len(text.split())


def model() -> ChatModel | str:
    """The model of $HARNESS_MODEL, or a fresh scripted one (a new process would have its own)."""
    return os.environ.get("HARNESS_MODEL") or ScriptedChatModel(SCRIPT)


async def main(workdir: Path) -> None:
    workspace = workdir / "workspace"
    ctx = RuntimeContext(session_id="first", user_id="ada")
    async with HarnessAgent(model=model(), workspace=workspace, tools=[word_count]) as agent:
        question = "How many words in 'to be or not to be'?"
        reply = (await agent.call(question, ctx=ctx)).reply
        print(f"you:   {question}\nagent: {reply.text}")
        calls = [block for msg in await agent.sessions.load(ctx) for block in msg.tool_uses]
        for call in calls:
            print(f"tool call: {call.name}({call.input})")

    # A second agent stands for a new process: only the workspace is shared.
    async with HarnessAgent(model=model(), workspace=workspace, tools=[word_count]) as agent:
        saved = await agent.sessions.load(ctx)
        print(f"restored {len(saved)} messages of session 'first'")
        question = "What did I ask you before?"
        reply = (await agent.call(question, ctx=ctx)).reply
        print(f"you:   {question}\nagent: {reply.text}")

    session = workspace / "users/ada/agents/harness/context/first/messages.jsonl"
    print(f"session file: {session} (exists: {await asyncio.to_thread(session.is_file)})")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="harness-"))
    asyncio.run(main(target))
