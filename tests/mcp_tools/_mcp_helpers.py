"""Shared pieces of the MCP tests: the test server's configs, and leak checks."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from harness.mcp import MCPServerConfig

SERVER = Path(__file__).with_name("_mcp_server.py")


def stdio_server(name: str = "calc", *args: str, **settings: object) -> MCPServerConfig:
    """The test server over stdio, run by this interpreter."""
    return MCPServerConfig(
        name=name,
        command=sys.executable,
        args=(str(SERVER), *args),
        **settings,  # type: ignore[arg-type]
    )


def alive(pid: int) -> bool:
    """Whether a process exists (a zombie counts: it was never reaped)."""
    return Path(f"/proc/{pid}").exists() if sys.platform == "linux" else _signal_zero(pid)


def _signal_zero(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def other_tasks() -> set[asyncio.Task[object]]:
    """The tasks of the running loop besides the current one."""
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current}
