"""A worker killed with SIGKILL mid-turn: another worker finishes the turn, and nothing runs twice.

Real components throughout: a Temporal dev server, a Redis holding the workspace, and worker
processes (``_worker.py``) that the tests kill. Each real execution of a model call or a tool
leaves a line in a witness file outside the workspace, which is how the tests count them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from _durable_worker import build_agent, engine_config
from pydantic import BaseModel

from harness import HarnessAgent, RuntimeContext
from harness.durable import TemporalEngine
from harness.kernel import Finished, Msg, Paused
from harness.subagents import TaskStatus

WORKER = Path(__file__).with_name("_durable_worker.py")
UNKNOWN = "whether it took effect is unknown"


class Cluster:
    """Worker processes on one queue, a client agent, and the witness of what really ran."""

    def __init__(self, address: str, redis_url: str, root: Path) -> None:
        self.address = address
        self.redis_url = redis_url
        self.queue = f"q-{uuid.uuid4().hex[:8]}"
        self.prefix = f"t{uuid.uuid4().hex[:8]}"
        self.witness = root / "witness"
        self.witness.mkdir()
        self.workers: list[asyncio.subprocess.Process] = []
        self.agent = build_agent(redis_url, self.prefix, self.witness, root / "client")
        self.engine: TemporalEngine | None = None

    async def start_worker(self) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            self.address,
            self.queue,
            self.redis_url,
            self.prefix,
            str(self.witness),
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        assert line.strip() == b"ready", line
        self.workers.append(process)
        return process

    def lines(self) -> list[str]:
        path = self.witness / "witness.log"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        return [line.rsplit(" pid=", 1)[0] for line in text.splitlines()]

    def pids(self, line: str) -> list[int]:
        path = self.witness / "witness.log"
        return [
            int(found.rsplit(" pid=", 1)[1])
            for found in path.read_text(encoding="utf-8").splitlines()
            if found.rsplit(" pid=", 1)[0] == line
        ]

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until the witness shows ``condition`` (it is written by other processes)."""
        async with asyncio.timeout(60):
            while not condition():  # noqa: ASYNC110 - written by other processes
                await asyncio.sleep(0.05)

    async def aclose(self) -> None:
        for process in self.workers:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        store = self.agent.options.store
        await self.agent.aclose()
        if store is not None:
            await store.aclose()


