"""One worker process of the durable-engine tests, and the agent every process of them builds.

    python _durable_worker.py <temporal address> <task queue> <redis url> <prefix> <witness dir>

runs a Temporal worker for the agent until it is killed, printing ``ready`` once it polls.

Every real execution leaves a line in ``<witness dir>/witness.log``, outside the workspace and
out of Temporal's and the store's reach: ``model <request key> started|completed`` for each
model call, ``tool <name> <argument>`` for each tool run, each with the worker's pid. A model
call or a tool that is asked to be slow (``SLOW`` in the request's last message, or the
``slow_write`` tool) sleeps until killed the first time it runs, and is quick afterwards (a
``<name>.slow`` marker file says it already slept once), so a test can kill the worker in it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from harness import HarnessAgent
from harness.approvals import ApprovalPolicy, ApprovalRule
from harness.durable import EngineConfig, TemporalEngine
from harness.kernel import ChatChunk, ChatResponse, Msg, ToolSchema, ToolUseBlock
from harness.models import ScriptedChatModel
from harness.models.scripted import request_text
from harness.session.lease import StoreLeases
from harness.stores.redis import RedisStore

HEARTBEAT_SECONDS = 1.5
"""Short, so a killed worker's turn moves within seconds (production uses 30)."""

LEASE_SECONDS = 1.5
"""The session lease's expiry: a killed worker's lease is free again after this."""

SLEEP_UNTIL_KILLED = 120.0

SCRIPT: list[dict[str, Any]] = [
    # (a) a slow model call: the first answer to "Think SLOW" sleeps until killed
    {"match": "^Think SLOW", "text": "thought it through"},
    # (b) a slow tool call, then the model reads whatever came back
    {"match": "^Write it", "tool_calls": [{"name": "slow_write", "input": {"name": "b"}}]},
    {"match": "unknown|wrote b", "text": "write reported"},
    # (c) a gated tool waits for approval
    {"match": "^Deploy", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
    {"match": "deployed prod", "text": "deploy done"},
    # (d) a background subagent, whose child writes (slowly)
    {
        "match": "^Delegate",
        "tool_calls": [
            {
                "name": "agent_spawn",
                "input": {
                    "agent_id": "general-purpose",
                    "task": "Write it",
                    "label": "writer",
                    "timeout_seconds": 0,
                },
            }
        ],
    },
    {"match": "status: accepted", "text": "delegated"},
    # two steps, each with a tool
    {"match": "^Two steps", "tool_calls": [{"name": "note", "input": {"text": "one"}}]},
    {"match": "noted one", "tool_calls": [{"name": "note", "input": {"text": "two"}}]},
    {"match": "noted two", "text": "both noted"},
    # a structured turn: prose first, then the JSON the correction asks for
    {"match": "^Answer with only", "text": "Porto, for three days."},
    {"match": "no JSON value", "text": '{"city": "Porto", "days": 3}'},
]


class WitnessModel(ScriptedChatModel):
    """The script, with every call witnessed, unique tool-call ids, and a first slow call."""

    witness: Path

    def __init__(self, witness: Path) -> None:
        super().__init__(SCRIPT)
        self.witness = witness

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        last = request_text(messages[-1]) if messages else ""
        key = request_key(messages)
        witness(self.witness, f"model {key} started")
        if "SLOW" in last:
            await sleep_once(self.witness, "model")
        async for item in super().stream(messages, tools, **options):
            if isinstance(item, ChatResponse):
                item.content = [
                    block.model_copy(update={"id": f"call_{uuid.uuid4().hex[:12]}"})
                    if isinstance(block, ToolUseBlock)
                    else block
                    for block in item.content
                ]
                witness(self.witness, f"model {key} completed")
            yield item


def request_key(messages: Sequence[Msg]) -> str:
    """Which step a request is: the conversation it was made on (ids and times left out)."""
    shown = [[m.role, request_text(m)] for m in messages if m.role != "system"]
    return hashlib.sha256(json.dumps(shown).encode()).hexdigest()[:12]


def witness(root: Path, line: str) -> None:
    with (root / "witness.log").open("a", encoding="utf-8") as handle:
        handle.write(f"{line} pid={os.getpid()}\n")


async def sleep_once(root: Path, name: str) -> None:
    marker = root / f"{name}.slow"
    if not marker.exists():
        marker.touch()
        await asyncio.sleep(SLEEP_UNTIL_KILLED)


def build_agent(redis_url: str, prefix: str, witness_dir: Path, local: Path) -> HarnessAgent:
    """The agent of every process of a test: the same tools, model script and store."""

    async def slow_write(name: str) -> str:
        """Write the named record (slowly)."""
        witness(witness_dir, f"tool slow_write {name}")
        await sleep_once(witness_dir, "slow_write")
        return f"wrote {name}"

    def deploy(target: str) -> str:
        """Deploy to a target."""
        witness(witness_dir, f"tool deploy {target}")
        return f"deployed {target}"

    def note(text: str) -> str:
        """Note a text."""
        witness(witness_dir, f"tool note {text}")
        return f"noted {text}"

    store = RedisStore(redis_url, prefix=prefix)
    return HarnessAgent(
        model=WitnessModel(witness_dir),
        workspace=local / "ws",
        store=store,
        session_leases=StoreLeases(store, ttl=LEASE_SECONDS),
        tools=[slow_write, deploy, note],
        memory=None,
        skills=False,
        trace=False,
        approvals=ApprovalPolicy(rules={"deploy": ApprovalRule()}),
        durable=True,
    )


def engine_config(address: str, queue: str) -> EngineConfig:
    return EngineConfig(
        address,
        task_queue=queue,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        first_retry_seconds=0.2,
        sticky_seconds=0.5,
    )


async def main(address: str, queue: str, redis_url: str, prefix: str, witness_dir: str) -> None:
    root = Path(witness_dir)
    local = root / f"worker-{os.getpid()}"
    agent = build_agent(redis_url, prefix, root, local)
    engine = await TemporalEngine.connect(engine_config(address, queue))
    async with agent, engine.worker(agent):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
