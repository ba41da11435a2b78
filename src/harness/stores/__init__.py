"""Key-value stores for the remote filesystem and shared state: in memory, Redis.

``InMemoryStore()`` for one process (tests, demos); ``RedisStore(url, prefix=...)`` for state
several workers or processes share. Both keep versions, so writers can compare-and-set.
The Redis client is imported only when :class:`RedisStore` is first used, so an agent that
never talks to Redis does not pay for loading it.
"""

from typing import TYPE_CHECKING, Any

from harness.stores.base import BaseStore, Item, Namespace
from harness.stores.memory import InMemoryStore
from harness.stores.url import STORE_ENV, open_store

if TYPE_CHECKING:
    from harness.stores.redis import DEFAULT_REDIS_URL, RedisStore

__all__ = [
    "DEFAULT_REDIS_URL",
    "STORE_ENV",
    "BaseStore",
    "InMemoryStore",
    "Item",
    "Namespace",
    "RedisStore",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name in ("RedisStore", "DEFAULT_REDIS_URL"):
        from harness.stores import redis

        return getattr(redis, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
