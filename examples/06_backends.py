"""Backends: shell commands in a bubblewrap sandbox, and a workspace kept in a key-value store.

Run::

    python examples/06_backends.py [DIR]

Offline by default: a ScriptedChatModel plays the model. Set HARNESS_MODEL (e.g.
``openai:gpt-4o-mini`` with OPENAI_API_KEY) to use a real model. The sandbox part needs
bubblewrap (``apt-get install bubblewrap``) and says so when it is missing. Everything is
written under DIR (default: a new temporary directory).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.filesystem import RemoteFilesystem, SandboxFilesystem
from harness.kernel import ChatModel
from harness.models import ScriptedChatModel
from harness.stores import InMemoryStore

SCRIPT: list[dict[str, Any]] = [
    {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
    {
        "match": "(?i)run the build",
        "tool_calls": [
            {
                "name": "execute",
                "input": {"command": "echo built > out.txt && cat out.txt && ls /workspace"},
            }
        ],
    },
    {"match": "Exit code", "text": "The build ran; see out.txt."},
    {
        "match": "(?i)write a todo",
        "tool_calls": [
            {"name": "write_file", "input": {"path": "todo.md", "content": "- ship it\n"}}
        ],
    },
    {"match": "Written to", "text": "Wrote todo.md."},
    {"match": "(?i)what did you write", "text": "todo.md, with one item: ship it."},
]


def model() -> ChatModel | str:
    """The model of $HARNESS_MODEL, or a fresh scripted one."""
    return os.environ.get("HARNESS_MODEL") or ScriptedChatModel(SCRIPT)


async def sandbox(workdir: Path) -> None:
    """An agent whose ``execute`` tool runs commands in a bubblewrap sandbox."""
    if shutil.which("bwrap") is None:
        print("sandbox: bubblewrap (bwrap) is not installed, so nothing is run here;")
        print("  install it (apt-get install bubblewrap) to see `execute` in a sandbox.")
        return
    ctx = RuntimeContext(session_id="build", user_id="ada")
    root = workdir / "sandboxed"
    backend = SandboxFilesystem(root)  # the local files of `root`, plus `execute`
    async with HarnessAgent(
        model=model(), workspace=root, filesystem=backend, memory=None
    ) as agent:
        reply = (await agent.call("Run the build.", ctx=ctx)).reply
        (result,) = [r.text for m in await agent.sessions.load(ctx) for r in m.tool_results]
        print(f"sandbox: execute returned:\n{result}\nagent: {reply.text}")
    # Only the caller's namespace, users/ada/, was writable inside the sandbox.
    out = root / "users" / "ada" / "out.txt"
    print(f"sandbox: users/ada/out.txt on the host exists: {await asyncio.to_thread(out.is_file)}")


async def remote(workdir: Path) -> None:
    """Two agents (think: two workers) on one store: files and sessions live in the store."""
    store = InMemoryStore()  # RedisStore("redis://host:6379/0") for workers on several machines
    ctx = RuntimeContext(session_id="s1", user_id="ada")
    memory = MemoryConfig(auto_consolidate=False)
    for worker, text in [("worker-1", "Write a todo list."), ("worker-2", "What did you write?")]:
        async with HarnessAgent(
            model=model(),
            # The local directory holds only this worker's search index, beside it.
            workspace=workdir / worker / "workspace",
            filesystem=RemoteFilesystem(store),
            memory=memory,
        ) as agent:
            restored = len(await agent.sessions.load(ctx))
            reply = (await agent.call(text, ctx=ctx)).reply
            print(f"remote [{worker}] restored {restored} messages from the store")
            print(f"remote [{worker}] you: {text}\nremote [{worker}] agent: {reply.text}")
    keys = [item.key for item in await store.search(("fs",))]
    print(
        f"remote: the store holds {len(keys)} files, e.g. users/ada/todo.md: "
        f"{'users/ada/todo.md' in keys}"
    )


async def main(workdir: Path) -> None:
    await sandbox(workdir)
    await remote(workdir)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="harness-"))
    asyncio.run(main(target))
