"""The remote filesystem's contract backends: over an in-memory store and over a real Redis.

``redis-store`` needs a redis-server; the factory cannot ask for the ``redis_url`` fixture, so
:func:`shared_redis_url` starts one redis-server for the whole test process on first use (on a
free port, nothing persisted) and stops it when the process exits. Each test gets its own key
prefix, so tests never see each other's files. Without redis-server the factory skips outside
CI and fails in CI, with the same reason as the ``redis_url`` fixture.
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from _processes import answers_ping, free_port, stop, wait_until_ready
from _required import unavailable
from harness.filesystem import AbstractFilesystem, RemoteFilesystem
from harness.stores import InMemoryStore, RedisStore

REDIS_MISSING = "redis-server is not installed (apt-get install redis-server)"

_server: dict[str, str] = {}


def shared_redis_url() -> str:
    """The URL of this process's redis-server, started on the first call (blocking)."""
    if "url" in _server:
        return _server["url"]
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable(REDIS_MISSING)
    port = free_port()
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    atexit.register(stop, process)
    wait_until_ready(
        process, lambda: answers_ping(port), f"redis-server on port {port}", timeout=10
    )
    _server["url"] = f"redis://127.0.0.1:{port}/0"
    return _server["url"]


@asynccontextmanager
async def _memory_store(tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    yield RemoteFilesystem(InMemoryStore())


@asynccontextmanager
async def _redis_store(tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    url = await asyncio.to_thread(shared_redis_url)
    store = RedisStore(url, prefix=f"contract-{uuid.uuid4().hex}")
    try:
        yield RemoteFilesystem(store)
    finally:
        await store.aclose()


# The shape of _backends.Factory, not imported from there: _backends imports this module while
# it is still being initialized.
FACTORIES: dict[str, Callable[[Path], AbstractAsyncContextManager[AbstractFilesystem]]] = {
    "memory-store": _memory_store,
    "redis-store": _redis_store,
}
