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


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:6379", "the scheme 'http' is not redis, rediss or unix"),
        ("127.0.0.1:6379", "is not redis, rediss or unix"),
        ("redis://[::1", "Invalid IPv6 URL"),
        ("redis://host:port/0", "Port could not be cast"),
        ("redis://host:70000/0", "Port out of range"),
        # redis-py would quietly take these as database 0, another workspace's data
        ("redis://host/abc", "the database 'abc' is not a number"),
        ("redis://host:6379/0x1", "the database '0x1' is not a number"),
        ("unix:///run/redis.sock?db=main", "the database 'main' is not a number"),
    ],
)
def test_a_url_that_is_not_a_usable_redis_url_is_a_config_error(url: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RedisStore(url)

    assert f"RedisStore URL {url!r} is not usable (" in str(caught.value)
    assert reason in str(caught.value)
    assert str(caught.value).endswith("use redis://host:port/db, e.g. redis://127.0.0.1:6379/0")


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "redis://h", "rediss://h:6380/15", "redis://[::1]:6379/2",
     "unix:///run/redis.sock?db=3", "redis:///1"],
)  # fmt: skip
def test_the_forms_redis_takes_are_accepted(url: str) -> None:
    assert RedisStore(url).url == url  # nothing connects until the first operation


def test_the_password_of_a_url_that_does_not_parse_is_not_shown() -> None:
    with pytest.raises(ConfigError) as caught:
        RedisStore("redis://app:s3cret@[::1/0")

    assert "s3cret" not in str(caught.value)
    assert "'redis://app:***@[::1/0'" in str(caught.value)


@pytest.mark.parametrize("prefix", ["", "a:b", "a{b}"])
def test_an_unusable_prefix_is_a_config_error(prefix: str) -> None:
    with pytest.raises(ConfigError, match="prefix"):
        RedisStore(prefix=prefix)
