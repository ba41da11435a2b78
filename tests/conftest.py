from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from _backends import FACTORIES, open_backend
from harness.context import RuntimeContext
from harness.filesystem import AbstractFilesystem, SandboxFilesystem

_ENV = (
    "HARNESS_WORKSPACE",
    "HARNESS_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No test reads the developer's keys, model or workspace, or writes to their home."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


# -- a real Redis for the store tests (tests/stores/, tests/contract/) --------------------------

REDIS_MISSING = "redis-server is not installed (apt-get install redis-server)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this test run alone, on a free port, with nothing persisted.

    Without redis-server the tests that need it skip outside CI and fail in CI, where
    scripts/check installs it.
    """
    server = shutil.which("redis-server")
    if server is None:
        if os.environ.get("CI"):
            pytest.fail(REDIS_MISSING)
        pytest.skip(REDIS_MISSING)
    port = _free_port()
    log = tmp_path_factory.mktemp("redis") / "redis.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                server,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 10
        while not _answers_ping(port):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server on port {port} did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- a working bubblewrap sandbox (tests/sandbox/, tests/tools/) ---------------------------------


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxFilesystem]:
    """A working sandbox over ``tmp_path/workspace``; a skip outside CI, a failure in CI."""
    fs = SandboxFilesystem(tmp_path / "workspace", timeout_seconds=30)
    problem = await fs.check()
    if problem is not None:
        reason = f"the bubblewrap sandbox does not work here: {problem}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        print(f"skipping: {reason}")
        pytest.skip(reason)
    try:
        yield fs
    finally:
        await fs.aclose()


# -- the filesystem contract suites (tests/contract/): one ``fs`` per registered backend ----------
# ``fs`` is parametrized over _backends.FACTORIES (ids are the backend names, so ``-k local`` or
# ``-k redis-store`` selects one). ``alice`` and ``bob`` are two users; ``nouser`` is a call
# without a user, which sees the shared root but not ``users/``; ``ctx=None`` is the harness
# itself, which sees the whole workspace.


@pytest.fixture(params=sorted(FACTORIES))
def backend_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def fs(backend_name: str, tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    async with open_backend(backend_name, tmp_path) as backend:
        yield backend


@pytest.fixture
def alice() -> RuntimeContext:
    return RuntimeContext(session_id="s-alice", user_id="alice")


@pytest.fixture
def bob() -> RuntimeContext:
    return RuntimeContext(session_id="s-bob", user_id="bob")


@pytest.fixture
def nouser() -> RuntimeContext:
    return RuntimeContext(session_id="s-shared")
