"""The store's feed of memory changes never hides a change from a worker that follows it.

Each worker of a store keeps its own search index and learns of the others' writes from this
feed (harness.memory.changes): whatever the interleaving of writers and readers, a reader is
told every path noted since it last looked, or told to list the namespace whole.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.memory.changes import KEPT, ChangeFeed
from harness.stores import InMemoryStore
from harness.stores.base import Item, Namespace


class _Interleaving(InMemoryStore):
    """A store whose reads let other tasks run, as a network round trip does."""

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        item = await super().get(namespace, key)
        await asyncio.sleep(0)  # the answer is on its way back; others go on meanwhile
        return item


_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("note"),
            st.sampled_from(["", "ann", "bob"]),
            st.integers(0, 5),
            st.integers(1, 3),  # how many writers note at once
        ),
        st.tuples(st.just("read"), st.sampled_from(["", "ann", "bob"]), st.integers(0, 2)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_a_reader_learns_every_change_since_it_looked_or_to_list_all(
    ops: list[tuple[Any, ...]],
) -> None:
    async def run() -> None:
        feed = ChangeFeed(_Interleaving())
        noted: dict[str, list[str]] = {"": [], "ann": [], "bob": []}
        seen: dict[tuple[int, str], tuple[int, int]] = {}  # (reader, owner): (seq, how many)
        for op in ops:
            if op[0] == "note":
                _, owner, name, writers = op
                paths = [f"{owner}/memory/{name}-{w}.md" for w in range(writers)]
                await asyncio.gather(*(feed.note(owner, path) for path in paths))
                noted[owner] += paths
                continue
            _, owner, reader = op
            before = seen.get((reader, owner))
            changes = await feed.since(owner, before[0] if before else None)
            assert changes.seq == len(noted[owner])  # no concurrent note was lost
            if changes.paths is not None:
                assert before is not None
                missed = noted[owner][before[1] :]
                assert set(changes.paths) == set(missed)
                assert len(changes.paths) == len(set(changes.paths))
            seen[(reader, owner)] = (changes.seq, len(noted[owner]))

    asyncio.run(run())


async def test_a_reader_too_far_behind_is_told_to_list_and_a_fresh_one_too() -> None:
    feed = ChangeFeed(InMemoryStore())
    assert (await feed.since("ann", None)).paths is None  # never looked: list once
    await feed.note("ann", "users/ann/MEMORY.md")
    start = await feed.since("ann", None)
    assert start.seq == 1
    for n in range(KEPT + 1):
        await feed.note("ann", f"users/ann/memory/{n}.md")
    behind = await feed.since("ann", start.seq)
    assert behind.paths is None  # the oldest change it missed is no longer kept
    recent = await feed.since("ann", behind.seq - 3)
    assert recent.paths == tuple(f"users/ann/memory/{n}.md" for n in range(KEPT - 2, KEPT + 1))
    # The shared namespace and a user's are apart.
    assert (await feed.since("", 0)).paths == ()


async def test_an_unreadable_feed_item_starts_over_and_readers_list_again() -> None:
    store = InMemoryStore()
    feed = ChangeFeed(store)
    for n in range(3):
        await feed.note("bob", f"users/bob/memory/{n}.md")
    await store.put(("harness", "memory-changes"), "user:bob", {"seq": "x"})
    assert (await feed.since("bob", 3)).paths is None
    await feed.note("bob", "users/bob/MEMORY.md")
    assert (await feed.since("bob", 0)).paths == ("users/bob/MEMORY.md",)
