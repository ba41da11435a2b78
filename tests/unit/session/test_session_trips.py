"""What a call costs the disk: worker-thread hops and ``fsync`` calls, counted, not timed.

A new session must cost what a continued one does (issue 41): its directory, its first
messages and its state go in the step's one trip to a worker thread, and nothing is synced to
the disk unless ``session_fsync`` asks. The counts come from patching the event loop's
executor hand-off (``asyncio.to_thread`` goes through it) and ``os.fsync``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.kernel import ChatChunk, ChatResponse, Msg, TextBlock, ToolSchema, ToolUseBlock
from harness.session import SessionFsync

STEPS = 2


class TwoSteps:
    """One ``noop`` tool call, then an answer: a 2-step call, at once."""

    model_name = "two-steps"

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        if messages[-1].role == "user":
            yield ChatResponse(content=[ToolUseBlock(id="c1", name="noop", input={})])
        else:
            yield ChatResponse(content=[TextBlock(text="done")])


async def noop() -> str:
    """Do nothing."""
    return "ok"


class Counter:
    """Counts the hops to worker threads and the ``fsync`` calls while it is on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.hops = 0
        self.fsyncs = 0
        self.on = False
        loop_class = asyncio.BaseEventLoop
        hand_off = loop_class.run_in_executor
        fsync = os.fsync

        def counting_hand_off(
            loop: Any, executor: Any, func: Callable[..., Any], *args: Any
        ) -> Any:
            self.hops += self.on
            return hand_off(loop, executor, func, *args)

        def counting_fsync(fd: int) -> None:
            self.fsyncs += self.on
            fsync(fd)

        monkeypatch.setattr(loop_class, "run_in_executor", counting_hand_off)
        monkeypatch.setattr(os, "fsync", counting_fsync)

    async def call(self, agent: HarnessAgent, session: str) -> tuple[int, int]:
        """(hops, fsyncs) of one call on ``session``."""
        self.hops = self.fsyncs = 0
        self.on = True
        try:
            reply = answer(
                await agent.call("go", ctx=RuntimeContext(session_id=session, user_id="u1"))
            )
        finally:
            self.on = False
        assert reply.text == "done"
        return self.hops, self.fsyncs


def agent(workspace: Path, fsync: SessionFsync = None) -> HarnessAgent:
    # No memory: its work runs after the call, in the background, and would blur the counts.
    return HarnessAgent(
        model=TwoSteps(), workspace=workspace, tools=[noop], memory=None, session_fsync=fsync
    )


async def test_a_new_session_costs_one_hop_per_step_and_no_fsync(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = Counter(monkeypatch)
    harness = agent(workspace)
    try:
        await counter.call(harness, "warm-up")  # the workspace's one-time check
        fresh_hops, fresh_fsyncs = await counter.call(harness, "new")
        continued_hops, continued_fsyncs = await counter.call(harness, "new")
        other_hops, _ = await counter.call(harness, "another-new")
    finally:
        await harness.aclose()

    # The call's fixed part: its session read in one trip (messages and state), the trace's
    # records at its end, and, for a session this process never held, its lock file opened.
    # Then one trip per step (its messages and state) and one for the reply.
    assert continued_hops <= 1 + STEPS + 1 + 1
    assert fresh_hops <= continued_hops + 1
    assert other_hops == fresh_hops
    # Nothing on the call path waits for the disk: state.json is rewritten atomically but
    # not synced, unless session_fsync asks (it is nothing that a power loss could cost).
    assert fresh_fsyncs == continued_fsyncs == 0
    state = workspace / "users" / "u1" / "agents" / "harness" / "context" / "new" / "state.json"
    assert state.is_file()


@pytest.mark.parametrize(("fsync", "synced"), [("step", STEPS + 1), ("turn", 1)])
async def test_session_fsync_still_syncs_what_it_promises(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, fsync: SessionFsync, synced: int
) -> None:
    counter = Counter(monkeypatch)
    harness = agent(workspace, fsync)
    try:
        await counter.call(harness, "warm-up")
        hops, fsyncs = await counter.call(harness, "new")
    finally:
        await harness.aclose()
    # Each save syncs its append ("step"), or the call's end does ("turn"); the new state
    # (written at the first step) is synced too: file and directory, and the session's new
    # directory in its parent, once (a power loss must not unname what was synced into it).
    assert fsyncs == synced + 3
    # In the step's own trip to the worker thread: syncing costs no round trip of its own.
    assert hops <= 1 + STEPS + 1 + 1 + 1
