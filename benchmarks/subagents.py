"""What delegating to a subagent costs, against calling an agent directly, in the same run.

1. **Spawn and one turn.** ``agent_spawn(agent_id, task)`` on a HarnessAgent with default
   settings: it builds a leaf child (a HarnessAgent sharing the parent's workspace and memory
   worker), runs one turn of it (session restore, hooks, session save) and returns its reply.
   Baselines, same model: one call of a bare ``ReActAgent``, and one call of an already built
   HarnessAgent (so the cost of building the child shows on its own).
2. **Fifty background tasks.** 50 ``agent_spawn(..., timeout_seconds=0)`` at once, until every
   task's result file and record are written; against 50 concurrent direct ``ReActAgent`` calls
   (the named baseline: no workspace, nothing saved) and 50 concurrent ``HarnessAgent`` calls on
   new sessions with the memory work they leave behind (what each child does anyway, and it
   overlaps the tasks), so the task machinery's own share shows.
   Run twice: with ``max_running=50`` (the machinery's own overhead) and with the default 8 (the
   queue adds waiting in batches, which a model that answers at once hides).

The model answers at once (and NO_REPLY to memory flushes), so the figures are the harness's own
cost. Memory work that runs after a call (flush, transcript, index) is waited for between
repetitions, outside the timing.

    .venv/bin/python benchmarks/subagents.py [--reps 200] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext, SubagentsConfig, SubagentSpec
from harness.hooks import SubagentsHook
from harness.kernel import ChatChunk, ChatResponse, Msg, ReActAgent, TextBlock, ToolSchema
from harness.memory import FLUSH_SYSTEM_PROMPT, NO_REPLY
from harness.subagents import TaskStatus

TASKS = 50


class InstantModel:
    """Answers every request at once with a short text."""

    model_name = "instant"

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        text = NO_REPLY if messages and messages[0].text == FLUSH_SYSTEM_PROMPT else "done"
        yield ChatResponse(content=[TextBlock(text=text)])


def _hook(agent: HarnessAgent) -> SubagentsHook:
    assert agent.subagents is not None
    return agent.subagents


async def _settle(agent: HarnessAgent) -> None:
    if agent.maintenance is not None:
        await agent.maintenance.settled()


async def spawn_and_turn(root: Path, reps: int) -> dict[str, list[float]]:
    model = InstantModel()
    worker = SubagentSpec(name="worker", description="Does one thing.", sys_prompt="Be brief.")
    parent = HarnessAgent(model=model, workspace=root, subagents=[worker])
    direct = HarnessAgent(model=model, workspace=root, name="direct", subagents=None)
    bare = ReActAgent(name="bare", model=model, sys_prompt="Be brief.")
    spawning = _hook(parent).spawning
    timings: dict[str, list[float]] = {"spawn": [], "harness": [], "bare": []}
    for i in range(reps):
        ctx = RuntimeContext(session_id=f"s{i}", user_id="u1")
        start = time.perf_counter()
        reply = await spawning.agent_spawn("worker", ctx, task="Say done.")
        timings["spawn"].append((time.perf_counter() - start) * 1000)
        assert isinstance(reply, str), reply
        assert "status: ok" in reply, reply
        start = time.perf_counter()
        await direct.call("Say done.", ctx=ctx)
        timings["harness"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await bare.call("Say done.", ctx=ctx, memory=[])
        timings["bare"].append((time.perf_counter() - start) * 1000)
        await _settle(parent)
    await parent.aclose()
    await direct.aclose()
    return timings


async def background_tasks(root: Path, rounds: int, max_running: int) -> dict[str, list[float]]:
    model = InstantModel()
    parent = HarnessAgent(
        model=model, workspace=root, subagents=SubagentsConfig(max_running=max_running)
    )
    bare = ReActAgent(name="bare", model=model, sys_prompt="Be brief.")
    direct = HarnessAgent(model=model, workspace=root, name="direct", subagents=None)
    hook = _hook(parent)
    assert parent.tasks is not None
    tasks = parent.tasks
    timings: dict[str, list[float]] = {"tasks": [], "bare": [], "harness": []}
    for r in range(rounds):
        ctx = RuntimeContext(session_id=f"round{r}", user_id="u1")
        start = time.perf_counter()
        replies = await asyncio.gather(
            *(
                hook.spawning.agent_spawn(
                    "general-purpose", ctx, task="Say done.", timeout_seconds=0
                )
                for _ in range(TASKS)
            )
        )
        ids = [
            line.split(": ", 1)[1]
            for r in replies
            for line in str(r).splitlines()
            if line.startswith("task_id: ")
        ]
        assert len(ids) == TASKS
        records = [await tasks.get(task_id, "u1") for task_id in ids]
        finished = [await tasks.wait(record, 60) for record in records if record is not None]
        timings["tasks"].append((time.perf_counter() - start) * 1000)
        assert all(f.status is TaskStatus.COMPLETED for f in finished), finished
        start = time.perf_counter()
        await asyncio.gather(*(bare.call("Say done.", ctx=ctx, memory=[]) for _ in range(TASKS)))
        timings["bare"].append((time.perf_counter() - start) * 1000)
        await _settle(parent)
        start = time.perf_counter()
        await asyncio.gather(
            *(
                direct.call("Say done.", ctx=RuntimeContext(session_id=f"r{r}-{i}", user_id="u1"))
                for i in range(TASKS)
            )
        )
        await _settle(direct)  # the children's memory work overlaps their tasks: count it
        timings["harness"].append((time.perf_counter() - start) * 1000)
    await parent.aclose()
    await direct.aclose()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=200, help="spawns measured in part 1")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of 50 tasks in part 2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spawn = asyncio.run(spawn_and_turn(Path(tmp) / "a" / "workspace", args.reps))
        wide = asyncio.run(background_tasks(Path(tmp) / "b" / "workspace", args.rounds, TASKS))
        queued = asyncio.run(background_tasks(Path(tmp) / "c" / "workspace", args.rounds, 8))
    med = {name: statistics.median(samples) for name, samples in spawn.items()}
    print(f"1. spawn a child and run one turn ({args.reps} reps, medians)")
    print(f"   agent_spawn, sync:                     {med['spawn']:7.2f} ms")
    print(f"   HarnessAgent.call, already built:      {med['harness']:7.2f} ms")
    print(f"   bare ReActAgent.call (baseline):       {med['bare']:7.3f} ms")
    print(
        f"   ratio spawn/bare {med['spawn'] / med['bare']:.1f}x, "
        f"spawn/built HarnessAgent {med['spawn'] / med['harness']:.2f}x"
    )
    print(
        f"2. {TASKS} background tasks until every result is saved ({args.rounds} rounds, medians)"
    )
    bare = statistics.median(wide["bare"] + queued["bare"])
    harness = statistics.median(wide["harness"] + queued["harness"])
    print(f"   {TASKS} direct ReActAgent calls (baseline):   {bare:8.2f} ms")
    print(f"   {TASKS} direct HarnessAgent calls + their memory work: {harness:8.1f} ms")
    for label, samples in (("max_running=50", wide), ("max_running=8 (default)", queued)):
        tasks = statistics.median(samples["tasks"])
        print(
            f"   {label:24s} {tasks:8.1f} ms: overhead {(tasks - bare) / TASKS:.2f} ms/task "
            f"over ReActAgent (ratio {tasks / bare:.0f}x), "
            f"{(tasks - harness) / TASKS:.2f} ms/task over HarnessAgent "
            f"(ratio {tasks / harness:.2f}x)"
        )


if __name__ == "__main__":
    main()
