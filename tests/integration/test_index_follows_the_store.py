"""A worker's search index follows what other workers wrote to the store, while it runs.

With a store, each worker keeps a search index of its own (beside its local directory). It
used to learn of another worker's writes only when it started or at its maintenance pass (every
six hours, and one worker of all runs it): a long-running worker never found a fact that
another worker had saved, and kept finding a conversation another worker had deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import HarnessAgent, RuntimeContext
from harness.models import ScriptedChatModel
from harness.stores import InMemoryStore, RedisStore
from harness.stores.base import BaseStore
from harness.tools import MemoryTools

SECRET = "quokkaplatypus"


def model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            {"match": "Extract NEW memories", "text": f"- The codeword is {SECRET}. [m1]"},
            {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
            {"match": "consolidat", "text": "NO_REPLY", "repeat": True},
            {"text": "Noted.", "repeat": True},
        ]
    )


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    redis_url = request.getfixturevalue("redis_url")
    shared = RedisStore(redis_url, prefix=f"t{uuid.uuid4().hex[:8]}")
    try:
        yield shared
    finally:
        await shared.aclose()


async def search(agent: HarnessAgent, ctx: RuntimeContext) -> str:
    assert agent.maintenance is not None
    return await MemoryTools(agent.workspace, agent.maintenance).memory_search(SECRET, ctx)


async def test_a_running_worker_finds_what_another_saved_and_not_what_it_deleted(
    tmp_path: Path, store: BaseStore
) -> None:
    ann = RuntimeContext(session_id="s1", user_id="ann")
    bob = RuntimeContext(session_id="s1", user_id="bob")
    a = HarnessAgent(model=model(), workspace=tmp_path / "a" / "ws", store=store)
    b = HarnessAgent(model=model(), workspace=tmp_path / "b" / "ws", store=store)
    async with a, b:
        assert (await search(b, ann)).startswith("No matching memories")  # B is up and indexed

        await a.call(f"My codeword is {SECRET}", ctx=ann)
        assert a.maintenance is not None
        await a.maintenance.settled()

        found = await search(b, ann)
        assert f"The codeword is {SECRET}" in found  # the daily log A's flush wrote
        assert "s1.log.jsonl" in found  # and the transcript of A's call
        assert (await search(b, bob)).startswith("No matching memories")  # Ann's, not Bob's

        assert await a.delete_session(ann) is True
        after = await search(b, ann)
        assert "s1.log.jsonl" not in after  # the deleted conversation is gone on B too
        assert f"The codeword is {SECRET}" in after  # what memory kept from it stays
