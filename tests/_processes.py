"""Servers the tests start themselves: a free port, waiting until one answers, stopping it.

Shared by the fixtures in conftest.py (redis-server, llama_cpp.server), the contract suite's
process-wide redis-server and the MCP HTTP tests.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers_ping(port: int) -> bool:
    """Whether a Redis server on ``port`` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def wait_until_ready(
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    name: str,
    *,
    timeout: float,
    log: Path | None = None,
) -> None:
    """Fail the test, with the server's log, if it exits or is not ready within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            output = f":\n{log.read_text()}" if log is not None else ""
            pytest.fail(f"{name} did not start{output}")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a server: politely, then for good after ten seconds."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def running_server(
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    name: str,
    *,
    timeout: float,
    log: Path | None = None,
) -> Iterator[None]:
    """The block runs once the server is ready; the server is stopped on the way out."""
    try:
        wait_until_ready(process, ready, name, timeout=timeout, log=log)
        yield
    finally:
        stop(process)
