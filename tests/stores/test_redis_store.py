"""RedisStore on a real redis-server: sharing across processes, and its failures."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
import uuid

import pytest

from harness.errors import ConfigError, StorageError
from harness.stores import RedisStore

NS = ("harness", "test")

_WORKER = """
import asyncio, sys
from harness.stores import RedisStore

async def increment(store):
    conflicts = 0
    while True:
        item = await store.get(("harness", "test"), "counter")
        count = 0 if item is None else item.value["count"]
        version = None if item is None else item.version
        await asyncio.sleep(0.001)
        new = await store.put_if_version(
            ("harness", "test"), "counter", {"count": count + 1}, version
        )
        if new is not None:
            return conflicts
        conflicts += 1

async def main(url, prefix, tasks, rounds):
    store = RedisStore(url, prefix=prefix)
    try:
        conflicts = 0
        for _ in range(rounds):
            conflicts += sum(await asyncio.gather(*(increment(store) for _ in range(tasks))))
        print(conflicts)
    finally:
        await store.aclose()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def _prefix() -> str:
    return f"test-{uuid.uuid4().hex}"


async def test_two_processes_incrementing_by_compare_and_set_lose_nothing(redis_url: str) -> None:
    prefix = _prefix()
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WORKER,
            redis_url,
            prefix,
            "5",
            "5",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = [await worker.communicate() for worker in workers]
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr.decode()
    store = RedisStore(redis_url, prefix=prefix)
    try:
        item = await store.get(NS, "counter")
    finally:
        await store.aclose()
    assert item is not None
    assert (item.value, item.version) == ({"count": 50}, 50)


async def test_a_second_store_with_the_same_prefix_shares_the_items(redis_url: str) -> None:
    prefix = _prefix()
    first, second = RedisStore(redis_url, prefix=prefix), RedisStore(redis_url, prefix=prefix)
    try:
        await first.put(NS, "a", {"v": 1})
        assert await second.put_if_version(NS, "a", {"v": 2}, 1) == 2
        item = await first.get(NS, "a")
        assert item is not None
        assert (item.value, item.version) == ({"v": 2}, 2)
        assert [i.key for i in await second.search(NS)] == ["a"]
    finally:
        await first.aclose()
        await second.aclose()


async def test_stores_with_different_prefixes_do_not_see_each_other(redis_url: str) -> None:
    first, second = RedisStore(redis_url, prefix=_prefix()), RedisStore(redis_url, prefix=_prefix())
    try:
        await first.put(NS, "a", {"v": 1})
        assert await second.get(NS, "a") is None
        assert await second.search(NS) == []
        assert await second.put_if_version(NS, "a", {"v": 2}, None) == 1
    finally:
        await first.aclose()
        await second.aclose()


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_dead_redis_is_a_storage_error_that_names_the_url_and_the_fix() -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    store = RedisStore(url, prefix=_prefix())
    started = time.monotonic()
    try:
        for call in (
            store.get(NS, "a"),
            store.put(NS, "a", {"v": 1}),
            store.put_if_version(NS, "a", {"v": 1}, None),
            store.delete(NS, "a"),
            store.search(NS),
        ):
            with pytest.raises(StorageError) as caught:
                await call
            assert f"cannot reach Redis at {url}" in str(caught.value)
            assert "is redis-server running? start it or pass --store" in str(caught.value)
    finally:
        await store.aclose()
    assert time.monotonic() - started < 5  # refused at once, not retried for seconds


async def test_the_error_message_does_not_show_the_password() -> None:
    port = _closed_port()
    store = RedisStore(f"redis://app:s3cret@127.0.0.1:{port}/0", prefix=_prefix())
    try:
        with pytest.raises(StorageError) as caught:
            await store.get(NS, "a")
    finally:
        await store.aclose()
    assert "s3cret" not in str(caught.value)
    assert f"redis://app:***@127.0.0.1:{port}/0" in str(caught.value)
    assert "s3cret" not in repr(store)


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "127.0.0.1:6379"])
def test_a_url_that_is_not_redis_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="is not usable"):
        RedisStore(url)


@pytest.mark.parametrize("prefix", ["", "a:b", "a{b}"])
def test_an_unusable_prefix_is_a_config_error(prefix: str) -> None:
    with pytest.raises(ConfigError, match="prefix"):
        RedisStore(prefix=prefix)
