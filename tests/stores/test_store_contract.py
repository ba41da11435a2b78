"""The BaseStore contract, for every store: the same calls give the same answers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from harness.stores import BaseStore, InMemoryStore, Item, RedisStore

NS = ("harness", "test")


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[BaseStore]:
    """Each store kind, empty: the Redis one under a prefix no other test uses."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    url: str = request.getfixturevalue("redis_url")
    redis_store = RedisStore(url, prefix=f"test-{uuid.uuid4().hex}")
    try:
        yield redis_store
    finally:
        await redis_store.aclose()


async def test_a_missing_item_is_none(store: BaseStore) -> None:
    assert await store.get(NS, "nothing") is None


async def test_put_then_get_returns_the_value_and_version_one(store: BaseStore) -> None:
    value = {"text": "héllo ☃", "n": 3, "f": 1.5, "list": [1, None, True], "empty": {}}
    assert await store.put(NS, "a", value) == 1
    assert await store.get(NS, "a") == Item(NS, "a", value, 1)


async def test_each_put_grows_the_version(store: BaseStore) -> None:
    assert [await store.put(NS, "a", {"i": i}) for i in range(3)] == [1, 2, 3]
    item = await store.get(NS, "a")
    assert item is not None
    assert (item.value, item.version) == ({"i": 2}, 3)


async def test_namespaces_and_keys_are_separate(store: BaseStore) -> None:
    await store.put(("a", "b"), "c", {"v": 1})
    await store.put(("a",), "b/c", {"v": 2})
    await store.put(("a/b",), "c", {"v": 3})
    await store.put(("a", "b"), "c2", {"v": 4})
    assert [(await store.get(ns, k)) for ns, k in [(("a", "b"), "c"), (("a",), "b/c")]] == [
        Item(("a", "b"), "c", {"v": 1}, 1),
        Item(("a",), "b/c", {"v": 2}, 1),
    ]
    item = await store.get(("a/b",), "c")
    assert item is not None
    assert item.value == {"v": 3}
    assert [i.key for i in await store.search(("a", "b"))] == ["c", "c2"]
    assert [i.key for i in await store.search(("a",))] == ["b/c"]


async def test_a_stored_value_is_a_copy(store: BaseStore) -> None:
    value = {"list": [1]}
    await store.put(NS, "a", value)
    value["list"].append(2)
    got = await store.get(NS, "a")
    assert got is not None
    got.value["list"].append(3)
    again = await store.get(NS, "a")
    assert again is not None
    assert again.value == {"list": [1]}


async def test_put_if_version_none_creates_only_when_absent(store: BaseStore) -> None:
    assert await store.put_if_version(NS, "a", {"v": 1}, None) == 1
    assert await store.put_if_version(NS, "a", {"v": 2}, None) is None
    item = await store.get(NS, "a")
    assert item is not None
    assert (item.value, item.version) == ({"v": 1}, 1)


async def test_put_if_version_writes_only_over_the_version_read(store: BaseStore) -> None:
    await store.put(NS, "a", {"v": 1})
    await store.put(NS, "a", {"v": 2})
    assert await store.put_if_version(NS, "a", {"v": "stale"}, 1) is None
    assert await store.put_if_version(NS, "a", {"v": "stale"}, 3) is None
    assert await store.put_if_version(NS, "a", {"v": 3}, 2) == 3
    item = await store.get(NS, "a")
    assert item is not None
    assert (item.value, item.version) == ({"v": 3}, 3)


async def test_put_if_version_of_a_missing_item_with_a_version_fails(store: BaseStore) -> None:
    assert await store.put_if_version(NS, "a", {"v": 1}, 1) is None
    assert await store.get(NS, "a") is None
    assert await store.search(NS) == []


