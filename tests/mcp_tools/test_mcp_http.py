"""MCPToolset over streamable HTTP, against the test server run by uvicorn on a free port."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from _mcp_helpers import SERVER, other_tasks

from _processes import free_port, running_server
from harness.context import RuntimeContext
from harness.kernel import ToolUseBlock
from harness.mcp import MCPServerConfig, MCPToolset


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def http_url() -> Iterator[str]:
    """The /mcp endpoint of a server process of this test alone; stopped afterwards."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with running_server(
        process, lambda: _listening(port), f"the MCP test server on port {port}", timeout=30
    ):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_tools_over_streamable_http(http_url: str) -> None:
    server = MCPServerConfig(name="web", url=http_url, allow=("add", "fail"))

    async with MCPToolset([server]) as toolset:
        tools = {tool.name: tool for tool in toolset.tools}
        assert sorted(tools) == ["web__add", "web__fail"]
        assert tools["web__add"].schema.parameters["required"] == ["a", "b"]

        ok = await tools["web__add"].run(
            ToolUseBlock(id="1", name="web__add", input={"a": 5, "b": 6}), RuntimeContext()
        )
        failed = await tools["web__fail"].run(
            ToolUseBlock(id="2", name="web__fail", input={"reason": "r"}), RuntimeContext()
        )

    assert (ok.is_error, ok.output) == (False, "11")
    assert failed.is_error
    assert isinstance(failed.output, str)
    assert failed.output.endswith("failed on purpose: r")
    assert other_tasks() == set()


async def test_a_server_with_headers_uses_its_own_http_client_and_closes_it(http_url: str) -> None:
    server = MCPServerConfig(name="web", url=http_url, headers={"X-Test": "1"}, allow=("echo",))

    async with MCPToolset([server]) as toolset:
        (echo,) = toolset.tools
        result = await echo.run(
            ToolUseBlock(id="1", name="web__echo", input={"text": "hey"}), RuntimeContext()
        )
        assert result.output == "hey"

    assert other_tasks() == set()


async def test_nothing_listening_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"

    async with MCPToolset([MCPServerConfig(name="down", url=url, startup_timeout=5)]) as toolset:
        assert toolset.tools == []
        assert set(toolset.failures) == {"down"}

    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith("MCP server 'down' is not available, the agent runs without")
