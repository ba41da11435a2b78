"""One connection to one MCP server, owned from connect to close by one background task.

The SDK's transports and sessions are anyio context managers with task groups and cancel
scopes inside, which must be entered and exited by the same task. A call of the agent is not
that task (each call is its own task, and the first one ends long before the agent closes), so
every server gets a task of its own, :meth:`MCPConnection._own`, that opens the client, lists
the tools, and then holds the connection open until :meth:`MCPConnection.aclose` or until the
server goes away. Tool calls are plain requests on the open session and may come from any task.

What can go wrong, and what the caller sees:

- the server does not start (no such command, it exits, it is not listening, it takes longer
  than ``startup_timeout``): :meth:`~MCPConnection.start` raises :class:`MCPServerUnavailable`
  with the reason, including the last lines the server wrote to stderr;
- the server dies later: the call in flight and every later call raise
  :class:`MCPServerUnavailable` saying so; the connection is not restarted;
- the server answers a call with an error, or the call times out: :class:`MCPToolError`.

A stdio server's stderr goes to a temporary file rather than the terminal (a chat would be
drowned in server logs); its tail explains a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any, Final

from harness.errors import ConfigError, MCPServerUnavailable, MCPToolError, install_hint
from harness.mcp.config import MCPServerConfig

if TYPE_CHECKING:
    import mcp
    from mcp_types import CallToolResult
    from mcp_types import Tool as MCPTool

__all__ = ["MCPConnection", "MCPServerUnavailable", "MCPToolError", "import_sdk"]

logger = logging.getLogger(__name__)

INSTALL_HINT: Final = install_hint("mcp")
MAX_TOOL_PAGES: Final = 100
"""Pages of ``tools/list`` read at most, so a server that paginates forever cannot hang startup."""
STDERR_TAIL_LINES: Final = 5


def import_sdk() -> Any:
    """Import the ``mcp`` SDK (an optional extra), or say how to install it.

    Raises:
        ConfigError: ``mcp`` is not installed, or is a 1.x release without the 2.x client API.
    """
    try:
        import mcp
        from mcp import Client  # noqa: F401 - the 2.x API this module uses
    except ImportError as exc:
        msg = f"MCP servers need the mcp package (2.x): {INSTALL_HINT} ({exc})"
        raise ConfigError(msg) from exc
    return mcp


class MCPConnection:
    """The connection to one MCP server.

    Args:
        config: The server and its settings.
    """

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.failure: str | None = None
        """Why the server is not running, once it is not (None while it is or before start)."""
        self._client: mcp.Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[list[MCPTool]] | None = None
        self._stop = asyncio.Event()
        self._scope: Any = None  # anyio.CancelScope of the owner task
        self._stderr: IO[str] | None = None
        self._closing = False

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def running(self) -> bool:
        return self._client is not None

    async def start(self) -> list[MCPTool]:
        """Start the server, connect, and return its tools (every page of ``tools/list``).

        Raises:
            MCPServerUnavailable: It did not start, with the reason.
            ConfigError: The ``mcp`` package is missing.
        """
        if self._task is not None:
            msg = f"MCP server {self.name!r} was already started"
            raise RuntimeError(msg)
        # Importing the SDK reads many files: off the event loop's thread.
        await asyncio.to_thread(import_sdk)
        self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[MCPTool]] = self._loop.create_future()
        self._ready = ready
        if self.config.transport == "stdio":
            self._stderr = await asyncio.to_thread(
                tempfile.TemporaryFile, "w+", encoding="utf-8", errors="replace"
            )
        self._task = asyncio.create_task(self._own(), name=f"mcp-server:{self.name}")
        try:
            async with asyncio.timeout(self.config.startup_timeout):
                return await asyncio.shield(ready)
        except TimeoutError:
            reason = f"it did not start within {self.config.startup_timeout:g} s"
            self.failure = await self._with_stderr(reason)
            await self.aclose()
            raise MCPServerUnavailable(self.failure) from None
        except MCPServerUnavailable:
            await self.aclose()
            raise
        except BaseException:  # cancelled while starting: leave nothing behind
            await asyncio.shield(self.aclose())
            raise

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one of the server's tools and return the server's result as it is.

        Raises:
            MCPServerUnavailable: The server is not running, or died during the call.
            MCPToolError: The call timed out or the server refused the request.
        """
        client = self._client
        if client is None:
            msg = (
                f"MCP server {self.name!r} is not running ({self.failure or 'it was closed'}); "
                "its tools cannot be used now"
            )
            raise MCPServerUnavailable(msg)
        if asyncio.get_running_loop() is not self._loop:
            msg = (
                f"MCP server {self.name!r} was started on another event loop; an agent with "
                "MCP servers must be used from one event loop"
            )
            raise RuntimeError(msg)
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        try:
            return await client.call_tool(
                tool, arguments, read_timeout_seconds=self.config.call_timeout
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                msg = (
                    f"MCP server {self.name!r} did not answer tool {tool!r} within "
                    f"{self.config.call_timeout:g} s"
                )
                raise MCPToolError(msg) from None
            if exc.code == CONNECTION_CLOSED:
                await self._lost(f"it closed the connection during a call of {tool!r}")
                raise MCPServerUnavailable(
                    f"MCP server {self.name!r} stopped: {self.failure}"
                ) from None
            msg = f"MCP server {self.name!r} refused the call of {tool!r}: {exc}"
            raise MCPToolError(msg) from None

    async def aclose(self) -> None:
        """Close the session and stop the server; waits until both are gone. Idempotent."""
        self._closing = True
        task = self._task
        if task is not None and not task.done():
            self._stop.set()
            if self._client is None and self._scope is not None:
                self._scope.cancel()  # still starting: abandon the handshake
            # The SDK's own shutdown is bounded (about 6 s for a server that ignores signals).
            await asyncio.shield(task)
        if self._stderr is not None:
            stderr, self._stderr = self._stderr, None
            await asyncio.to_thread(stderr.close)

    # -- the owner task -------------------------------------------------------------------

    async def _own(self) -> None:
        """Open the client, hand the tools over, and hold the connection until told to stop."""
        import anyio

        ready = self._ready
        assert ready is not None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with self._open() as client:
                    tools = await _list_tools(client)
                    self._client = client
                    if not ready.done():
                        ready.set_result(tools)
                    await self._stop.wait()
        except Exception as exc:
            reason = await self._with_stderr(_describe(exc, self.config))
            if self._closing:
                logger.debug("MCP server %r: error while closing: %s", self.name, reason)
            elif not ready.done():
                self.failure = reason
                _fail(ready, reason)
            elif self.failure is None:
                self.failure = reason
                logger.warning("MCP server %r stopped: %s", self.name, reason)
        finally:
            self._client = None
            if not ready.done():
                _fail(ready, self.failure or "it was closed while starting")

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[mcp.Client]:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        config = self.config
        async with contextlib.AsyncExitStack() as stack:
            if config.command is not None:
                params = StdioServerParameters(
                    command=config.command,
                    args=list(config.args),
                    env=dict(config.env) or None,
                    cwd=config.cwd,
                )
                errlog: Any = self._stderr
                transport: Any = stdio_client(params, errlog=errlog)
            else:
                assert config.url is not None
                http_client = None
                if config.headers:
                    import httpx2

                    http_client = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=dict(config.headers),
                            timeout=httpx2.Timeout(30.0, read=300.0),
                        )
                    )
                transport = streamable_http_client(config.url, http_client=http_client)
            client = await stack.enter_async_context(Client(transport))
            yield client

    async def _lost(self, reason: str) -> None:
        """The server is gone: remember why, log it once, and let the owner task finish."""
        if self.failure is None:
            self.failure = await self._with_stderr(reason)
            logger.warning("MCP server %r stopped: %s", self.name, self.failure)
        self._client = None
        self._stop.set()

    async def _with_stderr(self, reason: str) -> str:
        """The reason, followed by the last lines the server wrote to stderr (if any)."""
        stderr = self._stderr
        if stderr is None:
            return reason
        tail = await asyncio.to_thread(_tail, stderr)
        return f"{reason}; its stderr ends with: {tail}" if tail else reason


def _fail(ready: asyncio.Future[list[MCPTool]], reason: str) -> None:
    ready.set_exception(MCPServerUnavailable(reason))
    ready.exception()  # retrieved: nobody may be waiting any more (a start that timed out)


async def _list_tools(client: mcp.Client) -> list[MCPTool]:
    tools: list[MCPTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _tail(stream: IO[str]) -> str:
    try:
        stream.flush()
        stream.seek(0)
        lines = [line.strip() for line in stream.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return " | ".join(lines[-STDERR_TAIL_LINES:])


def _describe(exc: BaseException, config: MCPServerConfig) -> str:
    """A one-line reason for a failure to connect, from the innermost useful exception."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and config.command is not None:
        return f"its command {config.command!r} was not found"
    if isinstance(exc, PermissionError) and config.command is not None:
        return f"its command {config.command!r} is not executable"
    text = str(exc) or type(exc).__name__
    if text == "Connection closed":
        return "it closed the connection (the process exited?)"
    return f"{type(exc).__name__}: {text}"
