"""Tool results tell the truth while Redis stalls.

During a stall ``memory_save`` answered "Timeout reading" although the fact was saved: the
model is told of a failure that did not happen and may save the fact twice. The stall here is
real: ``CLIENT PAUSE <ms> WRITE`` holds every write of a real redis-server while the store's
timeout (0.3 s) runs out; the write is then applied when the pause ends, after its reply was
given up on. The store sends it again with its write id and learns that it landed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from harness import RuntimeContext, StorageError
from harness.filesystem import RemoteFilesystem
from harness.stores import RedisStore
from harness.tools.memory import MemoryTools
from harness.workspace import WorkspaceManager

NS = ("durability", "stall")
CTX = RuntimeContext(session_id="s1", user_id="alice")


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    made = RedisStore(redis_url, prefix=f"t{uuid.uuid4().hex[:12]}", timeout=0.3, attempts=8)
    yield made
    await made.aclose()


async def stall(redis_url: str, milliseconds: int) -> None:
    """Hold every write of the server for a while (reads go on)."""
    admin = aioredis.Redis.from_url(redis_url)
    try:
        await admin.client_pause(milliseconds, all=False)  # CLIENT PAUSE <ms> WRITE
    finally:
        await admin.aclose()


async def test_a_write_whose_reply_was_lost_is_applied_once_and_reported(
    store: RedisStore, redis_url: str
) -> None:
    first = await store.put_if_version(NS, "k", {"n": 1}, None)
    assert first is not None

    await stall(redis_url, 1200)
    second = await store.put_if_version(NS, "k", {"n": 2}, first)  # times out, is sent again

    assert second is not None  # not a conflict it caused itself, not an error
    item = await store.get(NS, "k")
    assert item is not None
    assert (item.value, item.version) == ({"n": 2}, second)
    assert second == first + 1  # the namespace's counter moved once: one write


async def test_memory_save_during_a_stall_says_saved_and_saves_once(
    store: RedisStore, redis_url: str
) -> None:
    workspace = WorkspaceManager("/tmp/unused-local-anchor", RemoteFilesystem(store))
    tools = MemoryTools(workspace, None)
    await tools.memory_save("Plays the cello", CTX, target="MEMORY.md#Hobbies")

    await stall(redis_url, 1200)
    into_memory = await tools.memory_save("Allergic to penicillin", CTX, target="MEMORY.md#Health")
    await stall(redis_url, 1200)
    into_log = await tools.memory_save("Moved to Porto", CTX)

    assert into_memory == "Saved to MEMORY.md (section Health)"
    assert into_log.startswith("Saved to memory/")
    memory = await workspace.read_own("MEMORY.md", "alice")
    assert memory is not None
    assert memory.count("Allergic to penicillin") == 1
    assert memory.count("Plays the cello") == 1
    log = await workspace.read_own(into_log.removeprefix("Saved to "), "alice")
    assert log is not None
    assert log.count("Moved to Porto") == 1


async def test_a_store_out_of_reach_says_the_outcome_is_unknown(redis_url: str) -> None:
    gone = RedisStore("redis://127.0.0.1:9/0", prefix="gone", timeout=0.2, attempts=2)
    try:
        with pytest.raises(StorageError, match="whether the write was applied is unknown"):
            await gone.put(NS, "k", {"n": 1})
    finally:
        await gone.aclose()