async def test_delete_removes_the_item_and_its_search_entry(store: BaseStore) -> None:
    old = await store.put(NS, "a", {"v": 1})
    await store.put(NS, "b", {"v": 1})
    await store.delete(NS, "a")
    await store.delete(NS, "missing")
    assert await store.get(NS, "a") is None
    assert [i.key for i in await store.search(NS)] == ["b"]
    # Re-created, it never gets its old version back: a stale compare-and-set must fail.
    assert await store.put_if_version(NS, "a", {"v": 2}, old) is None
    new = await store.put_if_version(NS, "a", {"v": 2}, None)
    assert new is not None
    assert new > old


async def test_search_is_sorted_by_key_and_filters_by_prefix(store: BaseStore) -> None:
    keys = ["b", "a/2", "a/10", "a", "ab", "a/1/x", "é", "z", "a\u4e2d", "A"]
    for key in keys:
        await store.put(NS, key, {"key": key})
    found = await store.search(NS)
    assert [i.key for i in found] == sorted(keys)
    assert all(i.value == {"key": i.key} for i in found)
    assert len({i.version for i in found}) == len(keys)  # versions never repeat
    assert [i.key for i in await store.search(NS, "a/")] == ["a/1/x", "a/10", "a/2"]
    assert [i.key for i in await store.search(NS, "a")] == [
        "a",
        "a/1/x",
        "a/10",
        "a/2",
        "ab",
        "a\u4e2d",
    ]
    assert await store.search(NS, "q") == []
    assert await store.search(("other",)) == []


async def test_search_limit_and_offset_page_through_in_order(store: BaseStore) -> None:
    for i in range(10):
        await store.put(NS, f"k{i}", {"i": i})
    await store.put(NS, "other", {"i": -1})
    pages = [
        [i.key for i in await store.search(NS, "k", limit=4, offset=offset)]
        for offset in (0, 4, 8, 12)
    ]
    assert pages == [["k0", "k1", "k2", "k3"], ["k4", "k5", "k6", "k7"], ["k8", "k9"], []]
    assert [i.key for i in await store.search(NS, "k", offset=7)] == ["k7", "k8", "k9"]
    assert await store.search(NS, limit=0) == []


@pytest.mark.parametrize(
    ("namespace", "key"),
    [((), "k"), (("",), "k"), (("a", ""), "k"), (("a",), ""), (["a"], "k")],
)
async def test_a_bad_namespace_or_key_is_refused(
    store: BaseStore, namespace: tuple[str, ...], key: str
) -> None:
    with pytest.raises(ValueError, match=r"namespace|key"):
        await store.put(namespace, key, {"v": 1})


async def test_a_value_json_cannot_hold_is_refused(store: BaseStore) -> None:
    with pytest.raises(TypeError, match="not JSON-serializable"):
        await store.put(NS, "a", {"v": object()})
    with pytest.raises(TypeError, match="not JSON-serializable"):
        await store.put(NS, "a", {"v": float("nan")})
    assert await store.get(NS, "a") is None


@pytest.mark.parametrize("version", [0, -1])
async def test_put_if_version_refuses_a_version_no_item_has(store: BaseStore, version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        await store.put_if_version(NS, "a", {"v": 1}, version)


async def test_a_negative_limit_or_offset_is_refused(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="limit"):
        await store.search(NS, limit=-1)
    with pytest.raises(ValueError, match="offset"):
        await store.search(NS, offset=-1)


async def _increment(store: BaseStore, key: str) -> int:
    """Add one to a counter by compare-and-set; returns how many tries it took."""
    tries = 0
    while True:
        tries += 1
        item = await store.get(NS, key)
        count = 0 if item is None else int(item.value["count"])
        version = None if item is None else item.version
        await asyncio.sleep(0)  # let the other tasks read the same version
        if await store.put_if_version(NS, key, {"count": count + 1}, version) is not None:
            return tries


async def test_fifty_tasks_incrementing_by_compare_and_set_lose_nothing(store: BaseStore) -> None:
    tries = await asyncio.gather(*(_increment(store, "counter") for _ in range(50)))
    item = await store.get(NS, "counter")
    assert item is not None
    assert (item.value, item.version) == ({"count": 50}, 50)
    assert max(tries) > 1  # the tasks really did collide
