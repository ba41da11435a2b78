"""A key-value store on Redis, shared by every worker and process that points at it.

Build it with ``RedisStore(url, prefix=...)`` (the one way; nothing connects until the first
operation) and close it with ``await store.aclose()``.

Layout, for a store with prefix ``P`` and a namespace ``("a", "b")`` (segments percent-encoded
and joined with ``/``, so no two namespaces share keys)::

    P:{a/b}:items   hash   key -> "<version>|<value as JSON>"
    P:{a/b}:seq     int    the namespace's version counter
    P:{a/b}:keys    zset   every key of the namespace, score 0, so ZRANGEBYLEX walks them in
                           byte order (which for UTF-8 is code point order, as InMemoryStore)

The version lives in the same hash field as the value, so one HGET reads both. Every write is one
Lua script that updates the hash and the key index together, and compares the version first when
asked to: Redis runs a script alone, which makes :meth:`RedisStore.put_if_version` a real
compare-and-set across processes and machines, and the index never disagrees with the items. A
search is a script too, so the keys it lists and the values it returns are one snapshot. Both
keys of a namespace share the hash tag ``{...}``, so a Redis Cluster would keep them on one node.

A write whose reply is lost (a timeout while Redis stalls, a dropped connection) may or may
not have been applied, and a tool must not tell the model a failure that did not happen. So
every write carries an id of its own: the script records ``P:{a/b}:w:<id>`` (the version it
wrote, kept ``WRITE_ID_TTL`` seconds) next to the write, and a write whose id is recorded
already returns that version instead of writing again. After a lost reply the same write is
sent again, up to ``write_attempts`` times with a growing pause: it either finds that it
landed (and answers as if the first reply had come) or lands now, never twice, so a
compare-and-set never reports a conflict it caused itself. Reads are retried the same way.
When Redis stays out of reach, :class:`~harness.errors.StorageError` names the URL and says
that the write's outcome is unknown.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, quote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from harness.errors import ConfigError, StorageError
from harness.stores.base import BaseStore, Item, Namespace
from harness.stores.memory import check_address, check_version, check_window, encode_value

__all__ = ["DEFAULT_REDIS_URL", "RedisStore"]

DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"
"""A Redis on this machine, database 0: where ``RedisStore()`` connects by default."""

WRITE_ID_TTL: Final = 600
"""Seconds a write's id is remembered, so that sending it again after a lost reply is safe."""

_FIRST_PAUSE: Final = 0.1

_T = TypeVar("_T")

# KEYS: items hash, keys zset, version counter, this write's id key.  ARGV: key, value JSON,
# expected version ("" = any, "0" = absent), seconds to remember the write id. Returns the new
# version, or -1 when the expected version did not match (nothing written). Versions come from
# the namespace's counter, so an item deleted and created again never gets a version it had
# before (a stale compare-and-set cannot succeed). A write sent again after a lost reply finds
# its id and returns the version it wrote the first time.
_PUT: Final = """
local done = redis.call('GET', KEYS[4])
if done then
  return tonumber(done)
end
local current = redis.call('HGET', KEYS[1], ARGV[1])
local version = 0
if current then
  version = tonumber(string.sub(current, 1, string.find(current, '|', 1, true) - 1))
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= version then
  return -1
end
version = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], version .. '|' .. ARGV[2])
if not current then
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
end
redis.call('SET', KEYS[4], version, 'EX', ARGV[4])
return version
"""

# KEYS: items hash, keys zset.  ARGV: key.
_DELETE: Final = """
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 0
"""

# KEYS: items hash, keys zset.  ARGV: lex min, lex max, offset, count (-1 = all).
# Returns {keys, fields}: the keys in order and their stored "<version>|<json>" fields.
_SEARCH: Final = """
local keys = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], ARGV[2], 'LIMIT', ARGV[3], ARGV[4])
if #keys == 0 then
  return {{}, {}}
end
return {keys, redis.call('HMGET', KEYS[1], unpack(keys))}
"""


