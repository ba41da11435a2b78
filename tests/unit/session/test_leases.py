"""Leases: a cancellation while one is given back, and file leases' kept descriptors.

A cancellation that arrives while a lease is given back still cancels the caller.

asyncio hands a task's cancellation to whatever task it is awaiting. The store lease's
renewing task ends quietly when cancelled, so a caller cancelled while it waited for that task
used to carry on as if nothing had happened: a worker sent SIGTERM between two turns went on
running turns (the fault-injection test caught it once in CI).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import multiprocessing
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import HarnessAgent, RuntimeContext
from harness.errors import SessionBusy
from harness.models import ScriptedChatModel
from harness.session import FileLeases, StoreLeases
from harness.stores import InMemoryStore


async def test_a_cancel_while_the_lease_is_given_back_cancels_the_caller() -> None:
    leases = StoreLeases(InMemoryStore(), ttl=5.0)
    after_the_block: list[str] = []

    async def call() -> None:
        async with leases.hold("s", wait=1.0):
            await asyncio.sleep(0)
            # The cancel runs once the block has ended and the lease is being given back.
            asyncio.get_running_loop().call_soon(running.cancel)
        after_the_block.append("went on")

    running = asyncio.create_task(call())
    with pytest.raises(asyncio.CancelledError):
        await running
    assert after_the_block == []
    async with leases.hold("s", wait=1.0):
        pass  # and the session is free again


# --- file leases keep their descriptors between holders ------------------------------------


class _Ledger:
    """Who holds each key now; a second holder at once is the failure."""

    def __init__(self) -> None:
        self.holding: dict[str, int] = {}
        self.held: dict[str, int] = {}
        self.overlaps = 0

    def enter(self, key: str) -> None:
        self.holding[key] = self.holding.get(key, 0) + 1
        self.held[key] = self.held.get(key, 0) + 1
        self.overlaps += self.holding[key] > 1

    def leave(self, key: str) -> None:
        self.holding[key] -= 1


_CALLS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),  # the session
        st.sampled_from([0.0, 0.001, 0.003]),  # how long it holds it
        st.sampled_from([None, 0.0, 0.0005, 0.002]),  # when it is cancelled, if it is
    ),
    min_size=1,
    max_size=12,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=_CALLS, keep=st.sampled_from([1, 2, 256]))
def test_kept_descriptors_never_let_two_holders_in_at_once(
    calls: list[tuple[str, float, float | None]], keep: int
) -> None:
    """Drawn holders of a few sessions, some cancelled at drawn moments, through one
    FileLeases and a second one on the same directory (another agent of the process): one
    holder per session at any time, each uncancelled one got its turn, and every session is
    free at the end, for a fresh FileLeases too (another process's view)."""

    async def run(directory: Path) -> None:
        first, second = FileLeases(directory, keep=keep), FileLeases(directory, keep=keep)
        ledger = _Ledger()

        async def holder(leases: FileLeases, key: str, hold: float) -> None:
            async with leases.hold(key, wait=10.0):
                ledger.enter(key)
                try:
                    await asyncio.sleep(hold)
                finally:
                    ledger.leave(key)

        tasks = []
        for n, (key, hold, cancel_after) in enumerate(calls):
            task = asyncio.create_task(holder((first, second)[n % 2], key, hold))
            if cancel_after is not None:
                asyncio.get_running_loop().call_later(cancel_after, task.cancel)
            tasks.append((task, cancel_after))
        results = await asyncio.gather(*(task for task, _ in tasks), return_exceptions=True)
        assert ledger.overlaps == 0
        for (_, cancel_after), result in zip(tasks, results, strict=True):
            assert result is None or (
                cancel_after is not None and isinstance(result, asyncio.CancelledError)
            )
        await asyncio.sleep(0.02)  # a lock a worker thread took after its cancel is let go
        for key in {key for key, _, _ in calls}:
            for leases in (first, second, FileLeases(directory)):
                async with leases.hold(key, wait=0.5):
                    pass

    with tempfile.TemporaryDirectory() as top:
        asyncio.run(run(Path(top)))


def _hold_in_a_process(directory: str, key: str) -> str:
    async def attempt() -> str:
        try:
            async with FileLeases(Path(directory)).hold(key, wait=0.0):
                return "held"
        except SessionBusy:
            return "busy"

    return asyncio.run(attempt())


async def test_a_kept_descriptor_still_excludes_another_process(tmp_path: Path) -> None:
    leases = FileLeases(tmp_path)
    async with leases.hold("s", wait=1.0):  # the first time: opened on a worker thread
        pass
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as other:
        loop = asyncio.get_running_loop()
        async with leases.hold("s", wait=1.0):  # now through the kept descriptor
            held = await loop.run_in_executor(other, _hold_in_a_process, str(tmp_path), "s")
            assert held == "busy"
        assert await loop.run_in_executor(other, _hold_in_a_process, str(tmp_path), "s") == "held"


def _lock_files_open(directory: Path) -> int:
    """How many of this process's descriptors are open on a file in ``directory``."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found += Path(os.readlink(f"/proc/self/fd/{fd}")).parent == directory.resolve()
    return found


async def test_kept_descriptors_are_closed_with_the_agent_or_when_dropped(tmp_path: Path) -> None:
    leases = FileLeases(tmp_path / "leases")
    for key in ("a", "b", "c"):
        async with leases.hold(key, wait=1.0):
            pass
    assert _lock_files_open(tmp_path / "leases") == 3  # kept for the sessions' next calls
    del leases
    gc.collect()
    assert _lock_files_open(tmp_path / "leases") == 0

    model = ScriptedChatModel([{"text": "hi", "repeat": True}])
    async with HarnessAgent(model=model, workspace=tmp_path / "ws", memory=None) as agent:
        for session in ("s1", "s2"):
            await agent.call("hello", ctx=RuntimeContext(session_id=session))
        assert isinstance(agent.leases, FileLeases)
        directory = agent.leases.directory
        assert _lock_files_open(directory) == 2
    assert _lock_files_open(directory) == 0  # aclose let them go
