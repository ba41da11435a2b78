"""Loss 2: two processes on one session dropped each other's turns.

Two worker processes run 10 turns each on the same session, every turn calling a tool that
sleeps 0.4 s, on local disk and on a real Redis. Each call now holds the session's lease from
before it loads the session until after its last save, so the other worker waits: the saved
session and the transcript hold all 20 user turns, each exactly once, each answered.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest

from _outcomes import answer
from harness import RuntimeContext
from harness.filesystem import RemoteFilesystem
from harness.session import SessionStore
from harness.stores import RedisStore
from harness.workspace import WorkspaceManager

TURNS = 10
SESSION = "shared"

WORKER = """
import asyncio, sys
from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.models import ScriptedChatModel
from harness.stores import RedisStore

workspace, url, prefix, name, turns = sys.argv[1:6]


async def slow() -> str:
    \"\"\"Take a while, as real tools do.\"\"\"
    await asyncio.sleep(0.4)
    return "slept"


async def main() -> None:
    store = RedisStore(url, prefix=prefix) if url else None
    model = ScriptedChatModel([
        {"match": "^turn ", "tool_calls": [{"name": "slow", "input": {}}], "repeat": True},
        {"match": "slept", "text": "done", "repeat": True},
    ])
    memory = MemoryConfig(flush=False, auto_consolidate=False, index=False)
    async with HarnessAgent(
        model=model, workspace=workspace, store=store, tools=[slow], memory=memory,
        subagents=None,
    ) as agent:
        for i in range(int(turns)):
            await agent.call(f"turn {name}{i}", ctx=RuntimeContext(session_id="shared"))
    if store is not None:
        await store.aclose()


asyncio.run(main())
"""


async def run_two_workers(workspace: Path, url: str, prefix: str) -> None:
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", WORKER, str(workspace), url, prefix, name, str(TURNS)
        )
        for name in ("A", "B")
    ]
    codes = await asyncio.wait_for(asyncio.gather(*(w.wait() for w in workers)), timeout=120)
    assert codes == [0, 0]


async def check_every_turn_once(manager: WorkspaceManager) -> None:
    expected = sorted(f"turn {name}{i}" for name in "AB" for i in range(TURNS))
    messages = await SessionStore(manager, "harness").load(RuntimeContext(session_id=SESSION))
    users = [m.text for m in messages if m.role == "user"]
    assert sorted(users) == expected, f"{len(users)} of {len(expected)} user turns saved"
    answers = [m.text for m in messages if m.role == "assistant" and m.text]
    assert answers == ["done"] * len(expected)  # and each one answered, in order
    transcript = await manager.read_own(f"agents/harness/sessions/{SESSION}.jsonl")
    assert transcript is not None
    logged = [json.loads(line) for line in transcript.splitlines() if line.strip()]
    said = [entry["content"] for entry in logged if entry["role"] == "user"]
    assert sorted(said) == expected


async def test_two_processes_on_local_disk_keep_every_turn(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"

    await run_two_workers(workspace, "", "")

    await check_every_turn_once(WorkspaceManager(workspace))
    # The leases live beside the workspace, where no file tool or sandbox reaches.
    assert (tmp_path / ".workspace.leases").is_dir()
    assert not list(workspace.rglob("*.lock*leases*"))


async def test_two_processes_on_redis_keep_every_turn(tmp_path: Path, redis_url: str) -> None:
    prefix = f"t{uuid.uuid4().hex[:12]}"

    await run_two_workers(tmp_path / "workspace", redis_url, prefix)

    store = RedisStore(redis_url, prefix=prefix)
    try:
        await check_every_turn_once(WorkspaceManager(tmp_path / "w", RemoteFilesystem(store)))
    finally:
        await store.aclose()


@pytest.mark.parametrize("backend", ["local", "redis"])
async def test_a_caller_that_waits_too_long_gets_session_busy(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    from harness import HarnessAgent, SessionBusy
    from harness.models import ScriptedChatModel

    store = None
    if backend == "redis":
        store = RedisStore(request.getfixturevalue("redis_url"), prefix=f"t{uuid.uuid4().hex[:12]}")
    holding, release = asyncio.Event(), asyncio.Event()

    async def hold() -> str:
        """Block until the test lets go."""
        holding.set()
        await release.wait()
        return "released"

    def agent() -> HarnessAgent:
        model = ScriptedChatModel(
            [
                {"match": "^first", "tool_calls": [{"name": "hold", "input": {}}]},
                {"text": "done", "repeat": True},
            ]
        )
        return HarnessAgent(
            model=model,
            workspace=tmp_path / "workspace",
            store=store,
            tools=[hold],
            memory=None,
            subagents=None,
            session_wait=0.3,
        )

    ctx = RuntimeContext(session_id=SESSION)
    async with agent() as first, agent() as second:  # two agents: no shared in-process lock
        running = asyncio.create_task(first.call("first", ctx=ctx))
        await asyncio.wait_for(holding.wait(), timeout=30)  # the first call holds the session
        with pytest.raises(SessionBusy, match="in use by another call"):
            answer(await second.call("second", ctx=ctx))
        release.set()
        await running
        assert (answer(await second.call("now", ctx=ctx))).text == "done"  # free again
    if store is not None:
        await store.aclose()


async def test_a_call_cancelled_while_it_takes_the_lease_leaves_the_session_free(
    tmp_path: Path,
) -> None:
    from harness.session import FileLeases

    leases = FileLeases(tmp_path / "leases")
    for delay in (0.0, 0.0001, 0.0005, 0.001, 0.005):  # cancelled at different moments

        async def take() -> None:
            async with leases.hold("s", wait=1.0):
                await asyncio.sleep(10)

        task = asyncio.create_task(take())
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.05)  # a lock the thread took late is let go by now
        async with leases.hold("s", wait=0.5):
            pass  # free again
