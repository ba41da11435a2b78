"""MCPToolset against a real MCP server process (the SDK's own server, over stdio)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from _mcp_helpers import alive, other_tasks, stdio_server

from harness.context import RuntimeContext
from harness.kernel import Tool, ToolUseBlock
from harness.mcp import MCPServerConfig, MCPToolset

WARNING_PREFIX = "MCP server 'broken' is not available, the agent runs without its tools: "


async def run(tools: list[Tool], name: str, **arguments: object) -> tuple[bool, str]:
    """Call a tool as the agent's toolkit would; (is_error, output text)."""
    tool = next(tool for tool in tools if tool.name == name)
    result = await tool.run(ToolUseBlock(id="t1", name=name, input=arguments), RuntimeContext())
    assert isinstance(result.output, str)
    return result.is_error, result.output


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_tools_are_listed_under_server_names_with_their_schemas() -> None:
    async with MCPToolset([stdio_server("calc")]) as toolset:
        by_name = {tool.name: tool for tool in toolset.tools}

        assert sorted(by_name) == [
            "calc__add",
            "calc__crash",
            "calc__echo",
            "calc__fail",
            "calc__pid",
            "calc__slow",
        ]
        add = by_name["calc__add"].schema
        assert add.description == "Add two integers."
        assert add.parameters == {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
        assert by_name["calc__echo"].schema.parameters["properties"]["times"] == {
            "type": "integer",
            "default": 1,
        }
        assert by_name["calc__pid"].schema.parameters == {"type": "object", "properties": {}}


async def test_calls_return_the_text_and_errors_become_error_results() -> None:
    async with MCPToolset([stdio_server("calc")]) as toolset:
        tools = toolset.tools

        assert await run(tools, "calc__add", a=2, b=40) == (False, "42")
        assert await run(tools, "calc__echo", text="hi", times=3) == (False, "hi hi hi")
        is_error, text = await run(tools, "calc__fail", reason="bad input")
        assert is_error
        assert text == (
            "Error: MCPToolError: MCP server 'calc' answered the call of 'fail' with an error: "
            "Error executing tool fail: failed on purpose: bad input"
        )
        is_error, text = await run(tools, "calc__add", a="two")
        assert is_error
        assert "a: 'two' is not of type 'integer'" in text  # the schema's word, before the server
        # a failed call leaves the server usable
        assert await run(tools, "calc__add", a=1, b=1) == (False, "2")


async def test_allow_and_deny_lists_choose_the_tools() -> None:
    servers = [
        stdio_server("only", allow=("add", "echo", "missing"), deny=("echo",)),
        stdio_server("most", deny=("crash", "fail", "slow", "pid")),
    ]

    async with MCPToolset(servers) as toolset:
        assert sorted(tool.name for tool in toolset.tools) == [
            "most__add",
            "most__echo",
            "only__add",
        ]


async def test_allow_list_names_a_tool_the_server_lacks(caplog: pytest.LogCaptureFixture) -> None:
    async with MCPToolset([stdio_server("calc", allow=("add", "ad"))]) as toolset:
        assert [tool.name for tool in toolset.tools] == ["calc__add"]

    assert any(
        "MCP server 'calc' has no tools ['ad'] named in its allow list" in text
        for text in warnings(caplog)
    )


async def test_a_command_that_does_not_exist_is_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = MCPServerConfig(name="broken", command="/nonexistent/mcp-server")

    async with MCPToolset([broken, stdio_server("calc", allow=("add",))]) as toolset:
        assert [tool.name for tool in toolset.tools] == ["calc__add"]
        assert toolset.failures == {"broken": "its command '/nonexistent/mcp-server' was not found"}

    assert [text for text in warnings(caplog) if "broken" in text] == [
        WARNING_PREFIX + "its command '/nonexistent/mcp-server' was not found"
    ]


async def test_a_server_that_exits_at_start_is_reported_with_its_stderr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MCPToolset([stdio_server("broken", "--crash-on-start")]) as toolset:
        assert toolset.tools == []

    (warning,) = warnings(caplog)
    assert warning.startswith(WARNING_PREFIX)
    assert warning.endswith("its stderr ends with: this server refuses to start")


async def test_a_server_that_does_not_start_in_time_is_given_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow = stdio_server("broken", "--start-delay", "60", startup_timeout=0.5)
    started = time.perf_counter()

    async with MCPToolset([slow]) as toolset:
        assert toolset.tools == []

    # 0.5 s to give up, then the SDK's bounded shutdown (stdin closed, 2 s, then SIGTERM)
    assert time.perf_counter() - started < 10
    assert warnings(caplog) == [WARNING_PREFIX + "it did not start within 0.5 s"]
    assert other_tasks() == set()


async def test_a_server_that_dies_during_a_call(caplog: pytest.LogCaptureFixture) -> None:
    async with MCPToolset([stdio_server("calc")]) as toolset:
        tools = toolset.tools
        _, pid = await run(tools, "calc__pid")

        is_error, text = await run(tools, "calc__crash")
        assert is_error
        assert text == (
            "Error: MCPServerUnavailable: MCP server 'calc' stopped: it closed the connection "
            "during a call of 'crash'"
        )
        is_error, text = await run(tools, "calc__add", a=1, b=2)
        assert is_error
        assert "MCP server 'calc' is not running (it closed the connection" in text
        assert not alive(int(pid)) or await _exits(int(pid))

    assert warnings(caplog) == [
        "MCP server 'calc' stopped: it closed the connection during a call of 'crash'"
    ]


async def test_a_call_that_takes_too_long_times_out() -> None:
    async with MCPToolset([stdio_server("calc", call_timeout=0.3)]) as toolset:
        is_error, text = await run(toolset.tools, "calc__slow", seconds=5)
        assert is_error
        assert (
            text == "Error: MCPToolError: MCP server 'calc' did not answer tool 'slow' within 0.3 s"
        )
        assert await run(toolset.tools, "calc__add", a=1, b=2) == (False, "3")


async def test_aclose_stops_every_process_and_leaves_no_task() -> None:
    toolset = MCPToolset([stdio_server("one"), stdio_server("two")])
    tools = await toolset.start()
    pids = [int((await run(tools, f"{name}__pid"))[1]) for name in ("one", "two")]
    assert all(alive(pid) for pid in pids)

    await toolset.aclose()

    assert [alive(pid) for pid in pids] == [False, False]
    assert other_tasks() == set()
    is_error, text = await run(tools, "one__add", a=1, b=2)
    assert is_error
    assert "MCP server 'one' is not running (it was closed)" in text
    await toolset.aclose()  # idempotent


async def test_cancelling_a_start_leaves_nothing_behind() -> None:
    toolset = MCPToolset([stdio_server("calc")])
    task = asyncio.create_task(toolset.start())
    await asyncio.sleep(0.3)  # the process is running, the handshake is not done
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task

    assert other_tasks() == set()
    assert toolset.connections[0].running is False


def test_server_names_must_differ() -> None:
    with pytest.raises(ValueError, match=r"used more than once: \['a'\]"):
        MCPToolset([stdio_server("a"), stdio_server("a")])


async def _exits(pid: int) -> bool:
    for _ in range(100):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False
