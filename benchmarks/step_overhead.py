"""How much a reasoning step costs with the harness's hooks, against a bare ReActAgent.

Both agents talk to the same zero-latency model that asks for a no-op tool nine times and then
answers, so every call is ten reasoning steps; 100 calls make 1,000 steps. Each call starts
from the same 100-message history: the bare agent gets it as its memory, the HarnessAgent
restores it from its session file (rewritten to the baseline before each call, outside the
timing). The HarnessAgent runs its default hook chain against a workspace with AGENTS.md,
MEMORY.md and knowledge files, so every step reads (cached) files and builds the workspace
section, and every call restores and saves the session.

Prints the median milliseconds per step of each, and the ratio. Target: harness <= 1.5x bare,
and <= 2 ms per step.

    .venv/bin/python benchmarks/step_overhead.py [--calls 100]
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

STEPS_PER_CALL = 10
HISTORY = 100


class ZeroLatencyModel:
    """Asks for ``noop`` until this call has nine tool results, then answers."""

    model_name = "zero-latency"

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        results = 0
        for message in reversed(messages):
            if message.role == "user":
                break
            results += message.role == "tool"
        if results < STEPS_PER_CALL - 1 and tools:
            yield ChatResponse(content=[ToolUseBlock(id=f"c{results}", name="noop", input={})])
        else:
            yield ChatResponse(content=[TextBlock(text="done")])


def noop() -> str:
    """Do nothing."""
    return "ok"


async def anoop() -> str:
    """Do nothing."""
    return "ok"


def history() -> list[Msg]:
    messages: list[Msg] = []
    for i in range(HISTORY // 2):
        messages.append(Msg(role="user", content=f"question {i}: " + "lorem ipsum " * 20))
        messages.append(Msg(role="assistant", content=f"answer {i}: " + "dolor sit amet " * 30))
    return messages


def prepare_workspace(root: Path) -> None:
    (root / "knowledge").mkdir(parents=True)
    (root / "AGENTS.md").write_text("# Persona\nYou are a careful assistant.\n" * 20)
    (root / "MEMORY.md").write_text(
        "".join(f"- fact {i}: the user likes item {i}\n" for i in range(200))
    )
    (root / "knowledge" / "KNOWLEDGE.md").write_text("Domain glossary.\n" * 50)
    for i in range(20):
        (root / "knowledge" / f"doc{i}.md").write_text("x")


async def measure(calls: int) -> tuple[list[float], list[float]]:
    base = history()
    model = ZeroLatencyModel()
    bare = ReActAgent(name="bare", model=model, toolkit=[anoop], max_iters=STEPS_PER_CALL + 1)
    bare.toolkit.remove("anoop")
    bare.toolkit.register(anoop, name="noop")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepare_workspace(root)
        harness = HarnessAgent(
            model=model, workspace=root, max_iters=STEPS_PER_CALL + 1, sys_prompt="You help."
        )
        harness.delegate.toolkit.register(anoop, name="noop")
        ctx = RuntimeContext(session_id="bench", user_id="u1")
        await harness.sessions.save(ctx, base)
        bare_ms: list[float] = []
        harness_ms: list[float] = []
        for _ in range(calls):
            memory = list(base)
            start = time.perf_counter()
            await bare.call("go", memory=memory)
            bare_ms.append((time.perf_counter() - start) * 1000 / STEPS_PER_CALL)

            await harness.sessions.save(ctx, base)
            start = time.perf_counter()
            await harness.call("go", ctx=ctx)
            harness_ms.append((time.perf_counter() - start) * 1000 / STEPS_PER_CALL)
    return bare_ms, harness_ms


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100, help="calls of ten steps each")
    args = parser.parse_args()
    bare_ms, harness_ms = asyncio.run(measure(args.calls))
    bare, harness = statistics.median(bare_ms), statistics.median(harness_ms)
    steps = args.calls * STEPS_PER_CALL
    print(f"{steps} reasoning steps, {HISTORY}-message history, zero-latency model")
    print(f"bare ReActAgent (baseline): {bare:.3f} ms/step (median)")
    print(f"HarnessAgent with hooks:    {harness:.3f} ms/step (median)")
    print(f"ratio harness/bare:         {harness / bare:.2f}x   (target <= 1.5x, <= 2 ms/step)")


if __name__ == "__main__":
    main()
