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
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from harness.filesystem import AbstractFilesystem, RemoteFilesystem
from harness.stores import InMemoryStore, RedisStore

REDIS_MISSING = "redis-server is not installed (apt-get install redis-server)"

_server: dict[str, str] = {}


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def shared_redis_url() -> str:
    """The URL of this process's redis-server, started on the first call (blocking)."""
    if "url" in _server:
        return _server["url"]
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(REDIS_MISSING)
        pytest.skip(REDIS_MISSING)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    atexit.register(_stop, process)
    deadline = time.monotonic() + 10
    while not _answers_ping(port):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"redis-server on port {port} did not start")
        time.sleep(0.05)
    _server["url"] = f"redis://127.0.0.1:{port}/0"
    return _server["url"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


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