def _redact(url: str) -> str:
    """``url`` without its password, fit for an error message, also when it does not parse."""
    return re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", url)


_USE: Final = "use redis://host:port/db, e.g. redis://127.0.0.1:6379/0"


def _check_url(url: str) -> None:
    """Refuse what redis-py would choke on, or would quietly read otherwise than written.

    redis-py takes a database that is not a number (``redis://host/abc``) as database 0, so a
    typo would share another workspace's data; a malformed host or port raises a bare
    ``ValueError`` from deep in its parser.

    Raises:
        ConfigError: The URL is not a ``redis://``, ``rediss://`` or ``unix://`` URL with a
            numeric port and database.
    """
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number from 0 to 65535 raises here
    except ValueError as exc:
        reason = str(exc)
    else:
        database = parts.path.strip("/") if parts.scheme != "unix" else ""
        database = database or next(
            (value for key, value in parse_qsl(parts.query) if key == "db"), ""
        )
        if parts.scheme not in ("redis", "rediss", "unix"):
            reason = f"the scheme {parts.scheme or '(none)'!r} is not redis, rediss or unix"
        elif database and not database.isdigit():
            reason = f"the database {database!r} is not a number"
        else:
            return
    msg = f"RedisStore URL {_redact(url)!r} is not usable ({reason}); {_USE}"
    raise ConfigError(msg)


def _parse(namespace: Namespace, key: str, field: bytes | str) -> Item:
    text = field.decode() if isinstance(field, bytes) else field
    version, _, value = text.partition("|")
    return Item(namespace, key, json.loads(value), int(version))


