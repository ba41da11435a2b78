"""The whole property under faults: worker processes killed at random, Redis stalled at random.

Two worker slots run turns without pause, each on its own session, through real processes:
every turn is a ``memory_save`` into MEMORY.md and an answer. For 15 s the test kills a random
worker every 0.3-1.2 s (SIGKILL or SIGTERM) and starts a new one in its slot, which continues
the slot's session; on Redis it also holds every write of the server for 0.6 s now and then
(``CLIENT PAUSE ... WRITE``, beyond the store's 0.3 s timeout). The workers' model writes down,
outside the harness, each turn it was asked about (so the harness had accepted and saved it)
and each save the tool reported. Then:

- every accepted user turn is in its session exactly once, and no turn twice;
- every tool call in every session has a result;
- every fact the tool reported saved is in MEMORY.md exactly once, and no fact twice.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from harness import RuntimeContext
from harness.filesystem import RemoteFilesystem
from harness.session import SessionStore
from harness.stores import RedisStore
from harness.workspace import WorkspaceManager

SLOTS = 2
DURATION = 15.0

WORKER = """
import asyncio, os, signal, sys
from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.kernel import ChatResponse, TextBlock, ToolUseBlock
from harness.session import StoreLeases
from harness.stores import RedisStore

url, workspace, prefix, slot, generation, log = sys.argv[1:7]


def record(line):
    with open(log, "a") as handle:
        handle.write(line + "\\n")
        handle.flush()
        os.fsync(handle.fileno())


class EchoModel:
    \"\"\"Saves the fact of each turn, then answers; writes down what it saw.\"\"\"

    model_name = "echo"

    async def stream(self, messages, tools, **options):
        # a note on a memory change follows the newest message (docs/prompt-caching.md)
        last = next(m for m in reversed(messages) if m.name != "workspace_update")
        if last.tool_results:
            result = last.tool_results[0]
            turn = result.id.removeprefix("call-")
            if result.text.startswith("Saved to"):
                record(f"saved {turn}")
            yield ChatResponse(content=[TextBlock(text=f"done {turn}")])
            return
        turn = last.text.removeprefix("turn ")
        record(f"accepted {turn}")
        save = {"fact": f"fact {turn}", "target": "MEMORY.md#Facts"}
        call = ToolUseBlock(id=f"call-{turn}", name="memory_save", input=save)
        yield ChatResponse(content=[call])


async def main():
    def show_tasks():  # what a worker that does not stop is doing (the test asks on SIGUSR1)
        for running in asyncio.all_tasks():
            running.print_stack(file=sys.stderr)

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, show_tasks)
    task = asyncio.current_task()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    store = RedisStore(url, prefix=prefix, timeout=0.3, attempts=8) if url else None
    memory = MemoryConfig(flush=False, auto_consolidate=False, index=False)
    agent = HarnessAgent(
        model=EchoModel(), workspace=workspace, store=store, memory=memory, subagents=None,
        session_leases=StoreLeases(store, ttl=2.0) if store else None,
    )
    async with agent:
        n = 0
        while True:
            turn = f"{slot}.{generation}.{n}"
            await agent.call(f"turn {turn}", ctx=RuntimeContext(session_id=f"slot{slot}"))
            n += 1


try:
    asyncio.run(main())
except (asyncio.CancelledError, KeyboardInterrupt):
    pass
"""


async def start(
    root: Path, url: str, prefix: str, slot: int, generation: int
) -> asyncio.subprocess.Process:
    log = root / f"log-{slot}-{generation}.txt"
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", WORKER, url, str(root / "ws"), prefix, str(slot), str(generation),
        str(log),
    )  # fmt: skip


async def stall(url: str, milliseconds: int) -> None:
    admin = aioredis.Redis.from_url(url)
    try:
        await admin.client_pause(milliseconds, all=False)
    finally:
        await admin.aclose()


def read_logs(root: Path) -> tuple[list[str], list[str]]:
    accepted: list[str] = []
    saved: list[str] = []
    for log in sorted(root.glob("log-*.txt")):
        for line in log.read_text(encoding="utf-8").splitlines():
            kind, _, turn = line.partition(" ")
            (accepted if kind == "accepted" else saved).append(turn)
    return accepted, saved


@pytest.mark.parametrize("backend", ["local", "redis"])
async def test_killed_workers_and_a_stalling_store_lose_nothing(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    prefix = f"t{uuid.uuid4().hex[:12]}"
    rng = random.Random(f"faults-{backend}")
    workers = [await start(tmp_path, url, prefix, slot, 0) for slot in range(SLOTS)]
    generations = [0] * SLOTS
    kills: Counter[str] = Counter()
    stalls = 0
    deadline = asyncio.get_running_loop().time() + DURATION
    try:
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(rng.uniform(0.3, 1.2))
            if url and rng.random() < 0.3:
                await stall(url, 600)
                stalls += 1
                continue
            slot = rng.randrange(SLOTS)
            signum = rng.choice([signal.SIGKILL, signal.SIGTERM])
            workers[slot].send_signal(signum)
            try:  # SIGTERM stops a worker as surely as SIGKILL does
                await asyncio.wait_for(workers[slot].wait(), timeout=15)
            except TimeoutError:
                workers[slot].send_signal(signal.SIGUSR1)
                await asyncio.sleep(0.5)
                raise AssertionError(f"a worker did not stop on {signum!r}") from None
            kills[signal.Signals(signum).name] += 1
            generations[slot] += 1
            workers[slot] = await start(tmp_path, url, prefix, slot, generations[slot])
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(asyncio.gather(*(w.wait() for w in workers)), timeout=60)

    store = RedisStore(url, prefix=prefix) if url else None
    try:
        manager = WorkspaceManager(
            tmp_path / ("ws" if store is None else "anchor"),
            RemoteFilesystem(store) if store is not None else None,
        )
        accepted, saved = read_logs(tmp_path)
        said: Counter[str] = Counter()
        calls = answered = 0
        for slot in range(SLOTS):
            ctx = RuntimeContext(session_id=f"slot{slot}")
            messages = await SessionStore(manager, "harness").load(ctx)
            said.update(m.text.removeprefix("turn ") for m in messages if m.role == "user")
            results = {r.id for m in messages for r in m.tool_results}
            uses = [u.id for m in messages for u in m.tool_uses]
            calls += len(uses)
            answered += sum(use in results for use in uses)
        memory = await manager.read_own("MEMORY.md") or ""
        facts = Counter(line.removeprefix("- fact ") for line in memory.splitlines()
                        if line.startswith("- fact "))  # fmt: skip
    finally:
        if store is not None:
            await store.aclose()

    print(
        f"{backend}: {sum(kills.values())} kills ({dict(kills)}), {stalls} stalls; "
        f"{len(accepted)} turns accepted, {sum(said.values())} in the sessions; "
        f"{calls} tool calls, {answered} answered; {len(saved)} facts reported saved, "
        f"{sum(facts.values())} in MEMORY.md"
    )
    assert sum(kills.values()) >= 8
    assert len(accepted) >= 20  # the workers did work between the faults
    assert [turn for turn, count in said.items() if count > 1] == []
    assert [turn for turn in accepted if said[turn] != 1] == []
    assert answered == calls
    assert [fact for fact, count in facts.items() if count > 1] == []
    assert [turn for turn in saved if facts[turn] != 1] == []