@pytest.fixture
async def cluster(temporal_address: str, redis_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    cluster = Cluster(temporal_address, redis_url, tmp_path)
    cluster.engine = await TemporalEngine.connect(engine_config(temporal_address, cluster.queue))
    try:
        yield cluster
    finally:
        await cluster.aclose()


def kill(process: asyncio.subprocess.Process) -> None:
    os.kill(process.pid, signal.SIGKILL)


def completed_steps(lines: list[str]) -> list[str]:
    return [line.split()[1] for line in lines if line.startswith("model ") and "completed" in line]


def conversation(messages: list[Msg]) -> list[tuple[str, str]]:
    """What a session says, turn by turn: roles, texts, tool calls and results (no ids)."""
    shown: list[tuple[str, str]] = []
    for message in messages:
        calls = [f"{use.name}({use.input})" for use in message.tool_uses]
        results = [result.text for result in message.tool_results]
        parts = [message.text, *calls, *results]
        shown.append((message.role, " | ".join(part for part in parts if part)))
    return shown


async def saved(agent: HarnessAgent, ctx: RuntimeContext) -> list[tuple[str, str]]:
    return conversation(await agent.sessions.load(ctx))


async def run_killed(
    cluster: Cluster,
    call: Callable[[], Coroutine[Any, Any, object]],
    killed_when: Callable[[], bool],
) -> object:
    """Start ``call`` with one worker, kill it when the witness shows ``killed_when``, start
    another, and return what ``call`` returned."""
    first = await cluster.start_worker()
    task = asyncio.create_task(call())
    await cluster.until(killed_when)
    kill(first)
    await cluster.start_worker()
    return await asyncio.wait_for(task, timeout=90)


async def test_a_worker_killed_during_a_slow_model_call(cluster: Cluster) -> None:
    ctx = RuntimeContext(session_id="a", user_id="ann")
    assert cluster.engine is not None
    engine, agent = cluster.engine, cluster.agent

    ended = await run_killed(
        cluster,
        lambda: engine.call(agent, "Think SLOW about it", ctx=ctx),
        lambda: (cluster.witness / "model.slow").exists(),
    )

    assert isinstance(ended, Finished)
    assert ended.reply.text == "thought it through"
    steps = completed_steps(cluster.lines())
    assert len(steps) == len(set(steps)) == 1  # the killed call had not completed; one did
    assert await saved(agent, ctx) == [
        ("user", "Think SLOW about it"),
        ("assistant", "thought it through"),
    ]


async def test_a_worker_killed_during_a_slow_tool_call(cluster: Cluster) -> None:
    ctx = RuntimeContext(session_id="b", user_id="ann")
    assert cluster.engine is not None
    engine, agent = cluster.engine, cluster.agent

    ended = await run_killed(
        cluster,
        lambda: engine.call(agent, "Write it", ctx=ctx),
        lambda: "tool slow_write b" in cluster.lines(),
    )

    assert isinstance(ended, Finished)
    assert ended.reply.text == "write reported"
    lines = cluster.lines()
    assert lines.count("tool slow_write b") == 1  # it may have run: it is never run again
    steps = completed_steps(lines)
    assert len(steps) == len(set(steps)) == 2  # the reply that called the tool was not asked again
    session = await saved(agent, ctx)
    assert session[:2] == [("user", "Write it"), ("assistant", "slow_write({'name': 'b'})")]
    assert session[2][0] == "tool"
    assert UNKNOWN in session[2][1]
    assert session[3] == ("assistant", "write reported")


async def test_a_worker_killed_while_its_turn_waits_for_approval(cluster: Cluster) -> None:
    ctx = RuntimeContext(session_id="c", user_id="ann")
    assert cluster.engine is not None
    engine, agent = cluster.engine, cluster.agent
    first = await cluster.start_worker()

    paused = await engine.call(agent, "Deploy the app", ctx=ctx)
    assert isinstance(paused, Paused)
    (request,) = paused.pending
    kill(first)  # nothing holds the waiting turn but Temporal and the store
    await first.wait()
    await cluster.start_worker()

    ended = await asyncio.wait_for(
        engine.resume(agent, {str(request["id"]): "approve"}, ctx=ctx), timeout=90
    )

    assert isinstance(ended, Finished)
    assert ended.reply.text == "deploy done"
    assert cluster.lines().count("tool deploy prod") == 1
    assert await saved(agent, ctx) == [
        ("user", "Deploy the app"),
        ("assistant", "deploy({'target': 'prod'})"),
        ("tool", "deployed prod"),
        ("assistant", "deploy done"),
    ]
    steps = completed_steps(cluster.lines())
    assert len(steps) == len(set(steps)) == 2


async def test_a_worker_killed_during_a_background_subagent(cluster: Cluster) -> None:
    ctx = RuntimeContext(session_id="d", user_id="ann")
    assert cluster.engine is not None
    engine, agent = cluster.engine, cluster.agent
    assert agent.tasks is not None
    first = await cluster.start_worker()

    ended = await engine.call(agent, "Delegate the write", ctx=ctx)
    assert isinstance(ended, Finished)
    assert ended.reply.text == "delegated"  # the parent's turn is over; its task runs on
    await cluster.until(lambda: "tool slow_write b" in cluster.lines())
    kill(first)
    await cluster.start_worker()

    (record,) = await agent.tasks.records("ann", session_id="d")
    record = await agent.tasks.wait(record, 60)
    assert record.status is TaskStatus.COMPLETED, record
    assert await agent.tasks.result(record) == "write reported"
    lines = cluster.lines()
    assert lines.count("tool slow_write b") == 1
    steps = completed_steps(lines)
    assert len(steps) == len(set(steps))  # no completed model call, parent's or child's, twice


async def test_an_uninterrupted_turn_saves_what_a_taken_over_one_does(cluster: Cluster) -> None:
    """The reference for the takeovers above: one worker, no kill, the same conversation."""
    ctx = RuntimeContext(session_id="ref", user_id="ann")
    assert cluster.engine is not None
    await cluster.start_worker()

    ended = await cluster.engine.call(cluster.agent, "Two steps please", ctx=ctx)

    assert isinstance(ended, Finished)
    assert await saved(cluster.agent, ctx) == [
        ("user", "Two steps please"),
        ("assistant", "note({'text': 'one'})"),
        ("tool", "noted one"),
        ("assistant", "note({'text': 'two'})"),
        ("tool", "noted two"),
        ("assistant", "both noted"),
    ]
    assert cluster.lines().count("tool note one") == 1


class Trip(BaseModel):
    city: str
    days: int


async def test_a_structured_turn_on_the_engine_gets_an_object_that_fits(cluster: Cluster) -> None:
    """The output type travels to the worker, which asks again until the answer fits; the
    engine's caller gets the value (once refused: structured output was not on the engine)."""
    ctx = RuntimeContext(session_id="structured", user_id="ann")
    assert cluster.engine is not None
    await cluster.start_worker()

    ended = await cluster.engine.call(cluster.agent, "Plan a trip", ctx=ctx, output=Trip)

    assert isinstance(ended, Finished)
    assert ended.output == Trip(city="Porto", days=3)
    assert ended.reply.text == '{"city": "Porto", "days": 3}'
    said = [text for role, text in await saved(cluster.agent, ctx) if role == "assistant"]
    assert said == ["Porto, for three days.", '{"city": "Porto", "days": 3}']