class RedisStore(BaseStore):
    """A :class:`~harness.stores.BaseStore` on a Redis server (see the module doc).

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]`` (``rediss://`` for TLS,
            ``unix://`` for a socket).
        prefix: The first part of every Redis key, so several stores (applications, test runs)
            can share one database without seeing each other's data. No ``{``, ``}`` or ``:``.
        connect_timeout: Seconds to wait for a connection before giving up.
        timeout: Seconds to wait for any reply before giving up.
        attempts: How many times an operation whose reply was lost is sent (a write is sent
            again with its id, so it applies once); the pauses between grow from 0.1 s.

    Raises:
        ConfigError: The URL is not a Redis URL, or the prefix is unusable.
    """

    def __init__(
        self,
        url: str = DEFAULT_REDIS_URL,
        *,
        prefix: str = "harness",
        connect_timeout: float = 5.0,
        timeout: float = 30.0,
        attempts: int = 4,
    ) -> None:
        if not prefix or any(ch in prefix for ch in "{}:"):
            msg = f"RedisStore prefix must be non-empty, without '{{', '}}' or ':', got {prefix!r}"
            raise ConfigError(msg)
        _check_url(url)
        if attempts < 1:
            msg = f"RedisStore attempts must be at least 1, got {attempts}"
            raise ConfigError(msg)
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.attempts = attempts
        try:
            # No socket_timeout: redis-py enforces it with asyncio.wait_for, which on Python
            # 3.11 can swallow a cancellation of the caller (so a SIGTERM would not stop a
            # worker). The reply timeout is asyncio.timeout() around each call, in _run.
            self._redis = aioredis.Redis.from_url(
                url,
                socket_connect_timeout=connect_timeout,
                socket_timeout=None,  # redis-py's default is 5 s, through wait_for
                retry=Retry(NoBackoff(), 0),
            )
        except ValueError as exc:
            msg = f"RedisStore URL {_redact(url)!r} is not usable ({exc}); {_USE}"
            raise ConfigError(msg) from exc
        self._put = self._redis.register_script(_PUT)
        self._delete = self._redis.register_script(_DELETE)
        self._search = self._redis.register_script(_SEARCH)

    def __repr__(self) -> str:
        return f"RedisStore({_redact(self.url)!r}, prefix={self.prefix!r})"

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        check_address(namespace, key)
        items = self._items_key(namespace)
        field = await self._run(lambda: self._redis.hget(items, key))
        return None if field is None else _parse(namespace, key, field)

    async def put(self, namespace: Namespace, key: str, value: Mapping[str, Any]) -> int:
        check_address(namespace, key)
        return await self._write(namespace, key, encode_value(namespace, key, value), "")

    async def put_if_version(
        self, namespace: Namespace, key: str, value: Mapping[str, Any], version: int | None
    ) -> int | None:
        check_address(namespace, key)
        check_version(version)
        expected = "0" if version is None else str(version)
        new = await self._write(namespace, key, encode_value(namespace, key, value), expected)
        return None if new < 0 else new

    async def delete(self, namespace: Namespace, key: str) -> None:
        check_address(namespace, key)
        keys = [self._items_key(namespace), self._keys_key(namespace)]
        await self._run(lambda: self._delete(keys=keys, args=[key]))  # twice deletes once

    async def search(
        self, namespace: Namespace, prefix: str = "", *, limit: int | None = None, offset: int = 0
    ) -> list[Item]:
        check_address(namespace, "-")
        check_window(limit, offset)
        if limit == 0:
            return []
        if prefix:
            # Every key that starts with the prefix lies in [prefix, prefix + 0xFF): no UTF-8
            # text contains the byte 0xFF, so nothing after the prefix can reach it.
            low, high = b"[" + prefix.encode(), b"(" + prefix.encode() + b"\xff"
        else:
            low, high = b"-", b"+"
        keys = [self._items_key(namespace), self._keys_key(namespace)]
        count = -1 if limit is None else limit
        found, fields = await self._run(
            lambda: self._search(keys=keys, args=[low, high, offset, count])
        )
        return [
            _parse(namespace, name.decode(), field)
            for name, field in zip(found, fields, strict=True)
            if field is not None
        ]

    async def aclose(self) -> None:
        """Close the connection pool; the store cannot be used afterwards."""
        await self._redis.aclose()

    def _namespace_tag(self, namespace: Namespace) -> str:
        joined = "/".join(quote(segment, safe="") for segment in namespace)
        return f"{self.prefix}:{{{joined}}}"

    def _items_key(self, namespace: Namespace) -> str:
        return f"{self._namespace_tag(namespace)}:items"

    def _keys_key(self, namespace: Namespace) -> str:
        return f"{self._namespace_tag(namespace)}:keys"

    def _seq_key(self, namespace: Namespace) -> str:
        return f"{self._namespace_tag(namespace)}:seq"

    async def _write(self, namespace: Namespace, key: str, text: str, expected: str) -> int:
        """Run the put script once, however many times its reply is lost (see the module doc)."""
        keys = [
            self._items_key(namespace),
            self._keys_key(namespace),
            self._seq_key(namespace),
            f"{self._namespace_tag(namespace)}:w:{secrets.token_hex(12)}",
        ]
        args: list[str | int] = [key, text, expected, WRITE_ID_TTL]
        return int(await self._run(lambda: self._put(keys=keys, args=args), write=True))

    async def _run(self, call: Callable[[], Awaitable[_T]], *, write: bool = False) -> _T:
        """Await a Redis call, sent again after a lost reply; Redis's errors as StorageError."""
        pause = _FIRST_PAUSE
        for attempt in range(1, self.attempts + 1):
            try:
                async with asyncio.timeout(self.timeout):
                    return await call()
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:  # and TimeoutError
                if attempt < self.attempts:
                    await asyncio.sleep(pause)
                    pause *= 2
                    continue
                outcome = " (whether the write was applied is unknown)" if write else ""
                msg = (
                    f"cannot reach Redis at {_redact(self.url)} ({exc}) after {attempt} "
                    f"attempts{outcome}; is redis-server running? start it or pass --store"
                )
                raise StorageError(msg) from exc
            except RedisError as exc:
                msg = f"Redis at {_redact(self.url)} refused the request: {exc}"
                raise StorageError(msg) from exc
        raise AssertionError("unreachable")  # the loop returns or raises
