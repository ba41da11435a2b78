"""What the harness adds to each reasoning step, against a bare ReActAgent in the same run.

Both agents talk to the same zero-latency model, which asks for a no-op tool until the call
has had its planned number of steps and then answers. Every call starts from the same
100-message history: the bare agent gets it as its memory; the HarnessAgent restores it from its
session file (reset to that history before each call, outside the timing), runs its default
hooks and tools against a workspace with AGENTS.md, MEMORY.md and knowledge files, and saves
the session. Its memory is on, as by default: after each call the same model is asked for new
facts and answers NO_REPLY, and the new messages go to the transcript and the index.

A call costs a fixed part (for the harness: binding the context, restoring and saving the
session, scheduling the memory work, worker-thread round trips) plus a part per reasoning step
(hooks, the workspace section). To report each honestly, calls of 1 step and of 19 steps
alternate: the per-step cost is the difference of their medians divided by 18, the per-call
cost what is left of the 1-step call. Fifty pairs make 1,000 reasoning steps per agent.

The memory flush, the transcript and its indexing run in the background after a call returns;
the benchmark waits for them between calls (outside the timing) and reports that time on its
own line.

A second run does the same on a 2,000-message history (half as many pairs): the harness's
per-step cost must stay flat, so nothing it does per step may grow with the conversation. Two
more (half as many pairs) price ``session_fsync="step"`` and ``"turn"``: the session synced to
the disk before every request, or at the end of every call (``docs/durability.md``); what that
costs depends on the disk under the temporary directory.

The first turn of a new session is priced too: after each pair, a 2-step call on a session
nobody used before (no directory, no state, no lease file yet), timed whole; its median is
printed beside the continued session's 2-step turn, with their ratio. A new session should cost
what a continued one does (issue 41): no ``fsync`` on its path unless ``session_fsync`` asks,
and one worker-thread round trip per step, as a continued session (what is left is making its
files: its directory, its messages, its state, its trace and its lease's lock file).

Targets (issue 28, in one run): the harness's per-step cost <= 8x the bare agent's, and a
2-step turn (the per-call cost plus two steps) <= 2.5 ms; (issue 41) the fresh session's 2-step
turn <= 2x the continued session's. Both agents' figures are printed with their ratio; on a
shared machine quote the medians of a few runs.

    .venv/bin/python benchmarks/step_overhead.py [--pairs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Msg,
    ReActAgent,
    TextBlock,
    ToolSchema,
    ToolUseBlock,
)
from harness.memory import FLUSH_SYSTEM_PROMPT, NO_REPLY
from harness.session import SessionFsync

HISTORY = 100
LONG_HISTORY = 2000
"""The second run's history: a step must cost the same whatever the conversation's length."""
SHORT, LONG = 1, 19


class ZeroLatencyModel:
    """Answers at once: a ``noop`` tool call until the call has made ``steps - 1`` of them."""

    model_name = "zero-latency"

    def __init__(self) -> None:
        self.steps = SHORT

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        if messages and messages[0].text == FLUSH_SYSTEM_PROMPT:
            yield ChatResponse(content=[TextBlock(text=NO_REPLY)])  # nothing new to remember
            return
        done = 0
        for message in reversed(messages):
            if message.role == "user":
                break
            done += message.role == "tool"
        if done < self.steps - 1:
            yield ChatResponse(content=[ToolUseBlock(id=f"c{done}", name="noop", input={})])
        else:
            yield ChatResponse(content=[TextBlock(text="done")])


async def noop() -> str:
    """Do nothing."""
    return "ok"


def history(length: int = HISTORY) -> list[Msg]:
    messages: list[Msg] = []
    for i in range(length // 2):
        messages.append(Msg(role="user", content=f"question {i}: " + "lorem ipsum " * 20))
        messages.append(Msg(role="assistant", content=f"answer {i}: " + "dolor sit amet " * 30))
    return messages


def prepare_workspace(root: Path) -> None:
    (root / "knowledge").mkdir(parents=True)
    (root / "AGENTS.md").write_text("# Persona\nYou are a careful assistant.\n" * 20)
    facts = "".join(f"- fact {i}: the user likes item {i}\n" for i in range(200))
    (root / "MEMORY.md").write_text(facts)
    (root / "knowledge" / "KNOWLEDGE.md").write_text("Domain glossary.\n" * 50)
    for i in range(20):
        (root / "knowledge" / f"doc{i}.md").write_text("x")


Timings = dict[str, dict[int, list[float]]]
FRESH = 2
"""Steps of the call on a new session (the first turn of a conversation)."""


async def measure(
    pairs: int, length: int = HISTORY, fsync: SessionFsync = None
) -> tuple[Timings, list[float]]:
    base = history(length)
    model = ZeroLatencyModel()
    bare = ReActAgent(
        name="bare", model=model, sys_prompt="You help.", toolkit=[noop], max_iters=LONG
    )
    timings: Timings = {
        "bare": {SHORT: [], LONG: []},
        "harness": {SHORT: [], LONG: []},
        "fresh": {FRESH: []},
    }
    background: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"  # the memory index goes beside it, in tmp
        prepare_workspace(root)
        harness = HarnessAgent(
            model=model,
            workspace=root,
            sys_prompt="You help.",
            tools=[noop],
            max_iters=LONG,
            session_fsync=fsync,
        )
        ctx = RuntimeContext(session_id="bench", user_id="u1")

        async def run_bare() -> object:
            return await bare.call("go", ctx=ctx, memory=list(base))

        async def run_harness() -> object:
            return await harness.call("go", ctx=ctx)

        runners: dict[str, Callable[[], Awaitable[object]]] = {
            "bare": run_bare,
            "harness": run_harness,
        }
        # Steady state: the session, its transcript and its flush mark as after one call on
        # the 100-message history, restored before every call (outside the timing), so every
        # call does the same memory work whatever ran before it.
        await harness.sessions.save(ctx, base)
        await run_harness()
        assert harness.maintenance is not None
        await harness.maintenance.settled()
        transcripts = root / "users" / "u1" / "agents" / "harness" / "sessions"
        steady = {p: p.read_bytes() for p in transcripts.iterdir() if p.is_file()}
        for _ in range(pairs):
            for steps in (SHORT, LONG):
                model.steps = steps
                for name, run in runners.items():
                    await harness.sessions.save(ctx, base)
                    for path, data in steady.items():
                        path.write_bytes(data)
                    start = time.perf_counter()
                    await run()
                    timings[name][steps].append((time.perf_counter() - start) * 1000)
                    if name == "harness":
                        # Memory work runs after the call returns; let it finish before the
                        # next timing and report it on its own line.
                        start = time.perf_counter()
                        await harness.maintenance.settled()
                        background.append((time.perf_counter() - start) * 1000)
            # The first turn of a conversation: a session id never used before.
            model.steps = FRESH
            fresh = RuntimeContext(session_id=f"fresh-{len(timings['fresh'][FRESH])}", user_id="u1")
            start = time.perf_counter()
            await harness.call("go", ctx=fresh)
            timings["fresh"][FRESH].append((time.perf_counter() - start) * 1000)
            await harness.maintenance.settled()
        await harness.aclose()
    return timings, background


def split(samples: dict[int, list[float]]) -> tuple[float, float]:
    """(ms per step, ms per call) from the medians of short and long calls."""
    short, long = statistics.median(samples[SHORT]), statistics.median(samples[LONG])
    per_step = (long - short) / (LONG - SHORT)
    return per_step, short - per_step


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=50, help="pairs of 1-step and 19-step calls")
    args = parser.parse_args()
    timings, background = asyncio.run(measure(args.pairs))
    long_pairs = max(5, args.pairs // 2)
    long_timings, _ = asyncio.run(measure(long_pairs, LONG_HISTORY))
    bare_step, bare_call = split(timings["bare"])
    harness_step, harness_call = split(timings["harness"])
    steps = args.pairs * (SHORT + LONG)
    print(f"{steps} reasoning steps per agent, {HISTORY}-message history, zero-latency model")
    print(f"bare ReActAgent (baseline): {bare_step:.3f} ms/step, {bare_call:.3f} ms/call")
    print(f"HarnessAgent with hooks:    {harness_step:.3f} ms/step, {harness_call:.3f} ms/call")
    print(f"ratio harness/bare per step: {harness_step / bare_step:.2f}x (target <= 8x)")
    bare_turn, harness_turn = bare_call + 2 * bare_step, harness_call + 2 * harness_step
    print(
        f"a 2-step turn: bare {bare_turn:.3f} ms, harness {harness_turn:.3f} ms "
        f"({harness_turn / bare_turn:.2f}x bare; target <= 2.5 ms)"
    )
    fresh_turn = statistics.median(timings["fresh"][FRESH])
    print(
        f"a 2-step turn on a new session: harness {fresh_turn:.3f} ms, continued session "
        f"{harness_turn:.3f} ms ({fresh_turn / harness_turn:.2f}x the continued; target <= 2x)"
    )
    long_bare_step, long_bare_call = split(long_timings["bare"])
    long_step, long_call = split(long_timings["harness"])
    print(
        f"at {LONG_HISTORY} messages ({long_pairs * (SHORT + LONG)} steps): "
        f"bare {long_bare_step:.3f} ms/step, {long_bare_call:.3f} ms/call; "
        f"harness {long_step:.3f} ms/step, {long_call:.3f} ms/call "
        f"(per step {long_step / harness_step:.2f}x the {HISTORY}-message figure)"
    )
    for fsync in ("step", "turn"):
        synced, _ = asyncio.run(measure(long_pairs, HISTORY, fsync))
        sync_bare_step, _ = split(synced["bare"])
        sync_step, sync_call = split(synced["harness"])
        print(
            f'session_fsync="{fsync}" ({long_pairs * (SHORT + LONG)} steps): bare '
            f"{sync_bare_step:.3f} ms/step; harness {sync_step:.3f} ms/step, {sync_call:.3f} "
            f"ms/call ({sync_step / sync_bare_step:.2f}x bare per step)"
        )
    print(
        f"after each harness call, background memory work took {statistics.median(background):.3f}"
        " ms (median; not in the figures above)"
    )


if __name__ == "__main__":
    main()
