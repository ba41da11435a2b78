"""Two users, one agent: each has their own files, sessions and memory.

Run::

    python examples/05_multi_user.py [DIR]

Offline by default: a ScriptedChatModel plays the model. Set HARNESS_MODEL (e.g.
``openai:gpt-4o-mini`` with OPENAI_API_KEY) to use a real model. Everything is written under
DIR (default: a new temporary directory).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext
from harness.models import ScriptedChatModel

SCRIPT: list[dict[str, Any]] = [
    {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
    {
        "match": "(?i)save my note",
        "tool_calls": [
            {"name": "write_file", "input": {"path": "notes.md", "content": "Launch on Friday."}}
        ],
    },
    {"match": "Written to", "text": "Saved to notes.md."},
    {
        "match": "(?i)read my note",
        "tool_calls": [{"name": "read_file", "input": {"path": "notes.md"}}],
        "repeat": True,
    },
    {"match": "(?i)not found", "text": "You have no notes yet."},
    {"match": "Launch on Friday", "text": "Your note says: Launch on Friday."},
    {"match": "(?i)which company", "text": "Acme Rockets.", "repeat": True},
]


def tree(root: Path) -> list[str]:
    """The workspace's files, without lock files."""
    files = (p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock"))
    return sorted(p.relative_to(root).as_posix() for p in files)


async def main(workdir: Path) -> None:
    workspace = workdir / "workspace"
    # A shared file: every user's reads fall back to it (knowledge/KNOWLEDGE.md is injected).
    shared = workspace / "knowledge" / "KNOWLEDGE.md"
    await asyncio.to_thread(shared.parent.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(shared.write_text, "The company is Acme Rockets.\n", encoding="utf-8")

    ada = RuntimeContext(user_id="ada")  # both use the session "default", yet never meet
    bob = RuntimeContext(user_id="bob")
    async with HarnessAgent(
        model=os.environ.get("HARNESS_MODEL") or ScriptedChatModel(SCRIPT), workspace=workspace
    ) as agent:
        for who, ctx, text in [
            ("ada", ada, "Save my note: launch on Friday."),
            ("bob", bob, "Read my note, please."),
            ("ada", ada, "Read my note, please."),
        ]:
            reply = (await agent.call(text, ctx=ctx)).reply
            print(f"[{who}] you:   {text}\n[{who}] agent: {reply.text}")
        # Calls for different users run concurrently on one agent.
        replies = await asyncio.gather(
            *(agent.call("Which company do we work for?", ctx=ctx) for ctx in (ada, bob))
        )
        print(f"both users at once (knowledge/ is shared): {[r.reply.text for r in replies]}")
    print("files:")
    for path in await asyncio.to_thread(tree, workspace):
        print(f"  {path}")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="harness-"))
    asyncio.run(main(target))
