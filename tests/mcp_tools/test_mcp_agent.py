"""MCP tools through a HarnessAgent: MCPHook starts the servers at the first call."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from _mcp_helpers import SERVER, alive, stdio_server

from _outcomes import answer, waits
from harness import HarnessAgent, Hook, RuntimeContext
from harness.approvals import ReviewerDecision
from harness.errors import ConfigError, InvalidDecision
from harness.kernel import Event, PreReasoning
from harness.mcp import MCPHook, MCPServerConfig
from harness.models import ScriptedChatModel


class ToolNames(Hook):
    """Records the tool names offered at each reasoning step."""

    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning,)

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PreReasoning)
        self.seen.append([tool.name for tool in event.tools])


def agent_with(
    workspace: Path, model: ScriptedChatModel, mcp: MCPHook, *hooks: Hook
) -> HarnessAgent:
    """An agent given the hook: the kernel attaches it to the agent's own toolkit."""
    return HarnessAgent(model=model, workspace=workspace, memory=None, hooks=[mcp, *hooks])


def tool_results(model: ScriptedChatModel) -> list[str]:
    """The tool results in the conversation of the model's last request."""
    return [result.text for message in model.requests[-1] for result in message.tool_results]


async def test_the_model_calls_an_mcp_tool_and_gets_the_result(workspace: Path) -> None:
    model = ScriptedChatModel(
        [
            {"tool_calls": [{"name": "calc__add", "input": {"a": 19, "b": 23}}]},
            {"match": "42", "text": "19 + 23 = 42"},
        ]
    )
    names = ToolNames()
    mcp = MCPHook([stdio_server("calc")])
    agent = agent_with(workspace, model, mcp, names)
    try:
        reply = answer(await agent.call("what is 19 + 23?", ctx=RuntimeContext(session_id="s")))
    finally:
        await agent.aclose()
        await mcp.aclose()

    assert reply.text == "19 + 23 = 42"
    assert tool_results(model) == ["42"]
    assert "calc__add" in names.seen[0]  # offered from the first step
    assert "calc__add" not in agent.delegate.toolkit  # aclose removed them


async def test_a_server_that_crashes_mid_call_leaves_the_agent_working(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel(
        [
            {"tool_calls": [{"name": "calc__crash", "input": {}}]},
            {"match": "stopped", "tool_calls": [{"name": "calc__add", "input": {"a": 1, "b": 2}}]},
            {"match": "not running", "text": "the calculator is gone"},
            {"text": "still here"},
        ]
    )
    mcp = MCPHook([stdio_server("calc")])
    agent = agent_with(workspace, model, mcp)
    try:
        first = answer(await agent.call("crash it"))
        second = answer(await agent.call("are you there?"))
    finally:
        await mcp.aclose()

    assert (first.text, second.text) == ("the calculator is gone", "still here")
    assert tool_results(model) == [
        "Error: MCPServerUnavailable: MCP server 'calc' stopped: it closed the connection "
        "during a call of 'crash'",
        "Error: MCPServerUnavailable: MCP server 'calc' is not running (it closed the "
        "connection during a call of 'crash'); its tools cannot be used now",
    ]
    stopped = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(stopped) == 1


async def test_a_missing_command_is_one_warning_and_the_agent_answers(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedChatModel([{"text": "hello", "repeat": True}])
    names = ToolNames()
    mcp = MCPHook([MCPServerConfig(name="ghost", command="/nonexistent/mcp-server")])
    agent = agent_with(workspace, model, mcp, names)
    try:
        replies = [
            (answer(await agent.call("hi"))).text,
            (answer(await agent.call("hi again"))).text,
        ]
    finally:
        await mcp.aclose()

    assert replies == ["hello", "hello"]
    assert not any(name.startswith("ghost__") for name in names.seen[0])
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "MCP server 'ghost' is not available, the agent runs without its tools: "
        "its command '/nonexistent/mcp-server' was not found"
    ]


async def test_servers_come_from_the_operators_tools_json(workspace: Path) -> None:
    config = workspace.parent / "operator" / "tools.json"
    config.parent.mkdir()
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": sys.executable,
                        "args": [str(SERVER)],
                        "allow": ["echo", "pid"],
                    }
                }
            }
        )
    )
    model = ScriptedChatModel(
        [
            {"tool_calls": [{"name": "files__pid", "input": {}}]},
            {"text": "done"},
        ]
    )
    names = ToolNames()
    # HarnessAgent's own MCPHook: the servers given in code and those of tools.json.
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        hooks=[names],
        mcp_servers=[stdio_server("calc", allow=("add",))],
        mcp_config=config,
    )
    try:
        assert (answer(await agent.call("pid?"))).text == "done"
        pid = int(tool_results(model)[0])
        assert alive(pid)
    finally:
        await agent.aclose()

    assert {"calc__add", "files__echo", "files__pid"} <= set(names.seen[0])
    assert "files__add" not in names.seen[0]
    assert not alive(pid)


