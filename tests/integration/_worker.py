"""One worker process of the multi-worker tests: a HarnessAgent whose workspace is in Redis.

    python _worker.py turn     <redis url> <prefix> <local dir> <text>
    python _worker.py search   <redis url> <prefix> <local dir> <query>
    python _worker.py maintain <redis url> <prefix> <local dir>
    python _worker.py delegate <redis url> <prefix> <local dir> <text>

Each worker has its own local directory (its search index lives there) and shares everything
else through the store. The scripted model answers every turn, and the memory flush keeps one
fact per turn: "- <word> was mentioned" for the turn's word. ``delegate`` runs a turn of an
agent with subagents, scripted by :data:`DELEGATION`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from harness import HarnessAgent, MemoryConfig, RuntimeContext, SubagentsConfig
from harness.kernel import Finished
from harness.models import ScriptedChatModel
from harness.stores.redis import RedisStore
from harness.tools import MemoryTools

CTX = RuntimeContext(session_id="shared", user_id="alice")
SCRIPT = {
    "log": "requests.jsonl",
    "turns": [
        *(
            {
                "match": f"Extract NEW memories[\\s\\S]*Tell me about {word}\\b",
                "text": f"- {word} was mentioned",
            }
            for word in ("apple", "banana", "cherry")
        ),
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        {"match": "New daily log entries", "text": "# Memory", "repeat": True},
        {"text": "noted", "repeat": True},
    ],
}

DELEGATION = {
    "log": "requests.jsonl",
    "turns": [
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        {
            "match": "^Delegate",
            "tool_calls": [
                {
                    "name": "agent_spawn",
                    "input": {
                        "agent_id": "general-purpose",
                        "task": "Summarize apple",
                        "label": "helper",
                        "timeout_seconds": 0,
                    },
                }
            ],
        },
        {"match": "status: accepted", "text": "started"},
        {"match": "^Summarize apple", "text": "apple summary"},
        {
            "match": "system-reminder",
            "tool_calls": [
                {"name": "agent_send", "input": {"label": "helper", "message": "And banana?"}}
            ],
        },
        {"match": "^And banana", "text": "banana summary"},
        {"match": "banana summary", "text": "done"},
    ],
}


async def main(mode: str, url: str, prefix: str, local: str, *args: str) -> None:
    root = Path(local)
    (root / "ws").mkdir(parents=True, exist_ok=True)
    script = root / "script.json"
    delegating = mode == "delegate"
    script.write_text(json.dumps(DELEGATION if delegating else SCRIPT), encoding="utf-8")
    store = RedisStore(url, prefix=prefix)
    agent = HarnessAgent(
        model=ScriptedChatModel.from_file(script),
        workspace=root / "ws",
        store=store,
        memory=MemoryConfig(auto_consolidate=False),
        subagents=SubagentsConfig() if delegating else None,
    )
    try:
        if mode in ("turn", "delegate"):
            outcome = await agent.call(args[0], ctx=CTX)
            assert isinstance(outcome, Finished), outcome
            print(outcome.reply.text)
        elif mode == "search":
            assert agent.maintenance is not None
            print(await MemoryTools(agent.workspace, agent.maintenance).memory_search(args[0], CTX))
        elif mode == "maintain":
            assert agent.maintenance is not None
            report = await agent.maintenance.run_if_due()
            print("ran" if report is not None else "skipped")
    finally:
        await agent.aclose()
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
