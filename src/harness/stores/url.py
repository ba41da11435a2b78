"""Opening a store from a URL, as the command line's ``--store`` and ``$HARNESS_STORE`` give it."""

from __future__ import annotations

from typing import Final

from harness.errors import ConfigError
from harness.stores.base import BaseStore

__all__ = ["STORE_ENV", "open_store"]

STORE_ENV: Final = "HARNESS_STORE"


def open_store(url: str) -> BaseStore:
    """``redis://host:port/db`` (or ``rediss://``) opens a :class:`RedisStore`.

    Raises:
        ConfigError: The URL names no store this package knows.
    """
    if url.startswith(("redis://", "rediss://", "unix://")):
        from harness.stores.redis import RedisStore

        return RedisStore(url)
    msg = f"unknown store {url!r}; use redis://host:port/db (e.g. redis://127.0.0.1:6379/0)"
    raise ConfigError(msg)