async def test_a_malformed_tools_json_fails_the_call_with_a_clear_error(workspace: Path) -> None:
    config = workspace.parent / "tools.json"
    config.write_text('{"mcpServers": {"x": {"command": "a", "url": "b"}}}')
    model = ScriptedChatModel([{"text": "never"}])
    agent = HarnessAgent(model=model, workspace=workspace, memory=None)
    mcp = MCPHook(config_file=config, workspace=agent.workspace, toolkit=agent.delegate.toolkit)

    where = re.escape(str(config))
    with pytest.raises(ConfigError, match=rf"^{where}: MCP server 'x' needs exactly one of"):
        await mcp.start()


async def test_a_missing_operator_file_is_a_config_error_naming_it(workspace: Path) -> None:
    agent = HarnessAgent(
        model=ScriptedChatModel([{"text": "never"}]),
        workspace=workspace,
        memory=None,
        mcp_config=workspace.parent / "nope.json",
    )
    try:
        with pytest.raises(ConfigError, match=r"no MCP configuration at .*nope\.json"):
            answer(await agent.call("hi"))
    finally:
        await agent.aclose()


async def test_a_hook_without_a_toolkit_says_so() -> None:
    with pytest.raises(RuntimeError, match="register it with an agent, or give toolkit="):
        await MCPHook([]).start()


async def test_allowed_tools_keeps_the_other_mcp_tools_out_and_unused_servers_off(
    workspace: Path,
) -> None:
    model = ScriptedChatModel([{"text": "ok", "repeat": True}])
    names = ToolNames()
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        hooks=[names],
        mcp_servers=[stdio_server("calc"), stdio_server("idle")],
        allowed_tools=["calc__add"],
    )
    try:
        answer(await agent.call("hi", ctx=RuntimeContext(session_id="s")))
        assert agent.mcp.toolset is not None
        started = {connection.name for connection in agent.mcp.toolset.connections}
    finally:
        await agent.aclose()
    assert names.seen[0] == ["calc__add"]
    assert started == {"calc"}  # none of idle's tools is allowed: it never ran


async def test_an_mcp_tools_schema_checks_the_models_call_and_a_reviewers_edit(
    workspace: Path,
) -> None:
    """The server's input schema is checked here: a call that does not fit it never reaches the
    server, and a reviewer's edit with a typo is refused when it is recorded, so the approval
    is not used up (it once ran and failed, and the approval was gone)."""
    model = ScriptedChatModel(
        [
            {"match": "^add", "tool_calls": [{"name": "calc__add", "input": {"a": "x"}}]},
            {"match": "Error", "text": "could not add"},
            {"match": "^echo", "tool_calls": [{"name": "calc__echo", "input": {"text": "hi"}}]},
            {"match": "fixed", "text": "echoed"},
        ]
    )
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        mcp_servers=[stdio_server("calc")],
        approvals={"calc__echo": True},
    )
    ctx = RuntimeContext(session_id="s")
    try:
        assert answer(await agent.call("add them", ctx=ctx)).text == "could not add"
        [refused] = tool_results(model)
        assert "required" in refused  # said by the schema, not the server
        assert "b" in refused

        [request] = waits(await agent.call("echo it", ctx=ctx)).pending
        typo = ReviewerDecision("edit", arguments={"txt": "fixed"})
        with pytest.raises(InvalidDecision, match="'text' is a required property"):
            await agent.decide({request["id"]: typo}, ctx=ctx)
        fixed = ReviewerDecision("edit", arguments={"text": "fixed", "times": 2})
        assert answer(await agent.resume({request["id"]: fixed}, ctx=ctx)).text == "echoed"
    finally:
        await agent.aclose()
    assert tool_results(model)[-1].startswith("fixed fixed")
