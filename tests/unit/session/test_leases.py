"""A cancellation that arrives while a lease is given back still cancels the caller.

asyncio hands a task's cancellation to whatever task it is awaiting. The store lease's
renewing task ends quietly when cancelled, so a caller cancelled while it waited for that task
used to carry on as if nothing had happened: a worker sent SIGTERM between two turns went on
running turns (the fault-injection test caught it once in CI).
"""

from __future__ import annotations

import asyncio

import pytest

from harness.session import StoreLeases
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
