"""What the Temporal engine costs per turn and per step, against the in-process default.

One durable agent (``durable=True``, workspace on this machine's disk, memory off), a scripted
zero-latency model that calls a no-op tool until the turn has had its planned number of steps,
and two ways to run its turns, alternating in one run:

- in process (the default, the baseline): ``agent.call``, the same durable agent;
- on the engine: ``TemporalEngine.call`` against a Temporal dev server this script starts on a
  free port (the ``temporal`` CLI of the dev extra), with a worker in this process.

Turns of 1 step and of 9 steps alternate on fresh sessions: the per-step cost is the
difference of their medians divided by 8, the per-turn cost what is left of the 1-step turn.
The engine's per-turn cost is the workflow's round trips (start, the update that returns how the
turn ended, the activity's dispatch and completion); its per-step cost should be the durable
agent's own (the activity runs the steps in the worker, with no round trip to Temporal between
them). A second pair of lines prices ``durable=True`` itself: the same agent without it, in
process (one extra save per tool-calling reply, two ledger writes per tool call).

    .venv/bin/python benchmarks/durable_engine.py [--pairs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext
from harness.durable import EngineConfig, TemporalEngine
from harness.kernel import ChatChunk, ChatResponse, Msg, TextBlock, ToolSchema, ToolUseBlock

SHORT, LONG = 1, 9


class StepsModel:
    """Calls ``noop`` until the request has ``steps - 1`` tool results since the user spoke."""

    model_name = "steps"

    def __init__(self) -> None:
        self.count = 0

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        user = max(i for i, m in enumerate(messages) if m.role == "user")
        done = sum(1 for m in messages[user:] if m.role == "tool")
        wanted = int(messages[user].text.split()[0])
        self.count += 1
        if done + 1 < wanted:
            call = ToolUseBlock(id=f"c{self.count}", name="noop", input={})
            yield ChatResponse(content=[call], stop_reason="tool_use")
        else:
            yield ChatResponse(content=[TextBlock(text="done")], stop_reason="end_turn")


def noop() -> str:
    """Do nothing."""
    return "ok"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def agent(root: Path, *, durable: bool) -> HarnessAgent:
    return HarnessAgent(
        model=StepsModel(),
        workspace=root,
        tools=[noop],
        memory=None,
        subagents=None,
        skills=False,
        trace=False,
        durable=durable,
        max_iters=LONG + 1,
    )


async def timed(
    turns: dict[int, list[float]], steps: int, run: Callable[[str], Awaitable[object]]
) -> None:
    started = time.perf_counter()
    await run(f"{steps} steps please")
    turns[steps].append((time.perf_counter() - started) * 1000)


def split(turns: dict[int, list[float]]) -> tuple[float, float]:
    """(ms per step, ms per turn) from the medians of short and long turns."""
    short, long = statistics.median(turns[SHORT]), statistics.median(turns[LONG])
    step = (long - short) / (LONG - SHORT)
    return step, short - step


async def measure(pairs: int, address: str, root: Path) -> None:
    engine = await TemporalEngine.connect(EngineConfig(address, task_queue="bench"))
    figures: dict[str, dict[int, list[float]]] = {
        name: {SHORT: [], LONG: []} for name in ("engine", "process", "plain")
    }
    async with (
        agent(root / "durable", durable=True) as durable,
        agent(root / "plain", durable=False) as plain,
        engine.worker(durable),
    ):
        session = iter(range(10**9))

        def ctx() -> RuntimeContext:
            return RuntimeContext(session_id=f"s{next(session)}")

        for _ in range(2):  # warm-up: imports, the first workflow, the first files
            await engine.call(durable, "1 steps", ctx=ctx())
        for _ in range(pairs):
            for steps in (SHORT, LONG):
                await timed(
                    figures["engine"], steps, lambda text: engine.call(durable, text, ctx=ctx())
                )
                await timed(figures["process"], steps, lambda text: durable.call(text, ctx=ctx()))
                await timed(figures["plain"], steps, lambda text: plain.call(text, ctx=ctx()))
    engine_step, engine_turn = split(figures["engine"])
    process_step, process_turn = split(figures["process"])
    plain_step, plain_turn = split(figures["plain"])
    print(f"{pairs} pairs of {SHORT}- and {LONG}-step turns, fresh sessions, zero-latency model")
    rows = [
        ("in process (baseline), durable agent", process_turn, process_step),
        ("on the Temporal engine", engine_turn, engine_step),
        ("in process, not durable", plain_turn, plain_step),
    ]
    for name, turn, step in rows:
        print(f"{name + ':':38} {turn:8.3f} ms/turn, {step:.3f} ms/step")
    print(
        f"engine/in-process: {engine_turn / process_turn:.1f}x per turn "
        f"(+{engine_turn - process_turn:.1f} ms), {engine_step / process_step:.2f}x per step"
    )
    print(f"durable/not durable per step (in process): {process_step / plain_step:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    pairs = parser.parse_args().pairs
    temporal = Path(sys.executable).with_name("temporal")
    port = free_port()
    command = [
        str(temporal), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(free_port()),
        "--metrics-port", str(free_port()), "--log-level", "error",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)  # the dev server registers its namespace
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(measure(pairs, f"127.0.0.1:{port}", Path(tmp)))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
