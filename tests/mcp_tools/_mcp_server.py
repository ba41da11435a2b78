"""A small MCP server for the tests, written with the SDK's own MCPServer (FastMCP in mcp 1.x).

Run as a script, it serves over stdio (the default) or streamable HTTP::

    python _mcp_server.py [--http PORT] [--start-delay SECONDS] [--crash-on-start]

Its tools exercise what the client must handle: a plain result (``add``, ``echo``), an
anticipated failure (``fail``), a server process that dies in the middle of a call
(``crash``), a call that takes a while (``slow``) and its own process id (``pid``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer = MCPServer("test-server", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat a text."""
    return " ".join([text] * times)


@server.tool()
def fail(reason: str) -> str:
    """Fail on purpose with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
def crash() -> str:
    """Kill the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after a while."""
    await anyio.sleep(seconds)
    return "done"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--crash-on-start", action="store_true")
    args = parser.parse_args()
    if args.crash_on_start:
        print("this server refuses to start", file=sys.stderr)
        sys.exit(2)
    if args.start_delay:
        time.sleep(args.start_delay)
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
