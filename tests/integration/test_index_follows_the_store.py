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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import HarnessAgent, RuntimeContext
from harness.memory.changes import ChangeFeed
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


async def test_a_feed_entry_no_worker_can_use_is_skipped_once_and_later_saves_are_found(
    tmp_path: Path, store: BaseStore, caplog: pytest.LogCaptureFixture
) -> None:
    """One bad record in the store's change feed (a path that climbs out with ``..``, out of a
    model's reach but not of a hand or a bug) once stopped every worker that followed the feed
    there: it failed on it at each search and never indexed the user's later saves."""
    ann = RuntimeContext(session_id="s1", user_id="ann")
    a = HarnessAgent(model=model(), workspace=tmp_path / "a" / "ws", store=store)
    b = HarnessAgent(model=model(), workspace=tmp_path / "b" / "ws", store=store)
    async with a, b:
        assert (await search(b, ann)).startswith("No matching memories")  # B follows the feed
        bad = "users/ann/memory/../../../etc/passwd\n[forged] line"
        await ChangeFeed(store).note("ann", bad)
        for _ in range(3):
            assert (await search(b, ann)).startswith("No matching memories")

        await a.call(f"My codeword is {SECRET}", ctx=ann)
        assert a.maintenance is not None
        await a.maintenance.settled()
        assert f"The codeword is {SECRET}" in await search(b, ann)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1, skipped  # said once, not at every search
    assert "\n" not in skipped[0]  # the path escaped, on one line
    assert "\\n" in skipped[0]


_PIECES = st.sampled_from(
    ["..", ".", "", "memory", "users", "ann", "bob", "x.md", "\x00", "\n", "\\", "~", "C:"]
)
_BAD_PATHS = st.one_of(
    st.lists(_PIECES, min_size=1, max_size=8).map("/".join),
    st.lists(_PIECES, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts)),
    st.text(min_size=1, max_size=300),
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad=st.lists(_BAD_PATHS, min_size=1, max_size=6))
async def test_no_feed_entry_stops_a_worker_from_indexing_later_saves(
    tmp_path_factory: pytest.TempPathFactory, bad: list[str]
) -> None:
    root = tmp_path_factory.mktemp("feed")
    store = InMemoryStore()
    ann = RuntimeContext(session_id="s1", user_id="ann")
    a = HarnessAgent(model=model(), workspace=root / "a" / "ws", store=store)
    b = HarnessAgent(model=model(), workspace=root / "b" / "ws", store=store)
    async with a, b:
        await search(b, ann)  # B follows the feed from here
        for path in bad:
            await ChangeFeed(store).note("ann", path)
        await search(b, ann)
        await a.call(f"My codeword is {SECRET}", ctx=ann)
        assert a.maintenance is not None
        await a.maintenance.settled()
        assert f"The codeword is {SECRET}" in await search(b, ann)
