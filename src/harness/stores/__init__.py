"""Key-value stores for the remote filesystem and shared state: in memory, Redis.

``InMemoryStore()`` for one process (tests, demos); ``RedisStore(url, prefix=...)`` for state
several workers or processes share. Both keep versions, so writers can compare-and-set.
"""

from harness.stores.base import BaseStore, Item, Namespace
from harness.stores.memory import InMemoryStore
from harness.stores.redis import DEFAULT_REDIS_URL, RedisStore

__all__ = ["DEFAULT_REDIS_URL", "BaseStore", "InMemoryStore", "Item", "Namespace", "RedisStore"]
